//! The contextual stage per (model, domain), beyond the paper: does the model's internal
//! truth representation of a statement move when a belief context is in its input? The
//! held-out True statements are read after each Θ's belief context — the behavioral stage's
//! draws (its K values, baselines and main draws) — and judged by the representational
//! stage's **baseline** probes (trained without context; sAwMIL and Mass-Mean at their
//! layers). Retractions and expansions are counted as for the other instantiations, with
//! `instantiation = contextual`.
//!
//! The input of a statement is the one its probe was trained on with the context spliced in:
//! the tokens before the statement (BOS, the chat template's opening of the user turn), the
//! context's lines, then the statement's own tokens and what follows them (the end of the
//! turn). A probe reads the same tokens it was trained on; the ones before the context are
//! unchanged (causal attention), every other one now attends to the context. With an empty
//! context the input is exactly the representational stage's. The context's tokens are
//! computed once per unit and every statement continues their KV cache.
//!
//! A unit reads every probe of its cell, which the shards of a run fit apart, so the stage
//! runs where the run is assembled (as the clustering does).

use crate::config::RunConfig;
use crate::io::{read_record, write_manifest, write_record_vouching};
use crate::progress::Progress;
use crate::stage::{Cell, CellPlan, Handoff, Stage, Tables};
use crate::study::Study;
use crate::unit::{PlannedUnit, UnitKey, Work};
use anyhow::{Context as _, bail};
use pstat_data::Condition;
use pstat_data::artifact::sha256_hex;
use pstat_probe::TrainedProbe;
use pstat_probe::perturbation::ProbeJudgment;
use pstat_prompt::{Baseline, Draw, TrainingPool};
use pstat_stability::{Bootstrap, Judgments, RowKey, StabilityRow, compare, stability_row};
use pstat_tables::{Instantiation, MAIN_VARIANT, Probe, main_k};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The stage's name, and its folder in a cell.
const NAME: &str = "contextual";

/// Statements per forward call: the granularity of progress and of the memory held.
const STATEMENTS_PER_CALL: usize = pstat_prompt::embedded::STATEMENTS_PER_CALL;

/// The contextual stage: the baseline probes under every Θ's belief context.
pub struct Contextual;

impl Stage for Contextual {
    fn name(&self) -> &'static str {
        NAME
    }

    /// It reads the representational stage's probes and the behavioral stage's contexts, so
    /// it runs where both of them do.
    fn enabled(&self, config: &RunConfig) -> bool {
        config.contextual.enabled
            && config.representational.enabled
            && !config.representational.probes.is_empty()
            && config.behavioral.enabled
    }

    /// One unit per context: the empty baseline (every K shares it), and per K the True
    /// baseline where asked and every perturbation's main draw.
    fn units(&self, plan: &CellPlan) -> Vec<PlannedUnit> {
        let study = plan.study;
        let statements = study.held_out_true(plan.domain).len();
        let dir = plan.dir(NAME);
        contexts(study)
            .into_iter()
            .map(|c| {
                let done = plan.reads_out() && c.path(&dir).exists();
                let work = Work::Prompts {
                    statements,
                    k: c.k.unwrap_or(0),
                };
                PlannedUnit::new(c.key(plan.model, plan.domain), work, done)
            })
            .collect()
    }

    fn run(
        &self,
        cell: &Cell,
        handoff: &mut Handoff,
        tables: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<()> {
        if !cell.study.scope.assembles() {
            return Ok(());
        }
        let veracity = match &handoff.layer {
            Some(choice) => choice.veracity_layer,
            None => crate::representational::veracity_layer(cell, progress)?.veracity_layer,
        };
        let probes = BaselineProbes::load(cell, veracity)?;
        if probes.by_key.is_empty() {
            progress.note(&format!(
                "{} {}: no baseline probe to read contexts with; the contextual stage is skipped",
                cell.model.name, cell.domain
            ));
            return Ok(());
        }
        let reader = Reader::new(cell, &probes)?;
        let mut judged = BTreeMap::new();
        for context in contexts(cell.study) {
            let unit = reader.unit(&context, progress)?;
            judged.insert(context.path(Path::new("")), unit);
        }
        tabulate(cell, veracity, &judged, tables, &mut handoff.retractions)
    }
}

