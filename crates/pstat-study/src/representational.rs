//! The representational stage of a run, per (model, domain): pick the veracity layer, extract
//! (or reuse) the activations of layers l−2..l+2, retrain every probe under every Θ and judge
//! the held-out True statements.

use crate::io::{read_record, write_json, write_manifest, write_record, write_record_vouching};
use crate::lock::WorkLock;
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::unit::{UnitKey, UnitKind};

use crate::stage::{Cell, Handoff, Stage, Tables};
use crate::study::Study;
use anyhow::{Context, bail};
use pstat_data::activations::Activations;
use pstat_data::{Condition, Domain, Kind};
use pstat_probe::perturbation::{ConditionTraining, ProbeJudgment, judge};
use pstat_probe::{ProbeParams, TrainedProbe, auc, average_precision};
use pstat_stability::{Bootstrap, Judgments, RowKey, StabilityRow, compare, stability_row};
use pstat_tables::{BASELINE_REFIT, Instantiation, LayerChoice, LayerScore, Probe, RelabelledRow};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The representational stage: choose the veracity layer, then retrain every probe under
/// every Θ at each of its layers.
pub struct Representational;

impl Stage for Representational {
    fn name(&self) -> &'static str {
        "representational"
    }

    fn enabled(&self, config: &crate::RunConfig) -> bool {
        config.representational.enabled
    }

    fn run(
        &self,
        cell: &Cell,
        handoff: &mut Handoff,
        tables: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<()> {
        let (
            Cell {
                study,
                model,
                domain,
            },
            dir,
        ) = (cell, cell.dir("representational"));
        let cfg = &study.config.representational;
        let scope = study.scope;
        let key = |probe: Probe, offset: i64| UnitKey::probe(&model.name, *domain, probe, offset);
        let planned: Vec<(Probe, i64)> = cfg
            .probes
            .iter()
            .flat_map(|&probe| cfg.offsets(probe).iter().map(move |&o| (probe, o)))
            .collect();
        // A shard with no probe unit here needs neither the layer nor the activations.
        if !scope.assembles() && !planned.iter().any(|&(p, o)| scope.covers(&key(p, o))) {
            return Ok(());
        }
        let choice = veracity_layer(cell, progress)?;
        let layer_at = |offset: &i64| -> anyhow::Result<usize> {
            let l = choice.veracity_layer as i64 + offset;
            if l < 1 || l > model.lm.n_layers() as i64 {
                bail!(
                    "layer {l} (veracity layer {} {offset:+}) is outside 1..={} of {}",
                    choice.veracity_layer,
                    model.lm.n_layers(),
                    model.name
                );
            }
            Ok(l as usize)
        };
        let mut units: Vec<(Probe, i64, usize)> = Vec::new();
        for &(probe, offset) in &planned {
            units.push((probe, offset, layer_at(&offset)?));
        }
        let layers: BTreeSet<usize> = units.iter().map(|(_, _, l)| *l).collect();
        let layers: Vec<usize> = layers.into_iter().collect();
        let mut activations: BTreeMap<usize, Activations> = BTreeMap::new();
        for (probe, offset, layer) in units {
            let unit_dir = unit_dir(&dir, probe, layer);
            let unit = match ProbeUnit::read(&unit_dir, progress)? {
                Some(done) => done,
                None if !scope.computes(&key(probe, offset))? => continue,
                None => {
                    if activations.is_empty() {
                        progress.unit(&UnitKey::new(&model.name, *domain, UnitKind::Activations));
                        activations = crate::activations::extract_layers(
                            study, model, *domain, &layers, progress,
                        )?;
                    }
                    progress.unit(&UnitKey {
                        probe: Some(probe),
                        layer_offset: Some(offset),
                        ..UnitKey::new(&model.name, *domain, UnitKind::Probe)
                    });
                    let unit = probe_unit(
                        study,
                        &model.name,
                        *domain,
                        (probe, layer),
                        &activations[&layer],
                        &unit_dir,
                        progress,
                    )?;
                    let path = ProbeUnit::path(&unit_dir);
                    write_manifest(
                        &study
                            .manifest(format!("{probe} layer {layer} {domain}"), *domain)
                            .with_model(model.lm.sha256(), pstat_lm::kernel_isa()),
                        &path,
                    )?;
                    // The record, written last, vouches for what the unit wrote before it.
                    let mut files = vec![
                        pstat_data::artifact::Manifest::path_for(&path),
                        unit_dir.join("probe.json"),
                    ];
                    files.extend(
                        ["failures.json"]
                            .map(|f| unit_dir.join(f))
                            .into_iter()
                            .filter(|f| f.exists()),
                    );
                    files.extend(
                        unit.judgments
                            .keys()
                            .map(|c| unit_dir.join(format!("{c}.probe.safetensors"))),
                    );
                    write_record_vouching(&path, &unit, &files)?;
                    unit
                }
            };
            if !scope.assembles() {
                continue;
            }
            if layer == choice.veracity_layer {
                unit.add_retractions(study, probe, &mut handoff.retractions);
                tables
                    .comparisons
                    .extend(unit.comparisons(cell, probe, layer)?);
            }
            tables.stability.extend(unit.rows);
            tables.relabelled.extend(unit.relabelled);
        }
        if let Some(acts) = activations.remove(&choice.veracity_layer) {
            handoff.activations = Some(acts);
        }
        handoff.layer = Some(choice.clone());
        tables.layers.push(choice);
        Ok(())
    }
}

