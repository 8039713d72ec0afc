//! The representational stage of a run, per (model, domain): pick the veracity layer, extract
//! (or reuse) the activations of layers l−2..l+2, retrain every probe under every Θ and judge
//! the held-out True statements.

use crate::io::{read_record, write_json, write_manifest, write_record, write_record_vouching};
use crate::lock::WorkLock;
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::stage::{Cell, CellPlan, Handoff, Known, Stage, Tables};
use crate::study::Study;
use crate::unit::{PlannedUnit, UnitKey, UnitKind, Work};
use anyhow::{Context, bail};
use pstat_data::activations::Activations;
use pstat_data::{Condition, Domain, Kind};
use pstat_lm::paper::LayerWindow;
use pstat_probe::perturbation::{ConditionTraining, ProbeJudgment, judge};
use pstat_probe::{CSetting, NoiseFloorRefit, ProbeParams, TrainedProbe, auc, average_precision};
use pstat_stability::{Bootstrap, Judgments, RowKey, StabilityRow, compare, stability_row};
use pstat_tables::{
    BASELINE_REFIT, Instantiation, LayerChoice, LayerScore, MAIN_VARIANT, Probe, RESAMPLE_REFIT,
    RelabelledRow, VOLUME_MATCHED,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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

    /// The layer selection (unless the config fixes the layer), the activations (needed while
    /// some probe unit is missing, never when they are imported) and one unit per (probe,
    /// layer offset).
    fn units(&self, plan: &CellPlan) -> Vec<PlannedUnit> {
        let study = plan.study;
        let cfg = &study.config.representational;
        let dir = plan.dir(self.name());
        let depth = match plan.known {
            Known::Stored { depth, .. } => depth,
            Known::Nothing => None,
        };
        // A peek: a damaged record counts as not chosen and is left for the stage to name and
        // move aside.
        let chosen = plan
            .reads_out()
            .then(|| {
                let layers = layers_path(&dir);
                pstat_data::artifact::read_checked_json::<LayerChoice>(
                    &layers,
                    &crate::io::role_of(&layers),
                )
                .ok()
                .flatten()
            })
            .flatten()
            .map(|c| c.veracity_layer);
        let mut units = Vec::new();
        if cfg.veracity_layer.is_none() {
            let n = cfg.selection_statements;
            let statements = study.stratified_train(plan.domain, n).len()
                + study.selection_calibration(plan.domain).len();
            units.push(PlannedUnit::new(
                plan.key(UnitKind::LayerSelection),
                Work::Statements(statements),
                chosen.is_some(),
            ));
        }
        let veracity = cfg.veracity_layer.or(chosen);
        let bags = study.train_ids(plan.domain).len();
        let conditions = study.conditions.conditions.len();
        let mut probes = Vec::new();
        for &probe in &cfg.probes {
            // The window of the chosen layer (shifted inside the model where needed).
            // A model whose depth cannot be read without loading it gets no shift at the top.
            let depth = depth.unwrap_or(u32::MAX as usize);
            let window = veracity.and_then(|v| LayerWindow::new(v, cfg.offsets(probe), depth).ok());
            for &offset in cfg.offsets(probe) {
                let layer = window.as_ref().and_then(|w| w.layer(offset));
                let done = plan.reads_out()
                    && layer.is_some_and(|l| unit_dir(&dir, probe, l).join("unit.json").exists());
                let work = Work::Fits {
                    fits: conditions,
                    bags,
                    // Whether C is searched does not depend on the seed.
                    search: matches!(
                        cfg.probe_params(probe, study.config.seed).c(),
                        CSetting::Searched
                    ),
                };
                let key = UnitKey::probe(plan.model, plan.domain, probe, offset);
                probes.push(PlannedUnit {
                    layer,
                    ..PlannedUnit::new(key, work, done)
                });
            }
        }
        // Extraction is needed only while some probe unit is missing, and never when the
        // activations are imported (reading them back is not model work).
        let statements = bags + study.held_out_true(plan.domain).len();
        units.push(PlannedUnit::new(
            plan.key(UnitKind::Activations),
            Work::Statements(statements),
            cfg.activations.is_some() || probes.iter().all(|p| p.done),
        ));
        units.extend(probes);
        units
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
        let mut units: Vec<(Probe, i64, usize)> = Vec::new();
        for &probe in &cfg.probes {
            let window = cfg.window(
                probe,
                choice.veracity_layer,
                model.lm.n_layers(),
                &model.name,
            )?;
            units.extend(window.layers.iter().map(|&(o, l)| (probe, o, l)));
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
                    store_probe_unit(
                        cell,
                        (probe, offset, layer),
                        layer == choice.veracity_layer,
                        &activations[&layer],
                        &unit_dir,
                        progress,
                    )?
                }
            };
            if !scope.assembles() {
                continue;
            }
            if crate::stage::Retractions::takes_probe(probe, layer, choice.veracity_layer) {
                unit.add_retractions(study, &mut handoff.retractions);
            }
            if layer == choice.veracity_layer {
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

/// Computes the probe unit of (`probe`, `offset`) at `layer` into `unit_dir` and stores it:
/// the probes and the judgments first, then the record that vouches for them.
fn store_probe_unit(
    cell: &Cell,
    (probe, offset, layer): (Probe, i64, usize),
    controls: bool,
    acts: &Activations,
    unit_dir: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<ProbeUnit> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    progress.unit(&UnitKey {
        probe: Some(probe),
        layer_offset: Some(offset),
        ..UnitKey::new(&model.name, *domain, UnitKind::Probe)
    });
    let unit = probe_unit(
        study,
        &model.name,
        *domain,
        (probe, layer, controls),
        acts,
        unit_dir,
        progress,
    )?;
    let path = ProbeUnit::path(unit_dir);
    write_manifest(
        &study
            .manifest(format!("{probe} layer {layer} {domain}"), *domain)
            .with_model(model.lm.sha256(), &model.lm.kernel_isa()),
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
    Ok(unit)
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
    fn add_retractions(&self, study: &Study, into: &mut crate::stage::Retractions) {
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
                    Instantiation::Representational,
                    &condition.name,
                    &base,
                    &perturbed,
                );
            }
        }
    }
}

