//! The plan of a run: every unit of work its config asks for, in the order the run computes
//! them, each with a stable [`UnitKey`], its size, its estimated cost ([`crate::costs`]) and
//! whether the out folder already holds it. Built from the config, the data and the out
//! folder only — no model is loaded — so `pstat run --dry-run` can print it and a run can
//! count down against it ([`crate::tracker`]).

use crate::behavioral::Behavioral;
use crate::clustering::Clustering;
use crate::config::Formats;
use crate::costs::CostBook;
use crate::familiarity::Familiarity;
use crate::io::read_json;
use crate::progress::duration;
use crate::representational::Representational;
use crate::stage::Stage;
use crate::study::Study;
use crate::unit::{UnitKey, UnitKind, Work};
use pstat_data::{Domain, Kind};
use pstat_tables::{Baseline, DECISIONS_FILE, Decisions, LayerChoice, Probe, PromptFormat};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedUnit {
    pub key: UnitKey,
    /// The probe unit's layer, when the veracity layer is known (fixed in the config or
    /// already chosen in the out folder).
    pub layer: Option<usize>,
    pub work: Work,
    /// Seconds expected on this machine ([`crate::costs`]).
    pub estimate_s: Option<f64>,
    /// Seconds the reference table predicts, before this machine's pace.
    pub reference_s: Option<f64>,
    /// The out folder already holds its result.
    pub done: bool,
}

/// One unit of `--dry-run --json`: its key's fields, its stable id and its cost.
#[derive(Serialize)]
struct UnitJson<'a> {
    id: String,
    stage: &'static str,
    #[serde(flatten)]
    key: &'a UnitKey,
    /// The probe unit's layer, when the veracity layer is already known.
    #[serde(skip_serializing_if = "Option::is_none")]
    layer: Option<usize>,
    items: usize,
    estimate_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub units: Vec<PlannedUnit>,
    pub models: usize,
    pub domains: usize,
    /// Where the estimates come from, one phrase per model.
    pub cost_sources: Vec<String>,
}

impl Plan {
    /// Every unit `study`'s config asks for, in computing order.
    pub fn build(study: &Study, costs: &CostBook) -> Plan {
        let config = &study.config;
        let mut units = Vec::new();
        let mut cost_sources = Vec::new();
        for name in &config.models {
            let model = crate::model::display_name(name);
            let chat = chat_template(name);
            let reference = costs.for_model(name, &model);
            cost_sources.push(format!("{model}: {}", reference.source()));
            for &domain in &config.domains {
                let cell = CellPlan {
                    study,
                    model: &model,
                    domain,
                    dir: study.out.join(&model).join(domain.as_str()),
                };
                if Representational.enabled(config) {
                    cell.representational(&mut units);
                }
                if Behavioral.enabled(config) {
                    cell.behavioral(chat, &mut units);
                }
                if Familiarity.enabled(config) {
                    cell.familiarity(&mut units);
                }
                if Clustering.enabled(config) {
                    cell.clustering(&mut units);
                }
            }
            // A shard plans its own units only, and the prerequisites of its cells.
            units.retain(|u| study.scope.plans(&u.key));
            for unit in units.iter_mut().filter(|u| u.key.model == model) {
                unit.estimate_s = reference.seconds(&unit.key, unit.work);
                unit.reference_s = reference.reference_seconds(&unit.key, unit.work);
            }
        }
        for unit in &units {
            if unit.done {
                tracing::debug!("plan: {} is stored in {}", unit.key, study.out.display());
            }
        }
        Plan {
            units,
            models: config.models.len(),
            domains: config.domains.len(),
            cost_sources,
        }
    }

    pub fn pending(&self) -> impl Iterator<Item = &PlannedUnit> {
        self.units.iter().filter(|u| !u.done)
    }

    /// Estimated seconds of the units still to compute, and how many of them have none.
    pub fn remaining(&self) -> (f64, usize) {
        let mut seconds = 0.0;
        let mut unknown = 0;
        for unit in self.pending() {
            match unit.estimate_s {
                Some(s) => seconds += s,
                None => unknown += 1,
            }
        }
        (seconds, unknown)
    }

