//! The representational stage of a run, per (model, domain): pick the veracity layer, extract
//! (or reuse) the activations of layers l−2..l+2, retrain every probe under every Θ and judge
//! the held-out True statements.

use crate::io::{read_json, write_jsonl};
use crate::model::LoadedModel;
use crate::plan::{UnitKey, UnitKind};
use crate::progress::Progress;
use crate::stage::{Cell, Handoff, Stage, Tables};
use crate::study::Study;
use anyhow::{Context, bail};
use pstat_data::activations::{Activations, ActivationsError, Precision, move_aside};
use pstat_data::artifact::{sha256_hex, write_json_atomic};
use pstat_data::{Condition, Domain, Kind};
use pstat_probe::perturbation::{ConditionTraining, ProbeJudgment, judge};
use pstat_probe::{Bags, MassMeanParams, ProbeParams, TrainedProbe, TrainingSet, auc};
use pstat_stability::{Bootstrap, Judgments, RowKey, StabilityRow, compare, stability_row};
use pstat_tables::{Instantiation, LayerChoice, LayerScore, Probe};
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
        let choice = veracity_layer(cell, progress)?;
        let cfg = &study.config.representational;
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
        for &probe in &cfg.probes {
            for offset in cfg.offsets(probe) {
                units.push((probe, *offset, layer_at(offset)?));
            }
        }
        let layers: BTreeSet<usize> = units.iter().map(|(_, _, l)| *l).collect();
        let layers: Vec<usize> = layers.into_iter().collect();
        let mut activations: BTreeMap<usize, Activations> = BTreeMap::new();
        for (probe, offset, layer) in units {
            let unit_dir = unit_dir(&dir, probe, layer);
            let unit = match ProbeUnit::read(study, &unit_dir)? {
                Some(done) => done,
                None => {
                    if activations.is_empty() {
                        progress.unit(&UnitKey::new(&model.name, *domain, UnitKind::Activations));
                        activations = extract_layers(study, model, *domain, &layers, progress)?;
                    }
                    progress.unit(&UnitKey {
                        probe: Some(probe),
                        layer_offset: Some(offset),
                        ..UnitKey::new(&model.name, *domain, UnitKind::Probe)
                    });
                    let unit = probe_unit(
                        cell,
                        probe,
                        layer,
                        &activations[&layer],
                        &unit_dir,
                        progress,
                    )?;
                    let rows_path = unit_dir.join("rows.json");
                    write_json_atomic(&rows_path, &unit.rows)?;
                    study
                        .manifest(format!("{probe} layer {layer} {domain}"), *domain)
                        .with_model(model.lm.sha256(), pstat_lm::kernel_isa())
                        .write_beside(&rows_path)?;
                    unit
                }
            };
            if layer == choice.veracity_layer {
                unit.add_retractions(study, probe, &mut handoff.retractions);
                tables
                    .comparisons
                    .extend(unit.comparisons(cell, probe, layer)?);
            }
            tables.stability.extend(unit.rows);
        }
        // Later stages read the veracity layer as the cache returns it (f16), whether this run
        // extracted it or finds it cached.
        if let Some(acts) = activations.remove(&choice.veracity_layer) {
            handoff.activations = Some(as_cached(&acts)?);
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

/// One probe at one layer: its stability rows and the judgments of every condition that
/// could be fit (`<unit>/rows.json`, `<unit>/<condition>.jsonl`).
struct ProbeUnit {
    rows: Vec<StabilityRow>,
    judgments: HashMap<String, Judgments>,
}

impl ProbeUnit {
    /// A finished unit, or `None` when it has not been computed.
    fn read(study: &Study, dir: &Path) -> anyhow::Result<Option<Self>> {
        let Some(rows) = read_json::<Vec<StabilityRow>>(&dir.join("rows.json"))? else {
            return Ok(None);
        };
        let mut judgments = HashMap::new();
        for condition in &study.conditions.conditions {
            if let Some(j) = read_judgments(&dir.join(format!("{}.jsonl", condition.name)))? {
                judgments.insert(condition.name.clone(), j);
            }
        }
        Ok(Some(ProbeUnit { rows, judgments }))
    }

    /// Which held-out True statements each condition retracts under this probe.
    fn add_retractions(&self, study: &Study, probe: Probe, into: &mut crate::stage::Retractions) {
        let Some(base) = study
            .conditions
            .baseline()
            .and_then(|b| self.judgments.get(&b.name))
        else {
            return;
        };
        for condition in study.conditions.perturbations() {
            if let Some(perturbed) = self.judgments.get(&condition.name) {
                into.add(
                    &format!("representational {probe} {}", condition.name),
                    base,
                    perturbed,
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
            .and_then(|b| self.judgments.get(&b.name))
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
            baseline,
            &self.judgments,
            study.config.bootstrap_resamples,
            study.seed_for(&format!("paired:{}:{domain}:{probe}:{layer}", model.name)),
        )
    }
}

fn read_judgments(path: &Path) -> anyhow::Result<Option<Judgments>> {
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Judgments::new();
    for (i, line) in text.lines().enumerate() {
        let j: ProbeJudgment = serde_json::from_str(line)
            .with_context(|| format!("{}, line {}", path.display(), i + 1))?;
        out.insert(j.id, j.judged_true);
    }
    Ok(Some(out))
}

/// The activations as a read of the f16 cache returns them.
fn as_cached(acts: &Activations) -> anyhow::Result<Activations> {
    Activations::from_bytes(&acts.to_bytes(Precision::F16)).map_err(anyhow::Error::msg)
}

/// The veracity layer and its activations for the analyses that reuse them: handed over by
/// the representational stage, or read from the cache.
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
        let mut acts = extract_layers(cell.study, cell.model, cell.domain, &[layer], progress)?;
        let acts = acts.remove(&layer).expect("requested layer");
        handoff.activations = Some(as_cached(&acts)?);
    }
    Ok((layer, handoff.activations.as_ref().expect("set above")))
}

/// Retrain one probe at one layer under every condition; judgments go to
/// `<unit>/<condition>.jsonl`.
fn probe_unit(
    cell: &Cell,
    probe: Probe,
    layer: usize,
    acts: &Activations,
    unit: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<ProbeUnit> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let domain = *domain;
    let mut split = study.split(domain).clone();
    split.train = study.train_ids(domain);
    let seed = study.seed_for(&format!("probe:{}:{domain}:{layer}", model.name));
    let training = ConditionTraining::new(study.data(domain), &split, acts, seed)?;
    let fit = UnitFit::new(
        &study.config.representational,
        study.conditions.baseline(),
        probe,
        &training,
        seed,
    )
    .with_context(|| format!("{} {domain} {probe} layer {layer}", model.name))?;
    write_json_atomic(&unit.join("probe.json"), &fit.record)?;
    let held_out = study.held_out_true(domain);
    let conditions = &study.conditions.conditions;
    progress.start(
        &format!("{} {domain} {probe} layer {layer}", model.name),
        conditions.len(),
    );
    let mut judgments: HashMap<String, Judgments> = HashMap::new();
    let mut failures = Vec::new();
    for condition in conditions {
        match fit.fit(&training, condition) {
            Ok(trained) => {
                let judged = judge(&trained, acts, &held_out)?;
                write_jsonl(&unit.join(format!("{}.jsonl", condition.name)), &judged)?;
                judgments.insert(
                    condition.name.clone(),
                    judged
                        .into_iter()
                        .map(|j: ProbeJudgment| (j.id, j.judged_true))
                        .collect(),
                );
            }
            // A degenerate fit (w = 0 optimal) is recorded, not fatal: its rates stay undefined.
            Err(e) => failures.push(format!("{}: {e}", condition.name)),
        }
        progress.advance(1);
    }
    progress.finish(false);
    if !failures.is_empty() {
        write_json_atomic(&unit.join("failures.json"), &failures)?;
        progress.note(&format!(
            "warning: {} {domain} {probe} layer {layer}: {}",
            model.name,
            failures.join("; ")
        ));
    }
    let Some(baseline) = study
        .conditions
        .baseline()
        .and_then(|b| judgments.get(&b.name))
    else {
        bail!(
            "{} {domain} {probe} layer {layer}: the baseline probe could not be fit",
            model.name
        );
    };
    let bootstrap = Bootstrap {
        resamples: study.config.bootstrap_resamples,
        seed: study.seed_for(&format!(
            "bootstrap:{}:{domain}:{probe}:{layer}",
            model.name
        )),
    };
    let mut rows = Vec::new();
    for condition in study.conditions.perturbations() {
        let Some(perturbed) = judgments.get(&condition.name) else {
            continue;
        };
        let cmp = compare(&held_out, baseline, perturbed)?;
        let key = RowKey {
            model: model.name.clone(),
            domain: domain.to_string(),
            instantiation: Instantiation::Representational,
            probe,
            layer: Some(layer),
            condition: condition.name.clone(),
            ..RowKey::default()
        };
        rows.push(StabilityRow {
            c: fit.record.c,
            ..stability_row(key, &cmp, bootstrap)
        });
    }
    Ok(ProbeUnit { rows, judgments })
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

/// The layer that best separates True from Not True: a last-token Mass-Mean baseline probe fit
/// on a stratified training sample, scored by AUC on a calibration sample. Candidates are the
/// layers whose l−2..l+2 neighbourhood exists. Persisted; a fixed layer in the config wins.
fn veracity_layer(cell: &Cell, progress: &mut dyn Progress) -> anyhow::Result<LayerChoice> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let path = cell.dir("representational").join("layers.json");
    if let Some(choice) = read_json::<LayerChoice>(&path)? {
        return Ok(choice);
    }
    let n_layers = model.lm.n_layers();
    let choice = if let Some(layer) = study.config.representational.veracity_layer {
        if layer == 0 || layer > n_layers {
            bail!(
                "representational.veracity_layer = {layer} is outside 1..={n_layers} of {}",
                model.name
            );
        }
        LayerChoice {
            model: model.name.clone(),
            domain: domain.to_string(),
            veracity_layer: layer,
            criterion: "fixed in the run config".into(),
            scores: Vec::new(),
        }
    } else {
        progress.unit(&UnitKey::new(
            &model.name,
            *domain,
            UnitKind::LayerSelection,
        ));
        select_layer(study, model, *domain, progress)?
    };
    write_json_atomic(&path, &choice)?;
    Ok(choice)
}

fn select_layer(
    study: &Study,
    model: &LoadedModel,
    domain: Domain,
    progress: &mut dyn Progress,
) -> anyhow::Result<LayerChoice> {
    let n = study.config.representational.selection_statements;
    let train = study.stratified_train(domain, n);
    let cal = study.calibration_ids(domain, n);
    let data = study.data(domain);
    let kind: HashMap<&str, Kind> = data
        .statements
        .iter()
        .map(|s| (s.id.as_str(), s.kind))
        .collect();
    let candidates: Vec<usize> = (3..=model.lm.n_layers().saturating_sub(2)).collect();
    if candidates.is_empty() {
        bail!(
            "{} has too few layers ({}) for a veracity layer with l±2 neighbours",
            model.name,
            model.lm.n_layers()
        );
    }
    let ids: Vec<String> = train.iter().chain(&cal).cloned().collect();
    let last_tokens = last_token_states(study, model, domain, &ids, &candidates, progress)?;
    let label = |id: &str| if kind[id] == Kind::True { 1i8 } else { -1 };
    let hidden = model.lm.hidden_size();
    let mut scores = Vec::new();
    for (c, &layer) in candidates.iter().enumerate() {
        let rows = |range: std::ops::Range<usize>| -> Vec<f32> {
            range
                .flat_map(|i| last_tokens[i][c * hidden..(c + 1) * hidden].to_vec())
                .collect()
        };
        let train_bags = Bags::new(hidden, rows(0..train.len()), (0..=train.len()).collect())?;
        let labels: Vec<i8> = train.iter().map(|id| label(id)).collect();
        let set = TrainingSet::with_last_known(train_bags, labels, 1)?;
        let probe = MassMeanParams::default().fit(&set)?;
        let cal_rows = rows(train.len()..ids.len());
        let cal_scores: Vec<f32> = cal_rows.chunks(hidden).map(|r| probe.score(r)).collect();
        let cal_labels: Vec<i8> = cal.iter().map(|id| label(id)).collect();
        scores.push(LayerScore {
            layer,
            auc: auc(&cal_scores, &cal_labels),
        });
    }
    let best = scores
        .iter()
        .filter_map(|s| s.auc.map(|a| (s.layer, a)))
        .fold(None, |best: Option<(usize, f64)>, (l, a)| match best {
            Some((_, b)) if b >= a => best,
            _ => Some((l, a)),
        })
        .context("no layer gave a defined AUC (the calibration sample lacks a class)")?;
    Ok(LayerChoice {
        model: model.name.clone(),
        domain: domain.to_string(),
        veracity_layer: best.0,
        criterion: format!(
            "AUC (True vs Not True) of a last-token Mass-Mean baseline probe fit on {} training and scored on {} calibration statements; first maximum over layers 3..={}",
            train.len(),
            cal.len(),
            candidates.last().unwrap()
        ),
        scores,
    })
}

/// Last-token residual stream of `ids` at every layer of `layers`, concatenated per statement
/// (`[layers × hidden]`), computed in chunks so all-token states of all layers never coexist.
fn last_token_states(
    study: &Study,
    model: &LoadedModel,
    domain: Domain,
    ids: &[String],
    layers: &[usize],
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<Vec<f32>>> {
    progress.start(
        &format!("{} {domain} layer selection", model.name),
        ids.len(),
    );
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(64) {
        let tokens = model.encode_statements(study.data(domain), chunk)?;
        let acts =
            pstat_lm::extract::extract(&model.lm, chunk, &tokens, layers, |n| progress.advance(n))?;
        for i in 0..chunk.len() {
            out.push(acts.iter().flat_map(|a| a.last_token(i).to_vec()).collect());
        }
    }
    progress.finish(false);
    Ok(out)
}

/// Activations of the statements a run probes (its training statements and held-out True
/// statements) at `layers`.
fn extract_layers(
    study: &Study,
    model: &LoadedModel,
    domain: Domain,
    layers: &[usize],
    progress: &mut dyn Progress,
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    let mut ids = study.train_ids(domain);
    ids.extend(study.held_out_true(domain));
    cached_activations(model, study.data(domain), &ids, layers, progress)
}

/// Activations of `ids` at `layers`, from the cache under `$PSTAT_HOME/activations` when
/// present, else extracted and stored (f16). The cache key covers the model file, the input
/// format and template, the data and the ids, so nothing stale is ever reused.
pub fn cached_activations(
    model: &LoadedModel,
    data: &pstat_data::Dataset,
    ids: &[String],
    layers: &[usize],
    progress: &mut dyn Progress,
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    if let Some(&l) = layers.iter().find(|&&l| l > model.lm.n_layers()) {
        bail!(
            "layer {l} is beyond the {} layers of {}",
            model.lm.n_layers(),
            model.name
        );
    }
    let domain = data.domain;
    // The leading tag versions the cache layout: v2 stopped writing f16 infinities, v3 files
    // carry a content hash checked on every read.
    let key_input = format!(
        "activations-v3\n{}\n{}\n{}\n{}",
        model.lm.sha256(),
        model.input_signature(),
        data.data_hash,
        ids.join("\n")
    );
    let dir = cache_dir()?
        .join(&model.lm.sha256()[..16])
        .join(domain.as_str())
        .join(&sha256_hex(key_input.as_bytes())[..16]);
    let path = |l: usize| dir.join(format!("layer_{l:02}.safetensors"));
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for &l in layers {
        if !path(l).exists() {
            missing.push(l);
            continue;
        }
        // A damaged cache file is never used: it is moved aside and its layer recomputed.
        match Activations::read(&path(l)) {
            Ok(a) => {
                out.insert(l, a);
            }
            Err(err @ ActivationsError::Corrupt { .. }) => {
                let aside = move_aside(&path(l))?;
                progress.note(&format!(
                    "warning: {err}; moved to {} and recomputed",
                    aside.display()
                ));
                missing.push(l);
            }
            Err(err) => return Err(err.into()),
        }
    }
    tracing::debug!(
        "activations of {} {domain}: layers {layers:?}, {} in the cache at {}",
        model.name,
        layers.len() - missing.len(),
        dir.display()
    );
    if missing.is_empty() {
        return Ok(out);
    }
    let tokens = model.encode_statements(data, ids)?;
    progress.start(&format!("{} {domain} activations", model.name), ids.len());
    let acts =
        pstat_lm::extract::extract(&model.lm, ids, &tokens, &missing, |n| progress.advance(n))?;
    progress.finish(false);
    for (&layer, mut a) in missing.iter().zip(acts) {
        a.metadata
            .insert("model_sha256".into(), model.lm.sha256().into());
        a.metadata.insert("layer".into(), layer.to_string());
        a.metadata.insert("input".into(), model.input_signature());
        a.metadata
            .insert("data_hash".into(), data.data_hash.clone());
        a.write(&path(layer), Precision::F16)?;
        out.insert(layer, a);
    }
    Ok(out)
}

/// `$PSTAT_HOME/activations`, beside the model cache (`$PSTAT_HOME/models`).
fn cache_dir() -> anyhow::Result<PathBuf> {
    let models = pstat_lm::registry::Cache::from_env()?;
    Ok(models
        .dir()
        .parent()
        .unwrap_or(models.dir())
        .join("activations"))
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
}