impl ProbeUnit {
    /// The paired tests of the compared conditions in this unit (`comparisons.csv`): the main
    /// fits, and the volume-matched ones where the unit has them, each read against the spread
    /// of the unit's noise-floor refits.
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
        let held_out = study.held_out_true(*domain);
        let seed = study.seed_for(&format!("paired:{}:{domain}:{probe}:{layer}", model.name));
        let volume_matched: HashMap<String, Judgments> = self
            .judgments
            .keys()
            .filter_map(|k| {
                let condition = k.strip_suffix(&format!("@{VOLUME_MATCHED}"))?;
                Some((condition.to_string(), self.beliefs(k)?))
            })
            .collect();
        let mut rows = Vec::new();
        for (variant, judged) in [
            (MAIN_VARIANT, self.all_beliefs()),
            (VOLUME_MATCHED, volume_matched),
        ] {
            rows.extend(crate::comparisons::paired_rows(
                &key,
                &held_out,
                &baseline,
                &judged,
                (&study.conditions, variant),
                study.config.bootstrap_resamples,
                seed,
            )?);
        }
        let floor = NoiseFloor::of(&self.rows);
        for row in &mut rows {
            row.floor_difference = floor.spread;
            row.exceeds_floor = floor.exceeded_by(row);
        }
        Ok(rows)
    }
}