    /// `--dry-run --json`: the totals, where the estimates come from, and every unit still to
    /// compute.
    pub fn to_json(&self, out: &Path) -> serde_json::Value {
        let pending: Vec<UnitJson> = self
            .pending()
            .map(|u| UnitJson {
                id: u.key.to_string(),
                stage: u.key.kind.stage(),
                key: &u.key,
                layer: u.layer,
                items: u.work.items(),
                estimate_s: u.estimate_s,
            })
            .collect();
        let (estimate_s, unestimated) = self.remaining();
        serde_json::json!({
            "out": out,
            "units_total": self.units.len(),
            "units_stored": self.units.len() - pending.len(),
            "estimate_s": estimate_s,
            "units_without_estimate": unestimated,
            "cost_sources": self.cost_sources,
            "units": pending,
        })
    }

    /// `--dry-run`: one tab-separated line per unit still to compute (id, items, estimate).
    pub fn pending_lines(&self) -> Vec<String> {
        self.pending()
            .map(|u| {
                let estimate = u.estimate_s.map_or("?".to_string(), duration);
                format!("{}\t{} items\t{estimate}", u.key, u.work.items())
            })
            .collect()
    }

    /// The lines a run prints before it starts: units per stage, and the estimated time.
    pub fn summary(&self) -> Vec<String> {
        let mut per_stage: Vec<(&str, usize, usize)> = Vec::new();
        for unit in &self.units {
            let stage = unit.key.kind.stage();
            let i = match per_stage.iter().position(|(s, _, _)| *s == stage) {
                Some(i) => i,
                None => {
                    per_stage.push((stage, 0, 0));
                    per_stage.len() - 1
                }
            };
            per_stage[i].1 += 1;
            per_stage[i].2 += usize::from(unit.done);
        }
        let stages: Vec<String> = per_stage
            .iter()
            .map(|(stage, n, done)| match done {
                0 => format!("{stage} {n}"),
                _ => format!("{stage} {n} ({done} stored)"),
            })
            .collect();
        let pending = self.pending().count();
        let (seconds, unknown) = self.remaining();
        let estimate = match (pending, unknown) {
            (0, _) => "nothing to compute".to_string(),
            (_, 0) => format!("about {} to compute", duration(seconds)),
            (_, u) if u == pending => format!("no estimate for the {u} units to compute"),
            (_, u) => format!(
                "about {} to compute, plus {u} units without an estimate",
                duration(seconds)
            ),
        };
        vec![
            format!(
                "plan: {} model(s) × {} domain(s), {} units ({pending} to compute): {}",
                self.models,
                self.domains,
                self.units.len(),
                stages.join(", ")
            ),
            format!("estimate: {estimate} ({})", self.cost_sources.join("; ")),
        ]
    }
}

/// Whether the model has a chat template, read from the registry or the file's header (no
/// weights); `None` when it cannot be told without pulling the model.
fn chat_template(name: &str) -> Option<bool> {
    use pstat_lm::registry::{ModelKind, ModelSource, describe, find};
    let kind = match find(name) {
        Some(spec) => spec.kind,
        None => {
            let source = ModelSource::resolve(name).ok()?;
            describe(name, &source).ok()?.kind
        }
    };
    Some(kind == ModelKind::Chat)
}

/// The model's number of decoder blocks, read from the registry or the file's header (no
/// weights); `None` when it cannot be told without pulling the model.
fn n_layers(name: &str) -> Option<usize> {
    use pstat_lm::registry::{ModelSource, describe, find};
    match find(name) {
        Some(spec) => Some(spec.n_layers),
        None => {
            let source = ModelSource::resolve(name).ok()?;
            Some(describe(name, &source).ok()?.layers)
        }
    }
}

/// One (model, domain) of the plan.
struct CellPlan<'a> {
    study: &'a Study,
    model: &'a str,
    domain: Domain,
    /// `<out>/<model>/<domain>`.
    dir: PathBuf,
}