/// `<cell>/representational/<probe>/layer_<l>`: where one probe unit is stored.
pub fn unit_dir(representational: &Path, probe: Probe, layer: usize) -> PathBuf {
    representational
        .join(probe.as_str())
        .join(format!("layer_{layer:02}"))
}

/// One probe at one layer: its stability rows and the per-statement judgments of every
/// condition that could be fit, in one record (`<unit>/unit.json`, hash-checked). The tables
/// and the analyses that reuse the judgments (retractions for clustering, paired comparisons)
/// read this one record, so they cannot disagree.
#[derive(serde::Serialize, serde::Deserialize)]
struct ProbeUnit {
    rows: Vec<StabilityRow>,
    judgments: BTreeMap<String, Vec<ProbeJudgment>>,
    /// Per fitted Θ and kind: the training bags its probe saw, and how many Θ relabelled.
    relabelled: Vec<RelabelledRow>,
}

impl ProbeUnit {
    fn path(dir: &Path) -> PathBuf {
        dir.join("unit.json")
    }

    /// A finished unit, or `None` when it has not been computed. A damaged record is named
    /// in a warning, moved aside (`unit.json.corrupt`) and the unit recomputed.
    fn read(dir: &Path, progress: &mut dyn Progress) -> anyhow::Result<Option<Self>> {
        read_record(&Self::path(dir), progress)
    }

    /// The belief (judged True or not) of every held-out statement under `condition`.
    fn beliefs(&self, condition: &str) -> Option<Judgments> {
        self.judgments.get(condition).map(|judged| {
            judged
                .iter()
                .map(|j| (j.id.clone(), j.judged_true))
                .collect()
        })
    }

    fn all_beliefs(&self) -> HashMap<String, Judgments> {
        self.judgments
            .keys()
            .filter_map(|c| Some((c.clone(), self.beliefs(c)?)))
            .collect()
    }

    /// Which held-out True statements each condition retracts under this probe.
    fn add_retractions(&self, study: &Study, probe: Probe, into: &mut crate::stage::Retractions) {
        let Some(base) = study
            .conditions
            .baseline()
            .and_then(|b| self.beliefs(&b.name))
        else {
            return;
        };
        for condition in study.conditions.perturbations() {
            if let Some(perturbed) = self.beliefs(&condition.name) {
                into.add(
                    &format!("representational {probe} {}", condition.name),
                    &base,
                    &perturbed,
                );
            }
        }
    }
}

impl ProbeUnit {
    /// The paired Synthetic-vs-Fictional tests of this unit (`comparisons.csv`).
    fn comparisons(
        &self,
        cell: &Cell,
        probe: Probe,
        layer: usize,
    ) -> anyhow::Result<Vec<pstat_stability::ComparisonRow>> {
        let Cell {
            study,
            model,
            domain,
        } = cell;
        let Some(baseline) = study
            .conditions
            .baseline()
            .and_then(|b| self.beliefs(&b.name))
        else {
            return Ok(Vec::new());
        };
        let key = RowKey {
            model: model.name.clone(),
            domain: domain.to_string(),
            instantiation: Instantiation::Representational,
            probe,
            layer: Some(layer),
            ..RowKey::default()
        };
        crate::comparisons::paired_rows(
            &key,
            &study.held_out_true(*domain),
            &baseline,
            &self.all_beliefs(),
            study.config.bootstrap_resamples,
            study.seed_for(&format!("paired:{}:{domain}:{probe}:{layer}", model.name)),
        )
    }
}