/// What one fit of a probe unit is: a condition's own labels, a noise-floor refit of the
/// baseline with unchanged labels, or a condition relabelling only `matched` of its bags.
#[derive(Clone, Copy)]
enum Job<'a> {
    Condition(&'a Condition),
    Refit(usize),
    VolumeMatched(&'a Condition, usize),
}

impl Job<'_> {
    /// The row's condition and resample.
    fn names(&self) -> (String, Option<String>) {
        match self {
            Job::Condition(c) => (c.name.clone(), None),
            Job::Refit(i) => (
                BASELINE_REFIT.to_string(),
                Some(format!("{RESAMPLE_REFIT}{i}")),
            ),
            Job::VolumeMatched(c, _) => (c.name.clone(), Some(VOLUME_MATCHED.to_string())),
        }
    }
}

/// Where a condition's (or control's) judgments and probe are kept in a unit:
/// `<condition>` for the main fits, `<condition>@<resample>` for the controls.
fn judgment_key(condition: &str, resample: Option<&str>) -> String {
    match resample {
        None => condition.to_string(),
        Some(r) => format!("{condition}@{r}"),
    }
}

/// Retrain one probe at one layer under every condition and judge the held-out statements.
/// At the veracity layer (`controls`) the unit also fits the noise floor (the baseline refit
/// `noise_floor_refits` times with unchanged labels) and the volume-matched variant of every
/// Θ (only as many of its relabelled bags relabelled as the Θ that relabels fewest).
fn probe_unit(
    study: &Study,
    model: &str,
    domain: Domain,
    (probe, layer, controls): (Probe, usize, bool),
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
    let fits = UnitFits {
        study,
        model,
        domain,
        probe,
        layer,
        acts,
        split,
        seen: fit.params.training_bags(training.len()),
        training,
        fit,
        held_out: study.held_out_true(domain),
    };
    let relabelled = fits.relabelled_counts();
    let jobs = fits.jobs(controls, &relabelled);
    let record = UnitRecord {
        noise_floor_refits: jobs.iter().filter(|j| matches!(j, Job::Refit(_))).count(),
        volume_matched_bags: jobs.iter().find_map(|j| match j {
            Job::VolumeMatched(_, m) => Some(*m),
            _ => None,
        }),
        ..fits.fit.record.clone()
    };
    write_json(&unit.join("probe.json"), &record)?;
    progress.start(
        &format!("{} {domain} {probe} layer {layer}", model),
        jobs.len(),
    );
    let mut done = ProbeUnit {
        rows: Vec::new(),
        judgments: BTreeMap::new(),
        relabelled: fits.relabelled_rows(),
    };
    let converged = fits.fit_and_judge(&jobs, unit, &mut done, progress)?;
    let base = study.conditions.baseline();
    let Some(baseline) = base.and_then(|b| done.beliefs(&b.name)) else {
        bail!(
            "{} {domain} {probe} layer {layer}: the baseline probe could not be fit",
            model
        );
    };
    let baseline_converged = base.and_then(|b| converged.get(&b.name).copied().flatten());
    done.rows = fits.stability_rows(&jobs, &done, &baseline, &relabelled, |key| {
        baseline_converged
            .zip(converged.get(key).copied().flatten())
            .map(|(b, p)| b && p)
    })?;
    apply_noise_floor(&mut done.rows);
    Ok(done)
}

/// The fits of one probe unit: one (model, domain, probe, layer), its training set and the
/// fitted parameters shared by every Θ.
struct UnitFits<'a> {
    study: &'a Study,
    model: &'a str,
    domain: Domain,
    probe: Probe,
    layer: usize,
    acts: &'a Activations,
    split: pstat_data::SplitAssignment,
    training: ConditionTraining,
    fit: UnitFit,
    /// Training bags the fit sees.
    seen: usize,
    held_out: Vec<String>,
}