/// One context of a cell: a condition's main draw at `k` (`None`: the empty baseline).
struct ContextUnit<'c> {
    condition: &'c Condition,
    k: Option<usize>,
    baseline: Baseline,
}

impl ContextUnit<'_> {
    fn key(&self, model: &str, domain: pstat_data::Domain) -> UnitKey {
        UnitKey::context(model, domain, self.condition, self.k, self.baseline)
    }

    /// `<contextual>/baseline_empty.json`, `<contextual>/k<K>/baseline_true.json` or
    /// `<contextual>/k<K>/<Θ>.json`.
    fn path(&self, dir: &Path) -> PathBuf {
        match self.k {
            None => dir.join("baseline_empty.json"),
            Some(k) if self.condition.is_baseline() => dir
                .join(format!("k{k}"))
                .join(format!("baseline_{}.json", self.baseline)),
            Some(k) => dir
                .join(format!("k{k}"))
                .join(format!("{}.json", self.condition.name)),
        }
    }
}

/// The contexts of a cell in computing order, each once: the empty baseline first, then per
/// K and baseline the True baseline (where asked) and the perturbations, whose draws do not
/// depend on the baseline.
fn contexts(study: &Study) -> Vec<ContextUnit<'_>> {
    let cfg = &study.config.behavioral;
    let mut units: Vec<ContextUnit> = Vec::new();
    let Some(base) = study.conditions.baseline() else {
        return units;
    };
    for &k in &cfg.k {
        for &baseline in &cfg.baselines {
            let base_k = (baseline == Baseline::True).then_some(k);
            let candidates = std::iter::once((base, base_k))
                .chain(study.conditions.perturbations().map(|c| (c, Some(k))));
            for (condition, k) in candidates {
                let unit = ContextUnit {
                    condition,
                    k,
                    baseline,
                };
                let here = |u: &ContextUnit| u.path(Path::new("")) == unit.path(Path::new(""));
                if !units.iter().any(here) {
                    units.push(unit);
                }
            }
        }
    }
    units
}

/// The baseline probe of every (probe, layer) the representational stage fitted in a cell,
/// keyed `<probe>@<layer>`, with the sha256 of its file.
struct BaselineProbes {
    by_key: BTreeMap<String, (Probe, usize, TrainedProbe, String)>,
    layers: Vec<usize>,
}

impl BaselineProbes {
    fn load(cell: &Cell, veracity: usize) -> anyhow::Result<Self> {
        let study = cell.study;
        let cfg = &study.config.representational;
        let dir = cell.dir("representational");
        let baseline = study
            .conditions
            .baseline()
            .context("the condition set has no baseline")?;
        let mut by_key = BTreeMap::new();
        for &probe in &cfg.probes {
            let window = cfg.window(probe, veracity, cell.model.lm.n_layers(), &cell.model.name)?;
            for &(_, layer) in &window.layers {
                let path = crate::representational::unit_dir(&dir, probe, layer)
                    .join(format!("{}.probe.safetensors", baseline.name));
                // A baseline fit that failed (recorded in the unit's failures) judges nothing.
                if !path.exists() {
                    continue;
                }
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                let trained = TrainedProbe::from_bytes(&bytes)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                by_key.insert(
                    format!("{probe}@{layer}"),
                    (probe, layer, trained, sha256_hex(&bytes)),
                );
            }
        }
        let mut layers: Vec<usize> = by_key.values().map(|(_, l, _, _)| *l).collect();
        layers.sort_unstable();
        layers.dedup();
        Ok(BaselineProbes { by_key, layers })
    }
}