/// Retrain one probe at one layer under every condition and judge the held-out statements.
fn probe_unit(
    study: &Study,
    model: &str,
    domain: Domain,
    (probe, layer): (Probe, usize),
    acts: &Activations,
    unit: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<ProbeUnit> {
    let mut split = study.split(domain).clone();
    split.train = study.train_ids(domain);
    let seed = study.seed_for(&format!("probe:{}:{domain}:{layer}", model));
    let training = ConditionTraining::new(study.data(domain), &split, acts, seed)?;
    let fit = UnitFit::new(
        &study.config.representational,
        study.conditions.baseline(),
        probe,
        &training,
        seed,
    )
    .with_context(|| format!("{} {domain} {probe} layer {layer}", model))?;
    write_json(&unit.join("probe.json"), &fit.record)?;
    let held_out = study.held_out_true(domain);
    let conditions = &study.conditions.conditions;
    // Every condition, then the baseline's refit.
    progress.start(
        &format!("{} {domain} {probe} layer {layer}", model),
        conditions.len() + 1,
    );
    let mut done = ProbeUnit {
        rows: Vec::new(),
        judgments: BTreeMap::new(),
        relabelled: Vec::new(),
    };
    let seen = fit.params.training_bags(training.len());
    let mut failures = Vec::new();
    // Per condition: whether its fit converged (sAwMIL; `None` for Mass-Mean).
    let mut converged: HashMap<&str, Option<bool>> = HashMap::new();
    // The noise floor: the baseline refit, with the same hyperparameters, on another seeded
    // shuffle of the same training statements (so other bags fall within the fit's bag limit,
    // bags are capped and visited in another order) and another draw of the Noise bags. Its
    // rates against the baseline are what refitting alone moves, with no relabelling.
    let base = study.conditions.baseline();
    let refit_seed = study.seed_for(&format!("probe-refit:{model}:{domain}:{layer}"));
    let reshuffled = match base {
        Some(_) => Some(ConditionTraining::new(
            study.data(domain),
            &split,
            acts,
            refit_seed,
        )?),
        None => None,
    };
    // Every fit is independent and single-threaded (one QP at a time), so the conditions and
    // the refit are fit in parallel; the results are used in condition order, so nothing
    // written depends on the number of threads.
    let (fits, refit) = rayon::join(
        || {
            conditions
                .par_iter()
                .map(|condition| fit.fit(&training, condition))
                .collect::<Vec<_>>()
        },
        || {
            base.zip(reshuffled.as_ref())
                .map(|(base, reshuffled)| reshuffled.fit(base, fit.params.as_ref()))
        },
    );
    for (condition, result) in conditions.iter().zip(fits) {
        match result {
            Ok(trained) => {
                converged.insert(&condition.name, trained.converged);
                if let Some(baseline) = base {
                    done.relabelled.extend(
                        training
                            .relabelled(condition, baseline, seen)
                            .into_iter()
                            .map(|r| RelabelledRow {
                                model: model.to_string(),
                                domain: domain.to_string(),
                                probe,
                                layer,
                                condition: condition.name.clone(),
                                kind: r.kind.as_str().to_string(),
                                bags: r.bags,
                                relabelled: r.relabelled,
                            }),
                    );
                }
                let judged = judge(&trained, acts, &held_out)?;
                // The probe itself, so anyone can reload and rescore it (`pstat sawmil
                // predict`); the unit's record, written last, marks the unit done.
                trained.save(&unit.join(format!("{}.probe.safetensors", condition.name)))?;
                done.judgments.insert(condition.name.clone(), judged);
            }
            // A degenerate fit (w = 0 optimal) is recorded, not fatal: its rates stay undefined.
            Err(e) => failures.push(format!("{}: {e}", condition.name)),
        }
        progress.advance(1);
    }
    // The refit counts only beside a baseline probe to compare it with.
    if let (Some(base), Some(refit)) = (base, refit)
        && done.judgments.contains_key(&base.name)
    {
        match refit {
            Ok(trained) => {
                converged.insert(BASELINE_REFIT, trained.converged);
                let judged = judge(&trained, acts, &held_out)?;
                trained.save(&unit.join(format!("{BASELINE_REFIT}.probe.safetensors")))?;
                done.judgments.insert(BASELINE_REFIT.to_string(), judged);
            }
            Err(e) => failures.push(format!("{BASELINE_REFIT}: {e}")),
        }
    }
    progress.advance(1);
    progress.finish(false);
    if !failures.is_empty() {
        write_json(&unit.join("failures.json"), &failures)?;
        progress.note(&format!(
            "warning: {} {domain} {probe} layer {layer}: {}",
            model,
            failures.join("; ")
        ));
    }
    let Some(baseline) = study
        .conditions
        .baseline()
        .and_then(|b| done.beliefs(&b.name))
    else {
        bail!(
            "{} {domain} {probe} layer {layer}: the baseline probe could not be fit",
            model
        );
    };
    let bootstrap = Bootstrap {
        resamples: study.config.bootstrap_resamples,
        seed: study.seed_for(&format!("bootstrap:{}:{domain}:{probe}:{layer}", model)),
    };
    let compared = study
        .conditions
        .perturbations()
        .map(|c| c.name.as_str())
        .chain([BASELINE_REFIT]);
    for condition in compared {
        let Some(perturbed) = done.beliefs(condition) else {
            continue;
        };
        let cmp = compare(&held_out, &baseline, &perturbed)?;
        let key = RowKey {
            model: model.to_string(),
            domain: domain.to_string(),
            instantiation: Instantiation::Representational,
            probe,
            layer: Some(layer),
            condition: condition.to_string(),
            ..RowKey::default()
        };
        let baseline_converged = study
            .conditions
            .baseline()
            .and_then(|b| converged.get(b.name.as_str()).copied().flatten());
        let perturbed_converged = converged.get(condition).copied().flatten();
        done.rows.push(StabilityRow {
            c: fit.record.c,
            converged: baseline_converged
                .zip(perturbed_converged)
                .map(|(b, p)| b && p),
            ..stability_row(key, &cmp, bootstrap)
        });
    }
    Ok(done)
}

/// How one probe unit fits every Θ. sAwMIL's C is chosen once, by the CV search on the
/// baseline's labels, and held fixed for every Θ: the paper retrains "holding hyperparameters
/// fixed", so that a perturbed probe differs from the baseline one only through the relabelling.
struct UnitFit {
    params: Box<dyn ProbeParams>,
    /// The baseline probe the search already fit, reused rather than fit twice.
    baseline: Option<TrainedProbe>,
    record: UnitRecord,
}

/// `<unit>/probe.json`: the C every Θ of the unit was fit with, and how it was chosen.
#[derive(Debug, serde::Serialize)]
struct UnitRecord {
    probe: Probe,
    /// sAwMIL's C (none for Mass-Mean).
    c: Option<f64>,
    /// `config` (fixed in the run config) or `cv_baseline` (the CV search on Θ0's labels).
    c_source: Option<String>,
    /// Mean CV average precision per C of the grid (undefined where the C was skipped).
    cv_scores: Vec<(f64, Option<f64>)>,
    /// The C values the search skipped because their fit was degenerate, with the reason.
    cv_skipped: Vec<(f64, String)>,
    /// Training bags per kind, shared by every Θ.
    kind_counts: Vec<(Kind, usize)>,
}

impl UnitFit {
    fn new(
        cfg: &crate::config::Representational,
        baseline: Option<&Condition>,
        probe: Probe,
        training: &ConditionTraining,
        seed: u64,
    ) -> anyhow::Result<Self> {
        let mut record = UnitRecord {
            probe,
            c: None,
            c_source: None,
            cv_scores: Vec::new(),
            cv_skipped: Vec::new(),
            kind_counts: training.kind_counts(),
        };
        if probe != Probe::Sawmil {
            return Ok(UnitFit {
                params: cfg.probe_params(probe, seed),
                baseline: None,
                record,
            });
        }
        let params = cfg.sawmil_params(seed);
        if let Some(c) = params.c {
            record.c = Some(c);
            record.c_source = Some("config".into());
            return Ok(UnitFit {
                params: Box::new(params),
                baseline: None,
                record,
            });
        }
        let baseline = baseline.context("the condition set has no baseline to choose C on")?;
        let report = params
            .fit_report(&training.training_set(baseline)?)
            .context("the baseline probe could not be fit")?;
        let c = report.probe.c.context("a sAwMIL fit records its C")?;
        record.c = Some(c);
        record.c_source = Some("cv_baseline".into());
        record.cv_scores = report
            .search
            .iter()
            .flat_map(|s| &s.scores)
            .map(|s| (s.c, s.degenerate.is_none().then_some(s.mean)))
            .collect();
        record.cv_skipped = report
            .search
            .iter()
            .flat_map(|s| s.skipped())
            .map(|(c, why)| (c, why.to_string()))
            .collect();
        Ok(UnitFit {
            params: Box::new(params.with_c(c)),
            baseline: Some(report.probe),
            record,
        })
    }

    fn fit(
        &self,
        training: &ConditionTraining,
        condition: &Condition,
    ) -> pstat_probe::Result<TrainedProbe> {
        match &self.baseline {
            Some(probe) if condition.is_baseline() => Ok(probe.clone()),
            _ => training.fit(condition, self.params.as_ref()),
        }
    }
}

/// The veracity layer and its activations for the analyses that reuse them: handed over by
/// the representational stage, or read from the cache (or the imported folder).
pub fn veracity_activations<'h>(
    cell: &Cell,
    handoff: &'h mut Handoff,
    progress: &mut dyn Progress,
) -> anyhow::Result<(usize, &'h Activations)> {
    let layer = match &handoff.layer {
        Some(choice) => choice.veracity_layer,
        None => veracity_layer(cell, progress)?.veracity_layer,
    };
    if handoff.activations.is_none() {
        progress.unit(&UnitKey::new(
            &cell.model.name,
            cell.domain,
            UnitKind::Activations,
        ));
        let mut acts = crate::activations::extract_layers(
            cell.study,
            cell.model,
            cell.domain,
            &[layer],
            progress,
        )?;
        handoff.activations = Some(acts.remove(&layer).expect("requested layer"));
    }
    Ok((layer, handoff.activations.as_ref().expect("set above")))
}

