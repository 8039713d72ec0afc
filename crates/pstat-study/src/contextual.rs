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

use crate::activations::{Provenance, check_import, check_metadata, layer_path, read_imported};
use crate::config::RunConfig;
use crate::io::{read_record, write_manifest, write_record_vouching};
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::stage::{Cell, CellPlan, Handoff, Retractions, Stage, Tables};
use crate::study::Study;
use crate::unit::{PlannedUnit, UnitKey, Work};
use anyhow::{Context as _, bail};
use pstat_data::activations::{Activations, Precision};
use pstat_data::artifact::sha256_hex;
use pstat_data::{Condition, Domain};
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
        let reader = Reader::new(cell)?;
        let mut judged = BTreeMap::new();
        for context in contexts(cell.study) {
            let unit = reader.unit(&probes, &context, progress)?;
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
        let mut path = self.folder(dir).into_os_string();
        path.push(".json");
        PathBuf::from(path)
    }

    /// The unit's path without its extension: `<dir>/baseline_empty`, `<dir>/k<K>/baseline_true`
    /// or `<dir>/k<K>/<Θ>` (an activation folder's files of the context go there).
    fn folder(&self, dir: &Path) -> PathBuf {
        match self.k {
            None => dir.join("baseline_empty"),
            Some(k) if self.condition.is_baseline() => dir
                .join(format!("k{k}"))
                .join(format!("baseline_{}", self.baseline)),
            Some(k) => dir.join(format!("k{k}")).join(&self.condition.name),
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
    /// Per imported file (`layer_LL.safetensors`), its sha256; empty when the model ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    imported: BTreeMap<String, String>,
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
/// context goes and the training pool the contexts are drawn from.
struct Reader<'a> {
    cell: &'a Cell<'a>,
    pool: TrainingPool<'a>,
    held_out: Vec<String>,
    /// The tokens before each statement (BOS, the opening of the user turn): the same for
    /// every statement, and where the context goes.
    lead: Vec<u32>,
    /// Each statement's own tokens and what follows them, in held-out order.
    tails: Vec<Vec<u32>>,
}

/// A context as the model reads it.
struct ContextTokens {
    /// The drawn statements' ids, in input order.
    ids: Vec<String>,
    /// Set when the context holds fewer statements than asked for.
    fewer: Option<String>,
    /// The context block's tokens (none for the empty context).
    tokens: Vec<u32>,
}

impl ContextTokens {
    fn sha256(&self) -> String {
        let bytes: Vec<u8> = self.tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        sha256_hex(&bytes)
    }
}

impl<'a> Reader<'a> {
    fn new(cell: &'a Cell<'a>) -> anyhow::Result<Self> {
        let study = cell.study;
        let held_out = study.held_out_true(cell.domain);
        let text = study.data(cell.domain).texts();
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
            pool: TrainingPool::new(cell.domain, &study.datasets, &study.splits)?,
            held_out,
            lead: lead.unwrap_or_default(),
            tails,
        })
    }

    /// The statement `i` of the held-out order as its probe was trained on it: the lead, then
    /// its own tokens (the rows a probe reads; the context goes between them).
    fn statement_tokens(&self, i: usize) -> Vec<u32> {
        let mut tokens = self.lead.clone();
        tokens.extend_from_slice(&self.tails[i]);
        tokens
    }

    /// The context of `context`: the behavioral stage's main draw, as the prompt words it.
    fn context(&self, context: &ContextUnit) -> anyhow::Result<ContextTokens> {
        let study = self.cell.study;
        let spec = crate::behavioral::context_spec(
            study,
            self.cell.domain,
            context.k.unwrap_or(0),
            context.baseline,
        );
        let drawn = self.pool.draw(&spec, context.condition, Draw::Main)?;
        let lines: Vec<&str> = drawn.texts.iter().map(String::as_str).collect();
        let block = pstat_prompt::template::context_block(study.config.protocol, &lines);
        let tokens = if block.is_empty() {
            Vec::new()
        } else {
            (self.cell.model.encoder.tokenizer()).encode(&block, false, false)?
        };
        Ok(ContextTokens {
            ids: drawn.ids,
            fewer: drawn.fewer,
            tokens,
        })
    }

    /// The unit of `context`: read back when stored from the same inputs, else computed (from
    /// the model, or from the imported hidden states) and stored.
    fn unit(
        &self,
        probes: &BaselineProbes,
        context: &ContextUnit,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<ContextRecord> {
        let cell = self.cell;
        let study = cell.study;
        progress.unit(&context.key(&cell.model.name, cell.domain));
        let drawn = self.context(context)?;
        let imported = match &study.config.contextual.activations {
            Some(dir) => Some(self.imported(Path::new(dir), context, &drawn, &probes.layers)?),
            None => None,
        };
        let inputs = ContextInputs {
            context_ids: drawn.ids.clone(),
            context_tokens_sha256: drawn.sha256(),
            context_tokens: drawn.tokens.len(),
            statements_sha256: pstat_prompt::record::ids_sha256(
                &self.held_out.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
            model_sha256: cell.model.lm.sha256().to_string(),
            probes: (probes.by_key.iter())
                .map(|(k, (_, _, _, sha))| (k.clone(), sha.clone()))
                .collect(),
            imported: (imported.iter().flatten())
                .map(|(layer, (_, sha))| (format!("layer_{layer:02}.safetensors"), sha.clone()))
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
                "{}: computed from other inputs (context, statements, model, probes or imported files); recomputed",
                path.display()
            ));
        }
        progress.start(&label, self.tails.len());
        let mut judge = Judge::new(probes);
        let judged = match &imported {
            Some(files) => {
                let judged = self.held_out.iter().enumerate().try_for_each(|(i, id)| {
                    let bags: Vec<&[f32]> = files.values().map(|(a, _)| a.statement(i)).collect();
                    judge.statement(id, &bags)
                });
                progress.advance(self.held_out.len());
                judged
            }
            None => self.each_statement(&drawn.tokens, &probes.layers, progress, |i, bags| {
                let bags: Vec<&[f32]> = bags.iter().map(Vec::as_slice).collect();
                judge.statement(&self.held_out[i], &bags)
            }),
        };
        judged.with_context(|| format!("{label} ({})", path.display()))?;
        progress.finish(false);
        let record = ContextRecord {
            inputs,
            fewer: drawn.fewer,
            judgments: judge.judgments,
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

    /// Every held-out statement run after `context`, in held-out order: `each` gets its index
    /// and, per layer of `layers`, its rows (the lead's, then its own tokens'), flattened.
    fn each_statement(
        &self,
        context: &[u32],
        layers: &[usize],
        progress: &mut dyn Progress,
        mut each: impl FnMut(usize, Vec<Vec<f32>>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let lm = &self.cell.model.lm;
        let mut prefix_tokens = self.lead.clone();
        prefix_tokens.extend_from_slice(context);
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
        let mut next = 0;
        for chunk in self.tails.chunks(STATEMENTS_PER_CALL) {
            for rows in lm.hidden_states_after(prefix.as_ref(), chunk, layers)? {
                let bags = (lead_rows.iter().zip(rows))
                    .map(|(lead, own)| [lead.as_slice(), &own].concat())
                    .collect();
                each(next, bags)?;
                next += 1;
            }
            progress.advance(chunk.len());
        }
        Ok(())
    }

    /// The hidden states of `context` at `layers` from an activation folder computed elsewhere
    /// (`<dir>/<model>/<domain>/contextual/<context>/layer_LL.safetensors`), each with its
    /// file's sha256; every file is checked against the run, the context's tokens included.
    fn imported(
        &self,
        dir: &Path,
        context: &ContextUnit,
        drawn: &ContextTokens,
        layers: &[usize],
    ) -> anyhow::Result<BTreeMap<usize, (Activations, String)>> {
        let cell = self.cell;
        let folder = context.folder(&imported_dir(dir, cell.model, cell.domain));
        let provenance = Provenance::of(cell.model, cell.study.data(cell.domain));
        let tokens: Vec<Vec<u32>> = (0..self.held_out.len())
            .map(|i| self.statement_tokens(i))
            .collect();
        let (sha, count) = (drawn.sha256(), drawn.tokens.len().to_string());
        let mut out = BTreeMap::new();
        for &layer in layers {
            let path = layer_path(&folder, layer);
            let (acts, bytes) = read_imported(&path, || {
                format!(
                    "contextual.activations = {:?} has no layer {layer} of this context",
                    dir.display().to_string()
                )
            })?;
            let hidden = cell.model.lm.hidden_size();
            check_import(&acts, &provenance, layer, hidden, &self.held_out, &tokens)
                .and_then(|()| {
                    check_metadata(
                        &acts,
                        &[("context_tokens_sha256", &sha), ("context_tokens", &count)],
                    )
                })
                .map_err(|e| anyhow::anyhow!("{}: refused: {e}", path.display()))?;
            out.insert(layer, (acts, sha256_hex(&bytes)));
        }
        Ok(out)
    }
}

/// The judgments of a unit, statement by statement, by every baseline probe.
struct Judge<'p> {
    probes: &'p BaselineProbes,
    judgments: BTreeMap<String, Vec<ProbeJudgment>>,
}

impl<'p> Judge<'p> {
    fn new(probes: &'p BaselineProbes) -> Self {
        Judge {
            probes,
            judgments: BTreeMap::new(),
        }
    }

    /// Judges statement `id` from its bag at every probe layer (`bags[i]`: the rows at
    /// `probes.layers[i]`).
    fn statement(&mut self, id: &str, bags: &[&[f32]]) -> anyhow::Result<()> {
        for (key, (_, layer, probe, _)) in &self.probes.by_key {
            let at = (self.probes.layers)
                .binary_search(layer)
                .expect("a probe's layer is read");
            let score = probe.score(bags[at]);
            if !score.is_finite() {
                bail!("{key}: the score of statement `{id}` after its context is {score}");
            }
            self.judgments
                .entry(key.clone())
                .or_default()
                .push(ProbeJudgment {
                    id: id.to_string(),
                    score,
                    judged_true: TrainedProbe::label(score) == 1,
                });
        }
        Ok(())
    }
}

/// `<dir>/<model>/<domain>/contextual`: a cell's contexts in an activation folder.
fn imported_dir(dir: &Path, model: &LoadedModel, domain: Domain) -> PathBuf {
    crate::activations::cell_dir(dir, &model.name, domain).join(NAME)
}

/// One line of a context's `context.json` in an activation folder: what an extractor elsewhere
/// feeds for each statement (its `token_ids` of `statements.jsonl` with `context_token_ids`
/// inserted at `insert_at`) and what it keeps (every row but the context's).
#[derive(Serialize)]
struct ContextExport<'a> {
    condition: &'a str,
    k: Option<usize>,
    baseline: Baseline,
    context_ids: &'a [String],
    context_token_ids: &'a [u32],
    context_tokens_sha256: String,
    insert_at: usize,
    statements: &'a [String],
    layers: &'a [usize],
}