impl UnitFits<'_> {
    /// Training bags (of those the fit sees) each Θ labels otherwise than Θ0.
    fn relabelled_counts(&self) -> HashMap<String, usize> {
        let Some(base) = self.study.conditions.baseline() else {
            return HashMap::new();
        };
        self.study
            .conditions
            .conditions
            .iter()
            .map(|c| {
                let n = self
                    .training
                    .relabelled(c, base, self.seen)
                    .iter()
                    .map(|r| r.relabelled)
                    .sum();
                (c.name.clone(), n)
            })
            .collect()
    }

    /// Every Θ, and at the veracity layer (`controls`) the noise-floor refits and the
    /// volume-matched variants.
    fn jobs(&self, controls: bool, relabelled: &HashMap<String, usize>) -> Vec<Job<'_>> {
        let conditions = &self.study.conditions;
        let mut jobs: Vec<Job> = conditions.conditions.iter().map(Job::Condition).collect();
        if controls && conditions.baseline().is_some() {
            let refits = self.study.config.representational.noise_floor_refits;
            jobs.extend((1..=refits).map(Job::Refit));
            // Every Θ that relabels anything is matched to the smallest such volume; a Θ
            // already at it is refit too, so each variant row comes from the same rule.
            let matched = relabelled.values().copied().filter(|&n| n > 0).min();
            if let Some(matched) = matched {
                jobs.extend(
                    conditions
                        .perturbations()
                        .filter(|c| relabelled[c.name.as_str()] > 0)
                        .map(|c| Job::VolumeMatched(c, matched)),
                );
            }
        }
        jobs
    }

    /// Per Θ and kind: the training bags the probe saw and how many Θ relabelled.
    fn relabelled_rows(&self) -> Vec<RelabelledRow> {
        let Some(baseline) = self.study.conditions.baseline() else {
            return Vec::new();
        };
        let mut rows = Vec::new();
        for condition in &self.study.conditions.conditions {
            rows.extend(
                self.training
                    .relabelled(condition, baseline, self.seen)
                    .into_iter()
                    .map(|r| RelabelledRow {
                        model: self.model.to_string(),
                        domain: self.domain.to_string(),
                        probe: self.probe,
                        layer: self.layer,
                        condition: condition.name.clone(),
                        kind: r.kind.as_str().to_string(),
                        bags: r.bags,
                        relabelled: r.relabelled,
                    }),
            );
        }
        rows
    }

    /// The probe of one job.
    fn run_job(&self, job: &Job) -> anyhow::Result<TrainedProbe> {
        let (study, model, domain, layer) = (self.study, self.model, self.domain, self.layer);
        let base = study.conditions.baseline();
        let fitted = match *job {
            Job::Condition(condition) => self.fit.fit(&self.training, condition),
            Job::Refit(i) => {
                let base = base.expect("refits only beside a baseline");
                let refit_seed =
                    study.seed_for(&format!("probe-refit:{model}:{domain}:{layer}:{i}"));
                refit(
                    &self.training,
                    &self.split,
                    study.data(domain),
                    self.acts,
                    base,
                    self.fit.params.as_ref(),
                    refit_seed,
                )
            }
            Job::VolumeMatched(condition, matched) => {
                let base = base.expect("volume matching only beside a baseline");
                let vm_seed = study.seed_for(&format!(
                    "volume-matched:{model}:{domain}:{layer}:{}",
                    condition.name
                ));
                volume_matched(&self.training, condition, base, self.seen, matched, vm_seed)
                    .and_then(|set| self.fit.params.fit(&set))
            }
        };
        Ok(fitted?)
    }

    /// Fits every job, judges the held-out statements with each probe and saves it into
    /// `unit`; returns per judgment key whether its fit converged (sAwMIL; `None` for
    /// Mass-Mean). A degenerate fit is recorded in `failures.json`, not fatal.
    fn fit_and_judge(
        &self,
        jobs: &[Job],
        unit: &Path,
        done: &mut ProbeUnit,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<HashMap<String, Option<bool>>> {
        // Every fit is independent and single-threaded (one QP at a time), so the fits run in
        // parallel; the results are used in job order, so nothing written depends on the
        // number of threads.
        let fits: Vec<anyhow::Result<TrainedProbe>> =
            jobs.par_iter().map(|job| self.run_job(job)).collect();
        let mut failures = Vec::new();
        let mut converged: HashMap<String, Option<bool>> = HashMap::new();
        for (job, result) in jobs.iter().zip(fits) {
            let (condition, resample) = job.names();
            let key = judgment_key(&condition, resample.as_deref());
            match result {
                Ok(trained) => {
                    converged.insert(key.clone(), trained.converged);
                    let judged = judge(&trained, self.acts, &self.held_out)?;
                    // The probe itself, so anyone can reload and rescore it (`pstat sawmil
                    // predict`); the unit's record, written last, marks the unit done.
                    trained.save(&unit.join(format!("{key}.probe.safetensors")))?;
                    done.judgments.insert(key, judged);
                }
                // A degenerate fit (w = 0 optimal) is recorded, not fatal: its rates stay
                // undefined.
                Err(e) => failures.push(format!("{key}: {e}")),
            }
            progress.advance(1);
        }
        progress.finish(false);
        if !failures.is_empty() {
            write_json(&unit.join("failures.json"), &failures)?;
            progress.note(&format!(
                "warning: {} {} {} layer {}: {}",
                self.model,
                self.domain,
                self.probe,
                self.layer,
                failures.join("; ")
            ));
        }
        Ok(converged)
    }

    /// One stability row per perturbed job against the baseline's beliefs; `converged`
    /// tells whether both fits of a judgment key converged.
    fn stability_rows(
        &self,
        jobs: &[Job],
        done: &ProbeUnit,
        baseline: &Judgments,
        relabelled: &HashMap<String, usize>,
        converged: impl Fn(&str) -> Option<bool>,
    ) -> anyhow::Result<Vec<StabilityRow>> {
        let (study, domain, probe, layer) = (self.study, self.domain, self.probe, self.layer);
        let bootstrap = Bootstrap {
            resamples: study.config.bootstrap_resamples,
            seed: study.seed_for(&format!(
                "bootstrap:{}:{domain}:{probe}:{layer}",
                self.model
            )),
        };
        let mut rows = Vec::new();
        for job in jobs {
            let (condition, resample) = job.names();
            if matches!(job, Job::Condition(c) if c.is_baseline()) {
                continue;
            }
            let key = judgment_key(&condition, resample.as_deref());
            let Some(perturbed) = done.beliefs(&key) else {
                continue;
            };
            let cmp = compare(&self.held_out, baseline, &perturbed)?;
            let row_key = RowKey {
                model: self.model.to_string(),
                domain: domain.to_string(),
                instantiation: Instantiation::Representational,
                probe,
                layer: Some(layer),
                condition: condition.clone(),
                resample,
                ..RowKey::default()
            };
            rows.push(StabilityRow {
                c: self.fit.record.c,
                converged: converged(&key),
                relabelled: Some(match job {
                    Job::Condition(c) => relabelled.get(c.name.as_str()).copied().unwrap_or(0),
                    Job::Refit(_) => 0,
                    Job::VolumeMatched(_, matched) => *matched,
                }),
                ..stability_row(row_key, &cmp, bootstrap)
            });
        }
        Ok(rows)
    }
}