/// The veracity layer of a (model, domain), persisted in `layers.json`: a layer fixed in the
/// run config wins; else the paper's Table A3 layer when the model is one of the paper's;
/// else the criterion the Table A3 layers come from ([`select_layer`]).
pub fn veracity_layer(cell: &Cell, progress: &mut dyn Progress) -> anyhow::Result<LayerChoice> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let path = layers_path(&cell.dir("representational"));
    // Concurrent shards of the cell wait for the first one's choice instead of repeating it.
    let _lock = WorkLock::wait(&cell.dir("representational").join(".layers.lock"))?;
    if let Some(choice) = read_record::<LayerChoice>(&path, progress)? {
        return Ok(choice);
    }
    let n_layers = model.lm.n_layers();
    let fixed = |layer: usize, criterion: &str| LayerChoice {
        model: model.name.clone(),
        domain: domain.to_string(),
        veracity_layer: layer,
        criterion: criterion.into(),
        scores: Vec::new(),
    };
    let choice = if let Some(layer) = study.config.representational.veracity_layer {
        if layer == 0 || layer > n_layers {
            bail!(
                "representational.veracity_layer = {layer} is outside 1..={n_layers} of {}",
                model.name
            );
        }
        fixed(layer, "fixed in the run config")
    } else if let Some(layer) = pstat_lm::paper::paper_layer(&model.lm, *domain) {
        fixed(
            layer,
            "the paper's layer for this model and domain (Table A3)",
        )
    } else {
        progress.unit(&UnitKey::new(
            &model.name,
            *domain,
            UnitKind::LayerSelection,
        ));
        let n = study.config.representational.selection_statements;
        let train = study.stratified_train(*domain, n);
        select_layer(study, model, *domain, &train, progress)?
    };
    write_record(&path, &choice)?;
    Ok(choice)
}

/// `<cell>/representational/layers.json`: the cell's veracity-layer choice and its curve, a
/// hash-checked record like a unit's ([`write_record`]): every later stage and every resumed
/// run reads the layer from it, so a garbled digit would move every probe to another layer.
/// A damaged one is moved aside and the choice recomputed ([`read_record`]).
pub fn layers_path(representational: &Path) -> PathBuf {
    representational.join("layers.json")
}