impl CellPlan<'_> {
    fn key(&self, kind: UnitKind) -> UnitKey {
        UnitKey::new(self.model, self.domain, kind)
    }

    fn unit(&self, key: UnitKey, work: Work, done: bool) -> PlannedUnit {
        PlannedUnit {
            key,
            layer: None,
            work,
            estimate_s: None,
            reference_s: None,
            done,
        }
    }

    fn representational(&self, units: &mut Vec<PlannedUnit>) {
        let study = self.study;
        let cfg = &study.config.representational;
        let dir = crate::stage::stage_dir(
            &self.study.out,
            self.model,
            self.domain,
            Representational.name(),
        );
        // A peek: a damaged record counts as not chosen and is left for the stage to name and
        // move aside.
        let layers = crate::representational::layers_path(&dir);
        let chosen = pstat_data::artifact::read_checked_json::<LayerChoice>(
            &layers,
            &crate::io::role_of(&layers),
        )
        .ok()
        .flatten()
        .map(|c| c.veracity_layer);
        if cfg.veracity_layer.is_none() {
            let n = cfg.selection_statements;
            let statements = study.stratified_train(self.domain, n).len()
                + study.selection_calibration(self.domain).len();
            units.push(self.unit(
                self.key(UnitKind::LayerSelection),
                Work::Statements(statements),
                chosen.is_some(),
            ));
        }
        let veracity = cfg.veracity_layer.or(chosen);
        let bags = study.train_ids(self.domain).len();
        let conditions = study.conditions.conditions.len();
        let mut probes = Vec::new();
        for &probe in &cfg.probes {
            // The window of the chosen layer (shifted inside the model where needed).
            // A model whose depth cannot be read without loading it gets no shift at the top.
            let depth = n_layers(self.model).unwrap_or(u32::MAX as usize);
            let window = veracity
                .and_then(|v| pstat_lm::paper::LayerWindow::new(v, cfg.offsets(probe), depth).ok());
            for &offset in cfg.offsets(probe) {
                let layer = window.as_ref().and_then(|w| w.layer(offset));
                let done = layer.is_some_and(|l| {
                    crate::representational::unit_dir(&dir, probe, l)
                        .join("unit.json")
                        .exists()
                });
                let work = Work::Fits {
                    fits: conditions,
                    bags,
                    search: probe == Probe::Sawmil && cfg.sawmil_c.is_none(),
                };
                let key = UnitKey::probe(self.model, self.domain, probe, offset);
                probes.push(PlannedUnit {
                    layer,
                    ..self.unit(key, work, done)
                });
            }
        }
        // Extraction is needed only while some probe unit is missing, and never when the
        // activations are imported (reading them back is not model work).
        let statements = bags + study.held_out_true(self.domain).len();
        units.push(self.unit(
            self.key(UnitKind::Activations),
            Work::Statements(statements),
            cfg.activations.is_some() || probes.iter().all(|p| p.done),
        ));
        units.extend(probes);
    }

    fn behavioral(&self, chat: Option<bool>, units: &mut Vec<PlannedUnit>) {
        let study = self.study;
        let cfg = &study.config.behavioral;
        let statements = study.held_out_true(self.domain).len();
        let decided = read_json::<Decisions>(&study.out.join(DECISIONS_FILE), &mut crate::Silent)
            .ok()
            .flatten()
            .and_then(|d| {
                d.formats
                    .into_iter()
                    .find(|f| f.model == self.model && f.domain == self.domain.as_str())
            })
            .map(|f| f.formats);
        // The studies the stage runs, in its order: (format, K, baseline, baseline only).
        let mut studies: Vec<(PromptFormat, usize, Baseline, bool)> = Vec::new();
        let max_k = cfg.k.iter().copied().max().unwrap_or(0);
        let formats = match (&cfg.formats, chat) {
            (Formats::Listed(listed), _) => {
                let usable: Vec<PromptFormat> = listed
                    .iter()
                    .copied()
                    .filter(|f| *f == PromptFormat::Plain || chat != Some(false))
                    .collect();
                if usable.is_empty() {
                    vec![PromptFormat::Plain]
                } else {
                    usable
                }
            }
            (Formats::Auto, Some(false)) => vec![PromptFormat::Plain],
            // A chat model's chat-format baseline decides; until it has, the plan assumes
            // chat (the paper's format for chat models).
            (Formats::Auto, _) => {
                studies.push((PromptFormat::Chat, max_k, Baseline::Empty, true));
                decided.unwrap_or_else(|| vec![PromptFormat::Chat])
            }
        };
        for &format in &formats {
            for &k in &cfg.k {
                for &baseline in &cfg.baselines {
                    studies.push((format, k, baseline, false));
                }
            }
        }
        let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
        for (format, k, baseline, baseline_only) in studies {
            let spec =
                crate::behavioral::study_spec(study, self.model, self.domain, format, k, baseline);
            let Ok(spec_units) = spec.units(&study.conditions) else {
                continue;
            };
            for (condition, draw) in spec_units {
                if baseline_only && !condition.is_baseline() {
                    continue;
                }
                let files = spec.unit_files(condition, draw);
                // The empty-context baseline is one unit for every K (and for the chat check).
                if !seen.insert(files.meta.clone()) {
                    continue;
                }
                let key = UnitKey::prompt(&spec, condition, draw);
                let work = Work::Prompts {
                    statements,
                    k: key.k.unwrap_or(0),
                };
                units.push(self.unit(key, work, files.meta.exists()));
            }
        }
    }

    fn familiarity(&self, units: &mut Vec<PlannedUnit>) {
        let data = self.study.data(self.domain);
        let n = self.study.config.familiarity.statements_per_kind;
        let statements = [
            Kind::True,
            Kind::False,
            Kind::FictionalT,
            Kind::FictionalF,
            Kind::SyntheticTf,
            Kind::SyntheticFi,
        ]
        .iter()
        .map(|k| data.of_kind(*k).count().min(n))
        .sum();
        units.push(self.unit(
            self.key(UnitKind::ObjectTokens),
            Work::Statements(statements),
            self.dir.join("familiarity.json").exists(),
        ));
    }

    fn clustering(&self, units: &mut Vec<PlannedUnit>) {
        let dir = crate::clustering::cell_dir(&self.study.out, self.model, self.domain);
        let done = ["result.json", "skipped.json"]
            .iter()
            .any(|f| dir.join(f).exists());
        units.push(self.unit(self.key(UnitKind::Clustering), Work::Grid, done));
    }
}

