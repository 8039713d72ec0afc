//! What a unit of a run costs, for the plan's estimate and the run's ETA. Two sources:
//!
//! - `costs.toml` (beside this file): per-item costs of the embedded models on the reference
//!   machine of docs/BENCHMARKS.md (2 vCPU AMD EPYC), derived from the stage times recorded
//!   there. A model missing from it is scaled from SmolLM2's entry by its file size.
//! - `$PSTAT_HOME/costs.json`: this machine's pace, measured by earlier runs. For each model
//!   and kind of unit it keeps the seconds the computed units took and the seconds the
//!   reference predicted for them (earlier runs at half weight); their ratio multiplies the
//!   reference from then on.

use crate::unit::{UnitKey, UnitKind, Work};
use pstat_tables::Probe;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-item seconds of one model (an entry of `costs.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCosts {
    /// Size of the model's file, to scale from for models without an entry.
    pub file_bytes: f64,
    /// One statement through every layer, hidden states kept (selection, extraction).
    pub forward_s: f64,
    /// One statement's next-token probabilities over the vocabulary (familiarity).
    pub object_tokens_s: f64,
    /// One held-out statement judged after an empty context ...
    pub prompt_s: f64,
    /// ... plus this per context statement.
    pub prompt_per_k_s: f64,
    /// One held-out statement's hidden states after an empty context (contextual stage) ...
    pub context_s: f64,
    /// ... plus this per context statement.
    pub context_per_k_s: f64,
    /// Fits' worth of time a 3-fold CV search for C costs.
    pub search_fits: f64,
    /// One clustering grid.
    pub clustering_s: f64,
    /// One fit of each probe, by its spelling (`[models.<name>.fits]`). A probe without an
    /// entry is estimated as a fit of the primary probe until this machine's pace for it is
    /// measured.
    pub fits: BTreeMap<Probe, FitCost>,
}

/// The reference seconds of one probe fit (at a fixed C, for a probe that has one).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum FitCost {
    /// Per 1000 training bags: a fit whose time grows with its bags (sAwMIL's QPs).
    #[serde(rename = "per_1000_bags")]
    Per1000Bags(f64),
    /// Per fit, whatever the number of bags (Mass-Mean: its time is the covariance's).
    #[serde(rename = "each")]
    Each(f64),
}

impl ModelCosts {
    /// Reference seconds of a unit of `kind` doing `work`.
    fn seconds(&self, key: &UnitKey, work: Work) -> f64 {
        match (key.kind, work) {
            (UnitKind::ObjectTokens, Work::Statements(n)) => n as f64 * self.object_tokens_s,
            (_, Work::Statements(n)) => n as f64 * self.forward_s,
            (UnitKind::Context, Work::Prompts { statements, k }) => {
                statements as f64 * (self.context_s + k as f64 * self.context_per_k_s)
            }
            (_, Work::Prompts { statements, k }) => {
                statements as f64 * (self.prompt_s + k as f64 * self.prompt_per_k_s)
            }
            (_, Work::Fits { fits, bags, search }) => {
                // The search fits the baseline probe that every Θ then reuses its C from.
                let fits = if search {
                    fits.saturating_sub(1) as f64 + self.search_fits
                } else {
                    fits as f64
                };
                match self.fit_cost(key.probe) {
                    FitCost::Per1000Bags(s) => fits * s * bags as f64 / 1000.0,
                    FitCost::Each(s) => fits * s,
                }
            }
            (_, Work::Grid) => self.clustering_s,
        }
    }

    /// The cost of one fit of `probe`, or of the primary probe where it has no entry.
    fn fit_cost(&self, probe: Option<Probe>) -> FitCost {
        probe
            .and_then(|p| self.fits.get(&p))
            .or_else(|| self.fits.get(&Probe::PRIMARY))
            .copied()
            .expect("every entry of costs.toml prices the primary probe (a test checks it)")
    }

    /// These costs for a model whose file is `ratio` times as large (forward passes scale
    /// with the weights; the probes and the clustering do not depend on them much).
    fn scaled(self, ratio: f64) -> Self {
        ModelCosts {
            file_bytes: self.file_bytes * ratio,
            forward_s: self.forward_s * ratio,
            object_tokens_s: self.object_tokens_s * ratio,
            prompt_s: self.prompt_s * ratio,
            prompt_per_k_s: self.prompt_per_k_s * ratio,
            context_s: self.context_s * ratio,
            context_per_k_s: self.context_per_k_s * ratio,
            ..self
        }
    }
}

/// The model whose entry scales to models without one.
const SCALE_FROM: &str = "smollm2-135m-instruct";

/// `costs.toml`: the reference entries, by registry name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    models: BTreeMap<String, ModelCosts>,
}

fn reference() -> Reference {
    toml::from_str(include_str!("costs.toml")).expect("costs.toml parses (a test checks it)")
}

/// Measured and predicted seconds of the units one kind of a model computed on this machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    /// Seconds measured.
    pub measured_s: f64,
    /// Seconds the reference table predicted for the same units.
    pub reference_s: f64,
}

impl Pace {
    /// measured / reference, once at least a minute was measured (shorter samples are
    /// dominated by fixed costs).
    pub fn factor(&self) -> Option<f64> {
        (self.reference_s > 0.0 && self.measured_s >= 60.0)
            .then(|| self.measured_s / self.reference_s)
    }
}

/// The kind of unit a pace is kept for: each probe's units apart.
pub fn cost_class(key: &UnitKey) -> String {
    match key.probe {
        Some(probe) if key.kind == UnitKind::Probe => format!("probe_{probe}"),
        _ => key.kind.as_str().to_string(),
    }
}

/// model (as in the tables) → cost class → pace.
type Paces = BTreeMap<String, BTreeMap<String, Pace>>;

/// The reference table and this machine's paces.
pub struct CostBook {
    reference: Reference,
    /// As earlier runs left them: what estimates use.
    paces: Paces,
    /// What this run has measured so far.
    measured: Paces,
    path: Option<PathBuf>,
}

impl CostBook {
    /// The reference table, and the paces under `$PSTAT_HOME` (none when unreadable).
    pub fn load() -> Self {
        let path = pstat_lm::registry::Cache::from_env().ok().map(|cache| {
            let models = cache.dir();
            models.parent().unwrap_or(models).join("costs.json")
        });
        let paces = path
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        CostBook {
            reference: reference(),
            paces,
            measured: Paces::new(),
            path,
        }
    }

    /// The reference table only.
    #[cfg(test)]
    pub fn reference_only() -> Self {
        CostBook {
            reference: reference(),
            paces: Paces::new(),
            measured: Paces::new(),
            path: None,
        }
    }

    /// The estimator of the model a config names `name` (shown as `model` in the tables).
    pub fn for_model(&self, name: &str, model: &str) -> ModelEstimate {
        let (costs, origin) = match self.reference.models.get(name) {
            Some(c) => (Some(c.clone()), "reference machine"),
            None => match (
                self.reference.models.get(SCALE_FROM),
                std::fs::metadata(Path::new(name))
                    .ok()
                    .filter(|m| m.is_file()),
            ) {
                (Some(base), Some(meta)) => (
                    Some(base.clone().scaled(meta.len() as f64 / base.file_bytes)),
                    "reference machine, scaled by file size",
                ),
                _ => (None, "no reference"),
            },
        };
        ModelEstimate {
            costs,
            origin,
            paces: self.paces.get(model).cloned().unwrap_or_default(),
        }
    }

    /// Adds a unit this run computed: `measured_s` it took, `reference_s` the reference
    /// predicted.
    pub fn record(&mut self, model: &str, class: &str, measured_s: f64, reference_s: f64) {
        let pace = self
            .measured
            .entry(model.to_string())
            .or_default()
            .entry(class.to_string())
            .or_default();
        pace.measured_s += measured_s;
        pace.reference_s += reference_s;
    }

    /// The paces to keep: earlier runs' at half weight, so that the pace follows a machine
    /// that changes, plus this run's.
    fn merged(&self) -> Paces {
        let mut merged = self.paces.clone();
        for pace in merged.values_mut().flat_map(|m| m.values_mut()) {
            pace.measured_s /= 2.0;
            pace.reference_s /= 2.0;
        }
        for (model, classes) in &self.measured {
            for (class, pace) in classes {
                let kept = merged
                    .entry(model.clone())
                    .or_default()
                    .entry(class.clone())
                    .or_default();
                kept.measured_s += pace.measured_s;
                kept.reference_s += pace.reference_s;
            }
        }
        merged
    }

    /// Writes the paces back (atomically; a failure costs only future estimates).
    pub fn save(&self) -> anyhow::Result<()> {
        if let Some(path) = &self.path {
            pstat_data::artifact::write_json_atomic(path, &self.merged())?;
        }
        Ok(())
    }
}

/// How one model's units are estimated.
pub struct ModelEstimate {
    costs: Option<ModelCosts>,
    origin: &'static str,
    paces: BTreeMap<String, Pace>,
}

impl ModelEstimate {
    /// Seconds the reference predicts for a unit (no pace applied).
    pub fn reference_seconds(&self, key: &UnitKey, work: Work) -> Option<f64> {
        self.costs.as_ref().map(|c| c.seconds(key, work))
    }

    /// Seconds expected on this machine: the reference times this machine's pace for the
    /// unit's kind, when earlier runs measured it.
    pub fn seconds(&self, key: &UnitKey, work: Work) -> Option<f64> {
        let pace = self
            .paces
            .get(&cost_class(key))
            .and_then(Pace::factor)
            .unwrap_or(1.0);
        self.reference_seconds(key, work).map(|s| s * pace)
    }

    /// Where the estimates come from, for the plan line.
    pub fn source(&self) -> String {
        let measured = self.paces.values().filter(|p| p.factor().is_some()).count();
        match (self.costs.is_some(), measured) {
            (false, _) => self.origin.to_string(),
            (true, 0) => format!("{} costs", self.origin),
            (true, n) => format!(
                "{} costs × this machine's pace from earlier runs ({n} kinds of unit)",
                self.origin
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_data::Domain;

    fn key(kind: UnitKind, probe: Option<Probe>) -> UnitKey {
        UnitKey {
            probe,
            ..UnitKey::new("smollm2-135m-instruct", Domain::CityLocations, kind)
        }
    }

    #[test]
    fn the_reference_table_covers_the_embedded_models() {
        let table = reference();
        for spec in pstat_lm::registry::MODELS {
            let costs = table.models.get(spec.name).expect(spec.name);
            assert!(
                costs.forward_s > 0.0 && costs.prompt_s > 0.0,
                "{}",
                spec.name
            );
            for probe in Probe::REPRESENTATIONAL {
                assert!(costs.fits.contains_key(probe), "{} {probe}", spec.name);
            }
        }
    }

    #[test]
    fn units_cost_their_work_and_a_search_costs_extra_fits() {
        let costs = reference().models[SCALE_FROM].clone();
        let sawmil = key(UnitKind::Probe, Some(Probe::Sawmil));
        let fits = |search| Work::Fits {
            fits: 6,
            bags: 2000,
            search,
        };
        let fixed = costs.seconds(&sawmil, fits(false));
        let FitCost::Per1000Bags(per_1000_bags) = costs.fits[&Probe::Sawmil] else {
            panic!("a sAwMIL fit grows with its bags");
        };
        assert!((fixed - 6.0 * 2.0 * per_1000_bags).abs() < 1e-9);
        assert!(costs.seconds(&sawmil, fits(true)) > fixed);
        let mass_mean = key(UnitKind::Probe, Some(Probe::MassMean));
        assert!(costs.seconds(&mass_mean, fits(true)) < fixed);
        let prompt = key(UnitKind::Prompt, None);
        let at = |k| costs.seconds(&prompt, Work::Prompts { statements: 100, k });
        assert!(at(100) > at(20));
        let doubled = costs.clone().scaled(2.0);
        let forward = key(UnitKind::Activations, None);
        assert!(
            (doubled.seconds(&forward, Work::Statements(10))
                - 2.0 * costs.seconds(&forward, Work::Statements(10)))
            .abs()
                < 1e-9
        );
    }

    /// Seconds of "m:ss" or "h:mm:ss".
    fn clock(text: &str) -> Option<f64> {
        text.trim().split(':').try_fold(0.0, |acc, part| {
            part.parse::<f64>().ok().map(|v| acc * 60.0 + v)
        })
    }

    /// The default study as measured end to end on the reference machine (docs/BENCHMARKS.md,
    /// "The default study, end to end"): its wall time, and each row of its stage table as
    /// (model, stage, seconds over the three domains).
    fn measured_default_study() -> (f64, Vec<(String, String, f64)>) {
        let doc = include_str!("../../../docs/BENCHMARKS.md");
        let section = doc
            .split("### The default study, end to end")
            .nth(1)
            .and_then(|rest| rest.split("\n### ").next())
            .expect("BENCHMARKS.md has the default study's section");
        // "**58 min 03 s wall**"
        let wall = section
            .split("**")
            .find_map(|part| {
                let part = part.strip_suffix(" s wall")?;
                let (min, sec) = part.split_once(" min ")?;
                Some(min.parse::<f64>().ok()? * 60.0 + sec.parse::<f64>().ok()?)
            })
            .expect("the section states the wall time as **M min SS s wall**");
        let mut rows = Vec::new();
        let mut model = String::new();
        for line in section.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let [label, city, medical, word] = cells[..] else {
                continue;
            };
            let Some(seconds) = [city, medical, word]
                .iter()
                .map(|c| clock(c))
                .sum::<Option<f64>>()
            else {
                continue;
            };
            let Some((who, stage)) = label.split_once(": ") else {
                continue;
            };
            if !who.starts_with("**") {
                model = who.to_lowercase();
            }
            let stage = stage.split([' ', '(']).next().unwrap_or_default();
            rows.push((model.clone(), stage.to_string(), seconds));
        }
        (wall, rows)
    }

    /// The plan's estimate of the default study from the reference costs is within 20% of the
    /// study's measured wall time on the reference machine, and each model's stage within 40%
    /// of its measured time (the reference costs are derived from those measurements).
    #[test]
    fn the_default_study_is_estimated_within_a_fifth_of_its_measured_time() {
        let out = tempfile::tempdir().unwrap();
        let study = crate::study::Study::preview(crate::RunConfig::default(), out.path()).unwrap();
        let plan = crate::plan::Plan::build(&study, &CostBook::reference_only());
        let (estimate, unestimated) = plan.remaining();
        assert_eq!(unestimated, 0);
        let (wall, rows) = measured_default_study();
        assert_eq!(rows.len(), 10, "{rows:?}");
        let stage = |kind: UnitKind| match kind {
            UnitKind::LayerSelection | UnitKind::Activations | UnitKind::Probe => {
                "representational"
            }
            UnitKind::Prompt => "behavioral",
            UnitKind::Context => "contextual",
            UnitKind::ObjectTokens => "familiarity",
            UnitKind::Clustering => "retraction",
        };
        let mut report = Vec::new();
        let mut wrong = Vec::new();
        for (model, name, measured) in &rows {
            let planned: f64 = plan
                .units
                .iter()
                .filter(|u| {
                    stage(u.key.kind) == name && u.key.model.to_lowercase().starts_with(&model[..5])
                })
                .filter_map(|u| u.estimate_s)
                .sum();
            report.push(format!(
                "{model} {name}: planned {planned:.0} s, measured {measured:.0} s"
            ));
            // Clustering is seconds either way; its share of the total is what matters.
            if (planned / measured - 1.0).abs() > 0.4 && *measured > 60.0 {
                wrong.push(report.last().unwrap().clone());
            }
        }
        report.push(format!(
            "the default study: planned {estimate:.0} s, measured {wall:.0} s"
        ));
        eprintln!("{}", report.join("\n"));
        assert!(
            (estimate / wall - 1.0).abs() <= 0.2,
            "the plan estimates {estimate:.0} s, the study took {wall:.0} s:\n{}",
            report.join("\n")
        );
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_measured_pace_rescales_the_reference() {
        let mut book = CostBook::reference_only();
        let unit = key(UnitKind::Prompt, None);
        let work = Work::Prompts {
            statements: 100,
            k: 20,
        };
        let before = book.for_model(SCALE_FROM, SCALE_FROM);
        let reference = before.seconds(&unit, work).unwrap();
        assert_eq!(before.source(), "reference machine costs");
        book.paces = BTreeMap::from([(
            SCALE_FROM.to_string(),
            BTreeMap::from([(
                "prompt".to_string(),
                Pace {
                    measured_s: 120.0,
                    reference_s: 40.0,
                },
            )]),
        )]);
        let after = book.for_model(SCALE_FROM, SCALE_FROM);
        let paced = after.seconds(&unit, work).unwrap();
        assert!(
            (paced / reference - 3.0).abs() < 1e-9,
            "{paced} {reference}"
        );
        assert!(
            after.source().contains("1 kinds of unit"),
            "{}",
            after.source()
        );
        // This run's units add to the earlier runs' halved sums: (60 + 30) / (20 + 25).
        book.record(SCALE_FROM, "prompt", 10.0, 5.0);
        book.record(SCALE_FROM, "prompt", 20.0, 20.0);
        book.record(SCALE_FROM, "activations", 30.0, 10.0);
        let merged = book.merged();
        assert_eq!(
            merged[SCALE_FROM]["prompt"],
            Pace {
                measured_s: 90.0,
                reference_s: 45.0
            }
        );
        // Too short a measurement says nothing yet.
        assert_eq!(merged[SCALE_FROM]["activations"].factor(), None);
        let unknown = book.for_model("no-such-model", "no-such-model");
        assert_eq!(unknown.seconds(&unit, work), None);
        assert_eq!(unknown.source(), "no reference");
    }
}