/// C of the selection probes: the upstream default (`C: 1.0`). A C search per layer would
/// multiply the selection's cost by the grid.
const SELECTION_C: f64 = 1.0;

/// Bytes of all-token activations the layer selection holds at once: a quarter of the memory
/// available, and at least 2 GiB. A small model's candidate layers then come from one forward
/// pass (each extra group reruns the blocks below its highest layer); a large model's go in
/// groups that fit beside its weights. The grouping does not change any number.
fn activation_budget() -> usize {
    const MIN: u64 = 2 << 30;
    let quarter = pstat_lm::memory::available().map_or(0, |bytes| bytes / 4);
    usize::try_from(quarter.max(MIN)).unwrap_or(usize::MAX)
}

/// The criterion of the Trilemma paper, which the paper's Table A3 layers come from: at every
/// layer with l±2 neighbours a baseline sAwMIL probe (Θ0's labels, all tokens, C = 1) is fit on
/// `train` and scores the calibration split (bag score = max over tokens), giving the average
/// precision of True against Not True. Upstream takes the layer of the best AP; pstat takes the
/// lowest layer whose window l−2..l+2 has a mean AP within [`SELECTION_TOLERANCE`] of the best,
/// because P-StaT reads that whole window (Appendix F) and because a single layer's AP moves
/// with the training sample by more than the gaps between neighbouring layers. The curve is
/// recorded.
pub fn select_layer(
    study: &Study,
    model: &LoadedModel,
    domain: Domain,
    train: &[String],
    progress: &mut dyn Progress,
) -> anyhow::Result<LayerChoice> {
    let cal = study.selection_calibration(domain);
    let data = study.data(domain);
    let n_layers = model.lm.n_layers();
    let candidates: Vec<usize> = (3..=n_layers.saturating_sub(2)).collect();
    if candidates.is_empty() {
        bail!(
            "{} has too few layers ({n_layers}) for a veracity layer with l±2 neighbours",
            model.name
        );
    }
    let baseline = study
        .conditions
        .baseline()
        .context("the condition set has no baseline to select the veracity layer on")?;
    let kind: HashMap<&str, Kind> = data
        .statements
        .iter()
        .map(|s| (s.id.as_str(), s.kind))
        .collect();
    let cal_labels: Vec<i8> = cal
        .iter()
        .map(|id| {
            if kind[id.as_str()] == Kind::True {
                1
            } else {
                -1
            }
        })
        .collect();
    let mut split = study.split(domain).clone();
    split.train = train.to_vec();
    let seed = study.seed_for(&format!("selection:{}:{domain}", model.name));
    let params = study
        .config
        .representational
        .sawmil_params(seed)
        .with_c(SELECTION_C);
    let ids: Vec<String> = train.iter().chain(&cal).cloned().collect();
    let tokens = model.encode_statements(data, &ids)?;
    // All-token states of every candidate layer at once would not fit for large models: the
    // layers go in groups within the activation budget, one forward pass per group.
    let per_layer = tokens.iter().map(Vec::len).sum::<usize>() * model.lm.hidden_size() * 4;
    let group = (activation_budget() / per_layer.max(1)).clamp(1, candidates.len());
    progress.start(
        &format!("{} {domain} layer selection", model.name),
        ids.len() * candidates.len().div_ceil(group),
    );
    let mut scores = Vec::new();
    for layers in candidates.chunks(group) {
        let acts =
            pstat_lm::extract::extract(&model.lm, &ids, &tokens, layers, |n| progress.advance(n))?;
        // One baseline fit per layer, each single-threaded: the layers of a group are fit in
        // parallel and their scores kept in layer order.
        let group: Vec<anyhow::Result<LayerScore>> = layers
            .par_iter()
            .zip(acts.par_iter())
            .map(|(&layer, acts)| -> anyhow::Result<LayerScore> {
                let training = ConditionTraining::new(data, &split, acts, seed)?;
                // A layer whose baseline fit is degenerate has no score, so it cannot be chosen.
                let cal_scores: Option<Vec<f32>> = match training.fit(baseline, &params) {
                    Ok(probe) => Some(
                        judge(&probe, acts, &cal)?
                            .into_iter()
                            .map(|j| j.score)
                            .collect(),
                    ),
                    Err(_) => None,
                };
                let ap = cal_scores.as_ref().and_then(|s| {
                    let s: Vec<f64> = s.iter().map(|&x| f64::from(x)).collect();
                    average_precision(&s, &cal_labels)
                });
                Ok(LayerScore {
                    layer,
                    average_precision: ap,
                    window_average_precision: None,
                    auc: cal_scores.as_ref().and_then(|s| auc(s, &cal_labels)),
                })
            })
            .collect();
        for score in group {
            scores.push(score?);
        }
    }
    progress.finish(false);
    let chosen = best_window(&mut scores).context(
        "no layer gave a defined average precision (no True statement in the calibration split, or every fit was degenerate)",
    )?;
    Ok(LayerChoice {
        model: model.name.clone(),
        domain: domain.to_string(),
        veracity_layer: chosen,
        criterion: format!(
            "lowest layer within {SELECTION_TOLERANCE} of the best mean average precision over l−2..l+2 (True vs Not True, on {} calibration statements) of baseline sAwMIL probes (C = {SELECTION_C}) fit on {} training statements at layers 3..={}",
            cal.len(),
            train.len(),
            candidates.last().expect("candidates is not empty")
        ),
        scores,
    })
}