/// Every row but the refits' own gets the noise floor (the largest refit retraction rate)
/// and whether its retraction rate exceeds it.
fn apply_noise_floor(rows: &mut [StabilityRow]) {
    let floor = NoiseFloor::of(rows);
    for row in rows.iter_mut().filter(|r| r.condition != BASELINE_REFIT) {
        if let Some(max) = floor.max {
            row.floor_retraction_rate = Some(max);
            row.exceeds_floor = row.retraction_rate.map(|r| r > max);
        }
    }
}

/// The baseline refit with unchanged labels, as the probe draws its chance
/// ([`NoiseFloorRefit`]): sAwMIL on another seeded shuffle of the same training statements
/// (other bags fall within the fit's bag limit, bags are capped otherwise and visited in
/// another order) with another draw of the Noise bags; Mass-Mean, whose fit on the same bags
/// would be identical, on a seeded bootstrap resample of its training bags.
fn refit(
    training: &ConditionTraining,
    split: &pstat_data::SplitAssignment,
    data: &pstat_data::Dataset,
    acts: &Activations,
    baseline: &Condition,
    params: &dyn ProbeParams,
    seed: u64,
) -> pstat_probe::Result<TrainedProbe> {
    match params.noise_floor_refit() {
        NoiseFloorRefit::Bootstrap => {
            let set = training.training_set(baseline)?;
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = set.len();
            let draw: Vec<usize> = (0..n).map(|_| rng.random_range(0..n)).collect();
            params.fit(&set.subset(&draw))
        }
        NoiseFloorRefit::Reshuffle => {
            ConditionTraining::new(data, split, acts, seed)?.fit(baseline, params)
        }
    }
}

