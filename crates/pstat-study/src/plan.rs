//! The plan of a run: every unit of work its config asks for, in the order the run computes
//! them, each with a stable [`UnitKey`], its size, its estimated cost ([`crate::costs`]) and
//! whether the out folder already holds it. Built from the config, the data and the out
//! folder only — no model is loaded — so `pstat run --dry-run` can print it and a run can
//! count down against it ([`crate::tracker`]).

use crate::costs::CostBook;
use crate::progress::duration;
use crate::stage::{CellPlan, Known};
use crate::stages::STAGES;
use crate::study::Study;
use crate::unit::{PlannedUnit, UnitKey, UnitKind};
use pstat_data::Domain;
use serde::Serialize;
use std::path::Path;

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

/// Every unit of a run, in computing order, with what the run folder already holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The units, as the stages describe them.
    pub units: Vec<PlannedUnit>,
    /// Models in the config.
    pub models: usize,
    /// Domains in the config.
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
            let reference = costs.for_model(name, &model);
            cost_sources.push(format!("{model}: {}", reference.source()));
            let known = Known::Stored {
                chat_template: chat_template(name),
                depth: n_layers(&model),
            };
            for &domain in &config.domains {
                let cell = CellPlan {
                    study,
                    model: &model,
                    domain,
                    known,
                };
                for stage in STAGES.iter().filter(|s| s.enabled(config)) {
                    units.extend(stage.units(&cell));
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

    /// The units the run folder does not hold yet.
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

/// Every unit a (model, domain) of `study` can have that picks a shard, before anything is
/// known about the model: behavioral units of both formats where `auto` or the model may
/// choose either. The prerequisites ([`UnitKind::is_prerequisite`]) are computed by whichever
/// shard needs them, and the clustering by the assembling run only.
pub fn possible_units(study: &Study, model: &str, domain: Domain) -> Vec<UnitKey> {
    let cell = CellPlan {
        study,
        model,
        domain,
        known: Known::Nothing,
    };
    STAGES
        .iter()
        .filter(|s| s.enabled(&study.config))
        .flat_map(|s| s.units(&cell))
        .map(|u| u.key)
        .filter(|k| !k.kind.is_prerequisite() && k.kind != UnitKind::Clustering)
        .collect()
}

/// The plan of `config` for the out folder `out`, read without writing anything.
pub fn preview(config: crate::RunConfig, out: &Path) -> anyhow::Result<Plan> {
    let study = Study::preview(config, out)?;
    crate::behavioral::check_context_sizes(&study)?;
    Ok(Plan::build(&study, &CostBook::load()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;
    use crate::shard::Shard;
    use crate::unit::Work;

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

    #[test]
    fn every_unit_has_exactly_one_shard_and_the_shards_share_the_work() {
        let out = tempfile::tempdir().unwrap();
        let study = Study::preview(RunConfig::default(), out.path()).unwrap();
        let keys = possible_units(&study, "m", Domain::CityLocations);
        let texts: std::collections::BTreeSet<String> =
            keys.iter().map(|k| k.canonical()).collect();
        assert_eq!(texts.len(), keys.len(), "keys are distinct");
        // 10 probe units, 1 empty baseline + 1 True baseline + 5 perturbations per format, as
        // many contexts read by the baseline probes, 1 familiarity sample.
        assert_eq!(keys.len(), 10 + 2 * 7 + 7 + 1);
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        let mut per_shard = [0usize; 3];
        for key in &keys {
            let owners: Vec<&Shard> = shards.iter().filter(|s| s.owns(key)).collect();
            assert_eq!(owners.len(), 1, "{}", key.canonical());
            per_shard[owners[0].index as usize] += 1;
        }
        assert!(per_shard.iter().all(|n| *n > 0), "{per_shard:?}");
    }

    /// A K the training split cannot fill is refused by the plan, before any model runs, under
    /// the run config's names for the setting.
    #[test]
    fn a_context_size_the_data_cannot_fill_is_refused_before_any_work() {
        let out = tempfile::tempdir().unwrap();
        let mut config = RunConfig {
            domains: vec![Domain::CityLocations],
            ..RunConfig::default()
        };
        config.behavioral.k = vec![100_000];
        let err = format!("{:#}", preview(config.clone(), out.path()).unwrap_err());
        assert!(
            err.contains("behavioral.k = 100000")
                && err.contains("needs K = 100000")
                && err.contains("behavioral.allow_fewer"),
            "{err}"
        );
        config.behavioral.allow_fewer = true;
        let study = Study::preview(config, out.path()).unwrap();
        crate::behavioral::check_context_sizes(&study).unwrap();
    }

    /// A data folder without a kind some condition relabels (its file left out), or whose test
    /// split holds no True statement, is refused when the study opens, naming the domain.
    #[test]
    fn a_data_folder_lacking_a_kind_is_refused_before_any_model() {
        let repo_data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
        let data = tempfile::tempdir().unwrap();
        for domain in Domain::ALL {
            for (rel, _) in pstat_data::load::domain_files(domain) {
                if *rel == "fictional/city_locations_fictional.csv" {
                    continue;
                }
                let to = data.path().join(rel);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(repo_data.join(rel), to).unwrap();
            }
        }
        let config = RunConfig {
            domains: vec![Domain::CityLocations],
            data: Some(data.path().display().to_string()),
            ..RunConfig::default()
        };
        let out = tempfile::tempdir().unwrap();
        let err = format!("{:#}", preview(config, out.path()).unwrap_err());
        assert!(
            err.contains("city_locations: condition `fictional` needs fictional_t statements"),
            "{err}"
        );
    }
}