/// What a contextual unit was computed from: a stored unit is reused only when they agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ContextInputs {
    /// The context's statement ids, in input order.
    context_ids: Vec<String>,
    /// sha256 of the context's token ids (little-endian u32).
    context_tokens_sha256: String,
    /// Tokens of the context.
    context_tokens: usize,
    /// sha256 of the held-out statement ids, in order.
    statements_sha256: String,
    /// The model file's sha256.
    model_sha256: String,
    /// Per `<probe>@<layer>`, the sha256 of the baseline probe's file.
    probes: BTreeMap<String, String>,
}

/// A contextual unit's record (`<unit>.json`, hash-checked): its inputs, the context's size
/// and per `<probe>@<layer>` the judgment of every held-out statement, in held-out order.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ContextRecord {
    inputs: ContextInputs,
    /// Set when the context holds fewer statements than asked for (`allow_fewer`).
    fewer: Option<String>,
    judgments: BTreeMap<String, Vec<ProbeJudgment>>,
}

impl ContextRecord {
    fn beliefs(&self, key: &str) -> Option<Judgments> {
        self.judgments
            .get(key)
            .map(|j| j.iter().map(|j| (j.id.clone(), j.judged_true)).collect())
    }
}

/// What reading a cell's contexts needs: the held-out statements split around where the
/// context goes, the training pool the contexts are drawn from and the baseline probes.
struct Reader<'a> {
    cell: &'a Cell<'a>,
    probes: &'a BaselineProbes,
    pool: TrainingPool<'a>,
    held_out: Vec<String>,
    /// The tokens before each statement (BOS, the opening of the user turn): the same for
    /// every statement, and where the context goes.
    lead: Vec<u32>,
    /// Each statement's own tokens and what follows them, in held-out order.
    tails: Vec<Vec<u32>>,
}

impl<'a> Reader<'a> {
    fn new(cell: &'a Cell<'a>, probes: &'a BaselineProbes) -> anyhow::Result<Self> {
        let study = cell.study;
        let held_out = study.held_out_true(cell.domain);
        let text: BTreeMap<&str, &str> = study
            .data(cell.domain)
            .statements
            .iter()
            .map(|s| (s.id.as_str(), s.text.as_str()))
            .collect();
        let mut lead: Option<Vec<u32>> = None;
        let mut tails = Vec::with_capacity(held_out.len());
        for id in &held_out {
            let statement = text
                .get(id.as_str())
                .with_context(|| format!("statement `{id}` is not in {}", cell.domain))?;
            let (tokens, span) = cell.model.encoder.encode_with_statement_span(statement)?;
            if span.is_empty() {
                bail!("statement `{id}`: none of its input tokens comes from its text");
            }
            let (before, after) = tokens.split_at(span.start);
            match &lead {
                None => lead = Some(before.to_vec()),
                Some(l) if l == before => {}
                Some(_) => bail!(
                    "statement `{id}`: the tokens before it differ from the first statement's, so no one place holds the context"
                ),
            }
            tails.push(after.to_vec());
        }
        Ok(Reader {
            cell,
            probes,
            pool: TrainingPool::new(cell.domain, &study.datasets, &study.splits)?,
            held_out,
            lead: lead.unwrap_or_default(),
            tails,
        })
    }