/// Θ's training set with only `matched` of the bags it relabels (among the first `seen`, a
/// seeded sample) carrying Θ's label; its other relabelled bags keep Θ0's. The bags and their
/// order are Θ0's, so the variant differs from the baseline fit in `matched` labels.
fn volume_matched(
    training: &ConditionTraining,
    condition: &Condition,
    baseline: &Condition,
    seen: usize,
    matched: usize,
    seed: u64,
) -> pstat_probe::Result<pstat_probe::TrainingSet> {
    let mut set = training.training_set(condition)?;
    let base = training.training_set(baseline)?;
    let mut moved: Vec<usize> = (0..seen.min(set.len()))
        .filter(|&i| set.labels[i] != base.labels[i])
        .collect();
    moved.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    for &i in moved.iter().skip(matched) {
        set.labels[i] = base.labels[i];
    }
    Ok(set)
}

/// The noise floor of a probe unit: the retraction rates of its refits with unchanged labels.
struct NoiseFloor {
    /// The largest refit ρ_R: a Θ at or below it retracts no more than refitting alone.
    max: Option<f64>,
    /// Largest minus smallest refit ρ_R: how far two fits with unchanged labels can differ.
    spread: Option<f64>,
    /// `spread` in statements: the largest minus the smallest refit retraction count.
    spread_retractions: Option<usize>,
}

impl NoiseFloor {
    fn of(rows: &[StabilityRow]) -> Self {
        let rates: Vec<f64> = rows
            .iter()
            .filter(|r| r.condition == BASELINE_REFIT)
            .filter_map(|r| r.retraction_rate)
            .collect();
        let max = rates.iter().copied().reduce(f64::max);
        let min = rates.iter().copied().reduce(f64::min);
        let counts: Vec<usize> = rows
            .iter()
            .filter(|r| r.condition == BASELINE_REFIT && r.retraction_rate.is_some())
            .map(|r| r.retractions)
            .collect();
        NoiseFloor {
            max,
            spread: (rates.len() >= 2)
                .then(|| max.zip(min).map(|(a, b)| a - b))
                .flatten(),
            spread_retractions: (counts.len() >= 2)
                .then(|| counts.iter().max().zip(counts.iter().min()))
                .flatten()
                .map(|(a, b)| a - b),
        }
    }