/// Writes the contexts of a cell into an activation folder's cell `<out>/<model>/<domain>`:
/// per context `contextual/<context>/context.json` and, unless `statements_only`, the
/// held-out statements' hidden states after it at `layers` (computed by the model, stored in
/// f32 so a run reading them judges as one that computes them).
pub(crate) fn export(
    cell: &Cell,
    out: &Path,
    layers: &[usize],
    statements_only: bool,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    let reader = Reader::new(cell)?;
    let provenance = Provenance::of(cell.model, cell.study.data(cell.domain));
    let hidden = cell.model.lm.hidden_size();
    for context in contexts(cell.study) {
        let drawn = reader.context(&context)?;
        let folder = context.folder(&imported_dir(out, cell.model, cell.domain));
        crate::io::write_json(
            &folder.join("context.json"),
            &ContextExport {
                condition: &context.condition.name,
                k: context.k,
                baseline: context.baseline,
                context_ids: &drawn.ids,
                context_token_ids: &drawn.tokens,
                context_tokens_sha256: drawn.sha256(),
                insert_at: reader.lead.len(),
                statements: &reader.held_out,
                layers,
            },
        )?;
        if statements_only {
            continue;
        }
        let label = format!("{} {} {}", cell.model.name, cell.domain, folder.display());
        progress.start(&label, reader.held_out.len());
        let mut acts: Vec<Activations> = layers.iter().map(|_| Activations::new(hidden)).collect();
        reader.each_statement(&drawn.tokens, layers, progress, |i, bags| {
            let tokens = reader.statement_tokens(i);
            for (a, bag) in acts.iter_mut().zip(bags) {
                a.push(&reader.held_out[i], &tokens, &bag);
            }
            Ok(())
        })?;
        progress.finish(false);
        for (&layer, mut a) in layers.iter().zip(acts) {
            provenance.stamp(&mut a, layer);
            a.metadata
                .insert("context_tokens_sha256".into(), drawn.sha256());
            a.metadata
                .insert("context_tokens".into(), drawn.tokens.len().to_string());
            a.write(&layer_path(&folder, layer), Precision::F32)?;
        }
    }
    Ok(())
}

/// The stability rows of every (K, baseline) against its baseline unit; at the main K against
/// the empty baseline, the paired comparisons at the veracity layer and sAwMIL's judgments for
/// the agreement between instantiations.
fn tabulate(
    cell: &Cell,
    veracity: usize,
    judged: &BTreeMap<PathBuf, ContextRecord>,
    tables: &mut Tables,
    retractions: &mut Retractions,
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
                    if main && Retractions::takes_probe(probe, layer, veracity) {
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