    /// The unit of `context`: read back when stored from the same inputs, else computed and
    /// stored.
    fn unit(
        &self,
        context: &ContextUnit,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<ContextRecord> {
        let cell = self.cell;
        let study = cell.study;
        progress.unit(&context.key(&cell.model.name, cell.domain));
        let spec = crate::behavioral::context_spec(
            study,
            cell.domain,
            context.k.unwrap_or(0),
            context.baseline,
        );
        let drawn = self.pool.draw(&spec, context.condition, Draw::Main)?;
        let lines: Vec<&str> = drawn.texts.iter().map(String::as_str).collect();
        let block = pstat_prompt::template::context_block(study.config.protocol, &lines);
        let context_tokens = if block.is_empty() {
            Vec::new()
        } else {
            cell.model
                .encoder
                .tokenizer()
                .encode(&block, false, false)?
        };
        let inputs = ContextInputs {
            context_ids: drawn.ids.clone(),
            context_tokens_sha256: sha256_hex(
                &context_tokens
                    .iter()
                    .flat_map(|t| t.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            context_tokens: context_tokens.len(),
            statements_sha256: pstat_prompt::record::ids_sha256(
                &self.held_out.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
            model_sha256: cell.model.lm.sha256().to_string(),
            probes: (self.probes.by_key.iter())
                .map(|(k, (_, _, _, sha))| (k.clone(), sha.clone()))
                .collect(),
        };
        let path = context.path(&cell.dir(NAME));
        let label = format!(
            "{} {} contextual {} {}",
            cell.model.name,
            cell.domain,
            context.condition.name,
            context
                .k
                .map_or("without context".to_string(), |k| format!("k{k}"))
        );
        if let Some(stored) = read_record::<ContextRecord>(&path, progress)? {
            if stored.inputs == inputs {
                progress.start(&label, self.tails.len());
                progress.finish(true);
                return Ok(stored);
            }
            progress.note(&format!(
                "{}: computed from other inputs (context, statements, model or probes); recomputed",
                path.display()
            ));
        }
        progress.start(&label, self.tails.len());
        let judgments = self
            .judge(&context_tokens, progress)
            .with_context(|| format!("{label} ({})", path.display()))?;
        progress.finish(false);
        let record = ContextRecord {
            inputs,
            fewer: drawn.fewer,
            judgments,
        };
        write_manifest(
            &study
                .manifest(
                    format!("contextual {}", context.condition.name),
                    cell.domain,
                )
                .with_model(cell.model.lm.sha256(), &cell.model.lm.kernel_isa()),
            &path,
        )?;
        // The record, written last, vouches for its manifest.
        write_record_vouching(
            &path,
            &record,
            &[pstat_data::artifact::Manifest::path_for(&path)],
        )?;
        Ok(record)
    }

    /// Every held-out statement after `context_tokens`, judged by every baseline probe.
    fn judge(
        &self,
        context_tokens: &[u32],
        progress: &mut dyn Progress,
    ) -> anyhow::Result<BTreeMap<String, Vec<ProbeJudgment>>> {
        let lm = &self.cell.model.lm;
        let layers = &self.probes.layers;
        let mut prefix_tokens = self.lead.clone();
        prefix_tokens.extend_from_slice(context_tokens);
        let prefix = if prefix_tokens.is_empty() {
            None
        } else {
            Some(lm.prefix(&prefix_tokens)?)
        };
        // The lead's states do not depend on what follows them: computed once, in every bag.
        let lead_rows = if self.lead.is_empty() {
            vec![Vec::new(); layers.len()]
        } else {
            lm.hidden_states(std::slice::from_ref(&self.lead), layers)?
                .remove(0)
        };
        let mut judgments: BTreeMap<String, Vec<ProbeJudgment>> = BTreeMap::new();
        let mut next = 0;
        for chunk in self.tails.chunks(STATEMENTS_PER_CALL) {
            let states = lm.hidden_states_after(prefix.as_ref(), chunk, layers)?;
            for rows in states {
                let id = &self.held_out[next];
                for (key, (_, layer, probe, _)) in &self.probes.by_key {
                    let at = layers
                        .binary_search(layer)
                        .expect("a probe's layer is read");
                    let mut bag = lead_rows[at].clone();
                    bag.extend_from_slice(&rows[at]);
                    let score = probe.score(&bag);
                    if !score.is_finite() {
                        bail!("{key}: the score of statement `{id}` after its context is {score}");
                    }
                    judgments
                        .entry(key.clone())
                        .or_default()
                        .push(ProbeJudgment {
                            id: id.clone(),
                            score,
                            judged_true: TrainedProbe::label(score) == 1,
                        });
                }
                next += 1;
            }
            progress.advance(chunk.len());
        }
        Ok(judgments)
    }
}

/// The stability rows of every (K, baseline) against its baseline unit; at the main K against
/// the empty baseline, the paired comparisons at the veracity layer and sAwMIL's judgments for
/// the agreement between instantiations.
fn tabulate(
    cell: &Cell,
    veracity: usize,
    judged: &BTreeMap<PathBuf, ContextRecord>,
    tables: &mut Tables,
    retractions: &mut crate::stage::Retractions,
) -> anyhow::Result<()> {
    let study = cell.study;
    let cfg = &study.config.behavioral;
    let held_out = study.held_out_true(cell.domain);
    let Some(base_condition) = study.conditions.baseline() else {
        return Ok(());
    };
    let record = |condition, k, baseline| {
        let unit = ContextUnit {
            condition,
            k,
            baseline,
        };
        judged.get(&unit.path(Path::new("")))
    };
    for &k in &cfg.k {
        for &baseline in &cfg.baselines {
            let base_k = (baseline == Baseline::True).then_some(k);
            let Some(base) = record(base_condition, base_k, baseline) else {
                continue;
            };
            let main = baseline == Baseline::Empty && Some(k) == main_k(cfg.k.iter().copied());
            for key in base.judgments.keys() {
                let (probe, layer) = probe_of(key)?;
                let base_beliefs = base.beliefs(key).expect("listed key");
                let row_key = |condition: &str| RowKey {
                    model: cell.model.name.clone(),
                    domain: cell.domain.to_string(),
                    instantiation: Instantiation::Contextual,
                    probe,
                    k: Some(k),
                    baseline: Some(baseline),
                    layer: Some(layer),
                    condition: condition.to_string(),
                    ..RowKey::default()
                };
                let bootstrap = Bootstrap {
                    resamples: study.config.bootstrap_resamples,
                    seed: study.seed_for(&format!(
                        "bootstrap:{}:{}:contextual:{probe}:{layer}:{k}:{baseline}",
                        cell.model.name, cell.domain
                    )),
                };
                let mut perturbed: std::collections::HashMap<String, Judgments> =
                    std::collections::HashMap::new();
                for condition in study.conditions.perturbations() {
                    let Some(unit) = record(condition, Some(k), baseline) else {
                        continue;
                    };
                    let Some(beliefs) = unit.beliefs(key) else {
                        continue;
                    };
                    let cmp = compare(&held_out, &base_beliefs, &beliefs)?;
                    let size = unit.inputs.context_ids.len();
                    tables.stability.push(StabilityRow {
                        context_size: Some(size),
                        short_context: Some(size < k),
                        ..stability_row(row_key(&condition.name), &cmp, bootstrap)
                    });
                    if main && layer == veracity && probe == Probe::Sawmil {
                        retractions.record(
                            Instantiation::Contextual,
                            &condition.name,
                            &base_beliefs,
                            &beliefs,
                        );
                    }
                    perturbed.insert(condition.name.clone(), beliefs);
                }
                if main && layer == veracity {
                    tables.comparisons.extend(crate::comparisons::paired_rows(
                        &row_key(""),
                        &held_out,
                        &base_beliefs,
                        &perturbed,
                        (&study.conditions, MAIN_VARIANT),
                        study.config.bootstrap_resamples,
                        study.seed_for(&format!(
                            "paired:{}:{}:contextual:{probe}:{layer}",
                            cell.model.name, cell.domain
                        )),
                    )?);
                }
            }
        }
    }
    Ok(())
}

/// `(probe, layer)` of a judgment key `<probe>@<layer>`.
fn probe_of(key: &str) -> anyhow::Result<(Probe, usize)> {
    let parse = || -> Option<(Probe, usize)> {
        let (probe, layer) = key.split_once('@')?;
        Some((probe.parse().ok()?, layer.parse().ok()?))
    };
    parse().with_context(|| format!("judgment key `{key}` is not <probe>@<layer>"))
}