    /// Whether a paired difference of two Θ exceeds the floor's spread. Both are counted over
    /// the unit's baseline-True statements, so the counts are compared: the difference of two
    /// rounded rates can fall below a rate equal to it.
    fn exceeded_by(&self, row: &pstat_stability::ComparisonRow) -> Option<bool> {
        self.spread_retractions
            .map(|s| row.a_only.abs_diff(row.b_only) > s)
    }
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
#[derive(Debug, Clone, serde::Serialize)]
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
    /// Noise-floor refits of the baseline fit in this unit (0 away from the veracity layer).
    noise_floor_refits: usize,
    /// Relabelled bags per Θ in the volume-matched fits (none away from the veracity layer).
    volume_matched_bags: Option<usize>,
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
            noise_floor_refits: 0,
            volume_matched_bags: None,
        };
        let params = cfg.probe_params(probe, seed);
        match params.c() {
            CSetting::Absent => {}
            CSetting::Fixed(c) => {
                record.c = Some(c);
                record.c_source = Some("config".into());
            }
            CSetting::Searched => {
                let baseline =
                    baseline.context("the condition set has no baseline to choose C on")?;
                let searched = params
                    .search_c(&training.training_set(baseline)?)
                    .context("the baseline probe could not be fit")?;
                record.c = Some(searched.c);
                record.c_source = Some("cv_baseline".into());
                record.cv_scores = searched.scores;
                record.cv_skipped = searched.skipped;
                return Ok(UnitFit {
                    params: searched.params,
                    baseline: Some(searched.baseline),
                    record,
                });
            }
        }
        Ok(UnitFit {
            params,
            baseline: None,
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
/// run config wins; else the paper's Table A3 layer when the model is one of the paper's (the
/// authors' block l is pstat's layer l + 1, see [`pstat_lm::paper`]); else the criterion the
/// Table A3 layers come from ([`select_layer`]). Where a probe's window of layers had to be
/// shifted to stay inside the model, the record says so (`window`).
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
        window: Vec::new(),
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
            &format!(
                "the paper's layer for this model and domain (Table A3: {}, the output of the \
                 authors' 0-based block {}, which is pstat's layer {layer})",
                layer - 1,
                layer - 1
            ),
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
    let mut choice = choice;
    let cfg = &study.config.representational;
    for &probe in &cfg.probes {
        let window = cfg.window(probe, choice.veracity_layer, n_layers, &model.name)?;
        if let Some(note) = window.note() {
            choice.window.push(format!("{probe}: {note}"));
        }
    }
    write_record(&path, &choice)?;
    Ok(choice)
}

/// `<cell>/representational/layers.json`: the cell's veracity-layer choice and its curve, a
/// hash-checked record like a unit's (`write_record`): every later stage and every resumed
/// run reads the layer from it, so a garbled digit would move every probe to another layer.
/// A damaged one is moved aside and the choice recomputed (`read_record`).
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
/// lowest layer whose window l−2..l+2 has a mean AP within `SELECTION_TOLERANCE` of the best,
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
        window: Vec::new(),
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

    /// Refits retracting 67 and 95 of 241 statements spread by 28, as a difference of 30 vs 2
    /// statements does: equal, so not beyond it, though 95/241 − 67/241 rounds below 28/241.
    #[test]
    fn a_difference_equal_to_the_floor_spread_does_not_exceed_it() {
        let refit = |retractions: usize| StabilityRow {
            condition: BASELINE_REFIT.into(),
            retractions,
            n_baseline_true: 241,
            retraction_rate: Some(retractions as f64 / 241.0),
            ..StabilityRow::default()
        };
        let floor = NoiseFloor::of(&[refit(67), refit(85), refit(95)]);
        assert!(floor.spread.unwrap() < 28.0 / 241.0, "the rates round");
        let paired = |a_only: usize, b_only: usize| pstat_stability::ComparisonRow {
            a_only,
            b_only,
            n_baseline_true: 241,
            difference: (a_only as f64 - b_only as f64) / 241.0,
            ..pstat_stability::ComparisonRow::default()
        };
        assert_eq!(floor.exceeded_by(&paired(30, 2)), Some(false));
        assert_eq!(floor.exceeded_by(&paired(2, 30)), Some(false));
        assert_eq!(floor.exceeded_by(&paired(31, 2)), Some(true));
        assert_eq!(
            NoiseFloor::of(&[refit(67)]).exceeded_by(&paired(31, 2)),
            None
        );
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
            window: Vec::new(),
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
                (Probe::Sawmil, 5, true),
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
        // The noise floor's five refits are there, and they are seeded from the run's seed: a
        // second computation gives the same rows.
        let refits: Vec<&StabilityRow> = unit
            .rows
            .iter()
            .filter(|r| r.condition == BASELINE_REFIT)
            .collect();
        assert_eq!(refits.len(), 5);
        assert_eq!(refits[4].resample.as_deref(), Some("refit5"));
        assert_eq!(fit("again").rows, unit.rows);
    }

    /// The Mass-Mean floor resamples its training bags: its refits differ from each other (a
    /// refit on the same bags would be the baseline itself), and the same seed gives the same
    /// floor. Every Θ row is read against it; the volume-matched rows relabel as many bags as
    /// the Θ that relabels fewest.
    #[test]
    fn the_noise_floor_and_the_volume_matched_fits_are_seeded_controls() {
        let dir = tempfile::tempdir().unwrap();
        let (study, acts) = toy_study(dir.path());
        let fit = |name: &str, controls: bool| {
            probe_unit(
                &study,
                "toy",
                Domain::CityLocations,
                (Probe::MassMean, 5, controls),
                &acts,
                &dir.path().join(name),
                &mut crate::Silent,
            )
            .unwrap()
        };
        let unit = fit("mass_mean", true);
        let refit_scores: Vec<Vec<f32>> = (1..=5)
            .map(|i| {
                unit.judgments[&format!("{BASELINE_REFIT}@refit{i}")]
                    .iter()
                    .map(|j| j.score)
                    .collect()
            })
            .collect();
        assert!(
            refit_scores.windows(2).all(|w| w[0] != w[1]),
            "bootstrap refits differ"
        );
        let baseline_scores: Vec<f32> =
            unit.judgments["baseline"].iter().map(|j| j.score).collect();
        assert!(refit_scores.iter().all(|s| *s != baseline_scores));
        assert_eq!(fit("again", true).rows, unit.rows);
        let floor = NoiseFloor::of(&unit.rows).max.unwrap();
        for row in unit.rows.iter().filter(|r| r.condition != BASELINE_REFIT) {
            assert_eq!(row.floor_retraction_rate, Some(floor));
            assert_eq!(row.exceeds_floor, row.retraction_rate.map(|r| r > floor));
        }
        // Synthetic (TF), Fictional, Fictional (T) relabel 40 bags each, Noise its Noise bags
        // (fewer): each volume-matched row relabels as many as Noise does.
        let noise = unit
            .rows
            .iter()
            .find(|r| r.condition == "noise" && r.resample.is_none())
            .and_then(|r| r.relabelled)
            .unwrap();
        assert!(noise > 0 && noise < 40, "{noise}");
        let matched: Vec<&StabilityRow> = unit
            .rows
            .iter()
            .filter(|r| r.resample.as_deref() == Some(VOLUME_MATCHED))
            .collect();
        assert_eq!(matched.len(), 4, "every Θ that relabels anything");
        assert!(matched.iter().all(|r| r.relabelled == Some(noise)));
        // Away from the veracity layer there are no controls.
        let plain = fit("plain", false);
        assert!(plain.rows.iter().all(|r| r.resample.is_none()));
        assert_eq!(plain.rows.len(), study.conditions.perturbations().count());
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
            (probe, 5, false),
            &acts,
            &unit_dir,
            &mut crate::Silent,
        )
        .unwrap();
        let baseline = unit.beliefs("baseline").unwrap();
        let believed: Vec<&String> = held_out.iter().filter(|id| baseline[*id]).collect();
        assert!(!believed.is_empty() && believed.len() < held_out.len());
        // One row per perturbation (away from the veracity layer: no controls), its counts
        // those of the judgments it was made from.
        assert_eq!(unit.rows.len(), study.conditions.perturbations().count());
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
        // The stage's retraction labels name the instantiation and condition of each
        // retraction.
        let mut retractions = crate::stage::Retractions::default();
        unit.add_retractions(&study, &mut retractions);
        assert!(!retractions.types.is_empty());
        for (id, labels) in &retractions.types {
            for label in labels {
                let condition = label.strip_prefix("representational:").unwrap();
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