/// Window means within this of the best count as tied, and the lowest such layer wins: on
/// a small model the curve is flat over the top layers (SmolLM2, City: window means within 0.002
/// over layers 19..21), so a strict maximum moves with the training sample; 0.01 is below one
/// standard error of the AP on a calibration split of a few hundred statements.
const SELECTION_TOLERANCE: f64 = 0.01;

/// Fills every score's window mean (the mean AP over the scored layers l−2..l+2) and returns
/// the lowest layer, among those with an AP, whose window mean is within
/// [`SELECTION_TOLERANCE`] of the best.
fn best_window(scores: &mut [LayerScore]) -> Option<usize> {
    let means: Vec<Option<f64>> = (0..scores.len())
        .map(|i| {
            let window: Vec<f64> = scores[i.saturating_sub(2)..(i + 3).min(scores.len())]
                .iter()
                .filter_map(|s| s.average_precision)
                .collect();
            (!window.is_empty()).then(|| window.iter().sum::<f64>() / window.len() as f64)
        })
        .collect();
    for (score, mean) in scores.iter_mut().zip(means) {
        score.window_average_precision = mean;
    }
    let candidates = || {
        scores
            .iter()
            .filter(|s| s.average_precision.is_some())
            .filter_map(|s| Some((s.layer, s.window_average_precision?)))
    };
    let best = candidates().map(|(_, m)| m).reduce(f64::max)?;
    candidates()
        .find(|(_, m)| *m >= best - SELECTION_TOLERANCE)
        .map(|(layer, _)| layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_data::{ConditionSet, Dataset, SplitAssignment, Statement};

    /// A toy domain of 160 statements of four tokens in 4 dimensions: uniform noise around a
    /// quadrant of the first two features per kind; all of it is training data.
    fn toy() -> (Dataset, SplitAssignment, Activations) {
        use rand::{Rng, SeedableRng};
        let kinds = [Kind::True, Kind::False, Kind::FictionalT, Kind::SyntheticTf];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut statements = Vec::new();
        let mut acts = Activations::new(4);
        for i in 0..160 {
            let kind = kinds[i % 4];
            let id = format!("toy:{i}");
            // Each kind sits in its own quadrant of the first two features.
            let (f0, f1) = match kind {
                Kind::True => (3.0, 3.0),
                Kind::FictionalT => (3.0, -3.0),
                Kind::False => (-3.0, -3.0),
                _ => (-3.0, 3.0),
            };
            let rows: Vec<f32> = (0..16)
                .map(|j| {
                    let shift = [f0, f1, 0.0, 0.0][j % 4];
                    rng.random_range(-0.5f32..0.5) + shift
                })
                .collect();
            acts.push(&id, &[1, 2, 3, 4], &rows);
            statements.push(Statement {
                id,
                domain: Domain::CityLocations,
                relation: "r".into(),
                text: String::new(),
                subject: format!("s{i}"),
                object: format!("o{i}"),
                negated: false,
                kind,
                provenance: String::new(),
                source: String::new(),
            });
        }
        let split = SplitAssignment {
            domain: Domain::CityLocations,
            config: Default::default(),
            data_hash: String::new(),
            families: vec![],
            train: statements.iter().map(|s| s.id.clone()).collect(),
            calibration: vec![],
            test: vec![],
        };
        let data = Dataset {
            domain: Domain::CityLocations,
            statements,
            data_hash: String::new(),
        };
        (data, split, acts)
    }

    #[test]
    fn the_veracity_layer_centres_the_best_window() {
        let score = |layer: usize, ap: Option<f64>| LayerScore {
            layer,
            average_precision: ap,
            window_average_precision: None,
            auc: None,
        };
        // A lone spike at layer 4 loses to the plateau of layers 8..10; the plateau's best
        // window (layer 9, 0.58) ties with layer 8's (0.55) only within 0.03, not 0.01.
        let aps = [0.40, 0.70, 0.40, 0.40, 0.55, 0.60, 0.60, 0.60, 0.55, 0.40];
        let mut scores: Vec<LayerScore> = aps
            .iter()
            .enumerate()
            .map(|(i, &ap)| score(i + 3, Some(ap)))
            .collect();
        assert_eq!(best_window(&mut scores), Some(9));
        assert!((scores[6].window_average_precision.unwrap() - 0.58).abs() < 1e-12);
        // Within the tolerance the lowest layer wins.
        let mut close: Vec<LayerScore> = [0.50, 0.50, 0.50, 0.505, 0.52, 0.52, 0.52]
            .iter()
            .enumerate()
            .map(|(i, &ap)| score(i + 3, Some(ap)))
            .collect();
        let chosen = best_window(&mut close).unwrap();
        let best = close
            .iter()
            .filter_map(|s| s.window_average_precision)
            .fold(0.0, f64::max);
        assert!(chosen < 9 && close[chosen - 3].window_average_precision.unwrap() >= best - 0.01);
        // Windows are cut at the ends; ties go to the first layer.
        let mut flat: Vec<LayerScore> = (3..7).map(|l| score(l, Some(0.5))).collect();
        assert_eq!(best_window(&mut flat), Some(3));
        // A layer without an AP (a degenerate fit) is never chosen, nor counted in windows.
        let mut gaps = vec![score(3, None), score(4, Some(0.2)), score(5, None)];
        assert_eq!(best_window(&mut gaps), Some(4));
        assert_eq!(gaps[0].window_average_precision, Some(0.2));
        let mut none = vec![score(3, None)];
        assert_eq!(best_window(&mut none), None);
    }

    #[test]
    fn the_unit_records_its_c_and_where_it_came_from() {
        let (data, split, acts) = toy();
        let training = ConditionTraining::new(&data, &split, &acts, 5).unwrap();
        let conditions = ConditionSet::paper();
        let cfg = crate::config::Representational::default();
        let fixed = crate::config::Representational {
            sawmil_c: Some(0.5),
            ..cfg.clone()
        };
        let fit = UnitFit::new(&fixed, None, Probe::Sawmil, &training, 5).unwrap();
        assert_eq!(
            (fit.record.c, fit.record.c_source.as_deref()),
            (Some(0.5), Some("config"))
        );
        assert!(fit.baseline.is_none());
        let err = UnitFit::new(&cfg, None, Probe::Sawmil, &training, 5)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no baseline to choose C on"), "{err}");
        let mass_mean =
            UnitFit::new(&cfg, conditions.baseline(), Probe::MassMean, &training, 5).unwrap();
        assert_eq!(
            (mass_mean.record.c, mass_mean.record.c_source.as_deref()),
            (None, None)
        );
        for condition in &conditions.conditions {
            assert!(
                mass_mean.fit(&training, condition).is_ok(),
                "{}",
                condition.name
            );
        }
    }

    /// A toy study of one domain: the 160 training statements of [`toy`], and 24 held-out True
    /// statements on a circle around the origin of the first two features, so that probes
    /// leaning on different features believe different subsets of them.
    fn toy_study(out: &Path) -> (Study, Activations) {
        let (mut data, mut split, mut acts) = toy();
        for i in 0..24 {
            let id = format!("held:{i}");
            let angle = -std::f32::consts::FRAC_PI_2 + i as f32 * std::f32::consts::PI / 16.0;
            let (f0, f1) = (3.0 * angle.cos(), 3.0 * angle.sin());
            let rows: Vec<f32> = (0..16).map(|j| [f0, f1, 0.0, 0.0][j % 4]).collect();
            acts.push(&id, &[1, 2, 3, 4], &rows);
            let mut statement = data.statements[0].clone();
            statement.id = id.clone();
            statement.subject = format!("h{i}");
            data.statements.push(statement);
            split.test.push(id);
        }
        let empty = |domain: Domain| {
            (
                Dataset {
                    domain,
                    statements: Vec::new(),
                    data_hash: String::new(),
                },
                SplitAssignment {
                    domain,
                    ..split.clone()
                },
            )
        };
        let (mut datasets, mut splits) = (Vec::new(), Vec::new());
        for domain in Domain::ALL {
            let (d, s) = if domain == Domain::CityLocations {
                (data.clone(), split.clone())
            } else {
                empty(domain)
            };
            datasets.push(d);
            splits.push(s);
        }
        let config = crate::RunConfig {
            bootstrap_resamples: 20,
            ..Default::default()
        };
        let study = Study {
            config_hash: config.hash(),
            conditions: config.conditions().unwrap(),
            config,
            out: out.to_path_buf(),
            datasets,
            splits,
            scope: crate::shard::Scope::All,
        };
        (study, acts)
    }

    /// Keeps the notes a run would show.
    #[derive(Default)]
    struct Notes(Vec<String>);

    impl pstat_prompt::Progress for Notes {
        fn start(&mut self, _: &str, _: usize) {}
        fn advance(&mut self, _: usize) {}
        fn finish(&mut self, _: bool) {}
    }

    impl Progress for Notes {
        fn stage(&mut self, _: &str) {}
        fn note(&mut self, message: &str) {
            self.0.push(message.to_string());
        }
    }

    /// layers.json is a hash-checked record: read back as written; with one digit of the layer
    /// changed (same size, still valid JSON) it is named in a warning, moved aside and not used.
    #[test]
    fn a_garbled_layers_json_is_moved_aside_and_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = layers_path(dir.path());
        let choice = LayerChoice {
            model: "m".into(),
            domain: Domain::CityLocations.to_string(),
            veracity_layer: 17,
            criterion: "test".into(),
            scores: vec![LayerScore {
                layer: 17,
                average_precision: Some(0.75),
                window_average_precision: Some(0.7),
                auc: Some(0.8),
            }],
        };
        crate::io::write_record(&path, &choice).unwrap();
        let read = read_record::<LayerChoice>(&path, &mut crate::Silent).unwrap();
        assert_eq!(read, Some(choice));
        let text = std::fs::read_to_string(&path).unwrap();
        let garbled = text.replace("\"veracity_layer\": 17", "\"veracity_layer\": 13");
        assert_ne!(garbled, text);
        std::fs::write(&path, garbled).unwrap();
        let mut notes = Notes::default();
        assert_eq!(read_record::<LayerChoice>(&path, &mut notes).unwrap(), None);
        assert!(!path.exists());
        assert!(dir.path().join("layers.json.corrupt").is_file());
        let named = path.display().to_string();
        assert!(
            notes
                .0
                .iter()
                .any(|n| n.contains("warning") && n.contains(&named)),
            "{:?}",
            notes.0
        );
    }

    /// sAwMIL rows say whether the baseline's and the perturbed probe's QPs converged.
    #[test]
    fn sawmil_rows_record_convergence() {
        let dir = tempfile::tempdir().unwrap();
        let (study, mut acts) = toy_study(dir.path());
        // The toy shifts every token of a statement alike; sAwMIL's stage 2 needs the known
        // positives (the last two tokens) to differ from the rest, so the first two go to 0.
        for i in 0..acts.len() {
            let start = acts.offsets[i] * acts.hidden;
            acts.values[start..start + 2 * acts.hidden].fill(0.0);
        }
        let fit = |name: &str| {
            probe_unit(
                &study,
                "toy",
                Domain::CityLocations,
                (Probe::Sawmil, 5),
                &acts,
                &dir.path().join(name),
                &mut crate::Silent,
            )
            .unwrap()
        };
        let unit = fit("sawmil");
        assert!(!unit.rows.is_empty());
        for row in &unit.rows {
            assert_eq!(row.converged, Some(true), "{}", row.condition);
        }
        // The noise-floor row is there, and its refit is seeded from the run's seed: a second
        // computation gives the same rows.
        assert!(unit.rows.iter().any(|r| r.condition == BASELINE_REFIT));
        assert_eq!(fit("again").rows, unit.rows);
    }

    #[test]
    fn a_probe_unit_counts_retractions_from_its_judgments_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let (study, acts) = toy_study(dir.path());
        let domain = Domain::CityLocations;
        let held_out = study.held_out_true(domain);
        assert_eq!(held_out.len(), 24);
        // The unit's bookkeeping is the same for every probe; their fits are pstat-probe's tests.
        let probe = Probe::MassMean;
        let unit_dir = dir.path().join(probe.as_str());
        let unit = probe_unit(
            &study,
            "toy",
            domain,
            (probe, 5),
            &acts,
            &unit_dir,
            &mut crate::Silent,
        )
        .unwrap();
        let baseline = unit.beliefs("baseline").unwrap();
        let believed: Vec<&String> = held_out.iter().filter(|id| baseline[*id]).collect();
        assert!(!believed.is_empty() && believed.len() < held_out.len());
        // One row per perturbation and one for the baseline's refit, its counts those of the
        // judgments it was made from.
        assert_eq!(
            unit.rows.len(),
            study.conditions.perturbations().count() + 1
        );
        assert!(unit.rows.iter().any(|r| r.condition == BASELINE_REFIT));
        for row in &unit.rows {
            let judged = unit.beliefs(&row.condition).unwrap();
            let retracted = believed.iter().filter(|id| !judged[**id]).count();
            assert_eq!(
                (row.n_baseline_true, row.retractions),
                (believed.len(), retracted),
                "{probe} {}",
                row.condition
            );
            assert_eq!((row.probe, row.layer), (probe, Some(5)));
            assert_eq!(row.converged, None, "Mass-Mean has no solver to converge");
        }
        assert!(
            unit.rows.iter().any(|r| r.retractions > 0),
            "the toy retracts"
        );
        // Every fitted Θ saw all 160 training bags (and the Noise bags); the baseline
        // relabels none, a Θ that moves a kind relabels all of that kind's bags.
        let noise = unit
            .relabelled
            .iter()
            .find(|r| r.condition == "baseline" && r.kind == "noise")
            .map_or(0, |r| r.bags);
        for condition in study.conditions.conditions.iter().map(|c| &c.name) {
            let of: Vec<&RelabelledRow> = unit
                .relabelled
                .iter()
                .filter(|r| &r.condition == condition)
                .collect();
            assert_eq!(of.iter().map(|r| r.bags).sum::<usize>(), 160 + noise);
            assert!(
                of.iter()
                    .all(|r| r.relabelled == 0 || r.relabelled == r.bags)
            );
            if condition == "baseline" {
                assert!(of.iter().all(|r| r.relabelled == 0));
            }
        }
        // The toy has Synthetic TF statements (no Synthetic FI ones): moving them to True
        // relabels exactly their 40 bags.
        let moved: usize = unit
            .relabelled
            .iter()
            .filter(|r| r.condition == "synthetic_tf")
            .map(|r| r.relabelled)
            .sum();
        assert_eq!(moved, 40);
        // The stage's retraction labels name the probe and condition of each retraction.
        let mut retractions = crate::stage::Retractions::default();
        unit.add_retractions(&study, probe, &mut retractions);
        assert!(!retractions.types.is_empty());
        for (id, labels) in &retractions.types {
            for label in labels {
                let condition = label.rsplit(' ').next().unwrap();
                assert!(label.starts_with(&format!("representational {probe} ")));
                assert!(
                    baseline[id] && !unit.beliefs(condition).unwrap()[id],
                    "{label} {id}"
                );
            }
        }
        // A finished unit is read back as it was computed.
        crate::io::write_record(&ProbeUnit::path(&unit_dir), &unit).unwrap();
        let read = ProbeUnit::read(&unit_dir, &mut crate::Silent)
            .unwrap()
            .unwrap();
        assert_eq!(read.rows, unit.rows);
        assert_eq!(read.all_beliefs(), unit.all_beliefs());
        // Every condition's probe is saved beside the record.
        for condition in unit.judgments.keys() {
            let saved = unit_dir.join(format!("{condition}.probe.safetensors"));
            assert!(TrainedProbe::load(&saved).is_ok(), "{}", saved.display());
        }
        assert!(
            ProbeUnit::read(&dir.path().join("none"), &mut crate::Silent)
                .unwrap()
                .is_none(),
            "an unfinished unit is computed"
        );
    }
}