/// The plan of `config` for the out folder `out`, read without writing anything.
pub fn preview(config: crate::RunConfig, out: &Path) -> anyhow::Result<Plan> {
    let study = Study::preview(config, out)?;
    Ok(Plan::build(&study, &CostBook::load()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: UnitKind) -> UnitKey {
        UnitKey::new("m", Domain::CityLocations, kind)
    }

    fn planned(kind: UnitKind, estimate_s: Option<f64>, done: bool) -> PlannedUnit {
        PlannedUnit {
            key: key(kind),
            layer: None,
            work: Work::Statements(10),
            estimate_s,
            reference_s: estimate_s,
            done,
        }
    }

    #[test]
    fn the_summary_counts_units_per_stage_and_totals_the_estimate() {
        let mut plan = Plan {
            units: vec![
                planned(UnitKind::LayerSelection, Some(30.0), true),
                planned(UnitKind::Probe, Some(90.0), false),
                planned(UnitKind::Prompt, Some(3600.0), false),
            ],
            models: 1,
            domains: 1,
            cost_sources: vec!["m: reference".into()],
        };
        assert_eq!(
            plan.summary(),
            [
                "plan: 1 model(s) × 1 domain(s), 3 units (2 to compute): representational 2 (1 stored), behavioral 1",
                "estimate: about 1h01m to compute (m: reference)",
            ]
        );
        plan.units[2].estimate_s = None;
        assert_eq!(
            plan.summary()[1],
            "estimate: about 1m30s to compute, plus 1 units without an estimate (m: reference)"
        );
        for unit in &mut plan.units {
            unit.done = true;
        }
        assert_eq!(
            plan.summary()[1],
            "estimate: nothing to compute (m: reference)"
        );
    }
}
