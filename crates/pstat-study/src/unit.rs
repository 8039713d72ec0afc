//! The units of work of a run. Every unit has a [`UnitKey`], the same in every run of a
//! config: the plan lists units by it ([`crate::plan`]), the tracker counts them down, the
//! cost book estimates them ([`crate::costs`]), and its xxh3 hash picks the one shard that
//! computes it ([`crate::shard`]). The key names a layer by its offset from the veracity layer:
//! the layer itself is chosen by the run, and a shard must know its units before anything is
//! computed.

use pstat_data::Domain;
use pstat_prompt::StudySpec;
use pstat_tables::{Baseline, Probe, PromptFormat};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a unit computes; each kind belongs to one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// Last-token states of the selection statements at every candidate layer.
    LayerSelection,
    /// All-token activations of the probed statements at the probed layers.
    Activations,
    /// One probe retrained under every Θ at one layer.
    Probe,
    /// The held-out True statements judged under one Θ's belief context (one draw).
    Prompt,
    /// The held-out True statements' hidden states after one Θ's belief context, judged by
    /// the baseline probes.
    Context,
    /// Object-token probabilities of the familiarity sample.
    ObjectTokens,
    /// The clustering of one cell's retracted statements.
    Clustering,
}

impl UnitKind {
    /// Its spelling in unit ids and `--dry-run --json`.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::LayerSelection => "layer_selection",
            UnitKind::Activations => "activations",
            UnitKind::Probe => "probe",
            UnitKind::Prompt => "prompt",
            UnitKind::Context => "context",
            UnitKind::ObjectTokens => "object_tokens",
            UnitKind::Clustering => "clustering",
        }
    }

    /// The stage ([`crate::Stage::name`]) that computes it.
    pub fn stage(self) -> &'static str {
        match self {
            UnitKind::LayerSelection | UnitKind::Activations | UnitKind::Probe => {
                "representational"
            }
            UnitKind::Prompt => "behavioral",
            UnitKind::Context => "contextual",
            UnitKind::ObjectTokens => "familiarity",
            UnitKind::Clustering => "retraction clustering",
        }
    }

    /// Whether every unit of a cell needs it first (the veracity layer and the activations):
    /// whichever shard needs it computes it, so it picks no shard of its own.
    pub fn is_prerequisite(self) -> bool {
        matches!(self, UnitKind::LayerSelection | UnitKind::Activations)
    }
}

/// Identifies a unit of a run, the same in every run of a config. Fields that do not apply to
/// the kind are `None`. A key whose set fields all agree with a unit's [`UnitKey::covers`] it:
/// the behavioral stage announces a whole (format, baseline) study that way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitKey {
    /// The model's name in the run folder.
    pub model: String,
    /// The domain.
    pub domain: Domain,
    /// What the unit computes.
    pub kind: UnitKind,
    /// The probe of a probe unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// Offset from the veracity layer (known before the layer is chosen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_offset: Option<i64>,
    /// The prompt format of a behavioral unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<PromptFormat>,
    /// Context size; `None` for the empty-context baseline, which every K shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// The baseline of a behavioral baseline unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Θ: the condition's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// `main`, a resample number, or `shuffle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<String>,
}

impl UnitKey {
    /// The key of `kind` for (model, domain), with no other field set.
    pub fn new(model: &str, domain: Domain, kind: UnitKind) -> Self {
        UnitKey {
            model: model.to_string(),
            domain,
            kind,
            probe: None,
            layer_offset: None,
            format: None,
            k: None,
            baseline: None,
            condition: None,
            draw: None,
        }
    }

    /// Whether every field set in `self` has the same value in `unit`.
    pub fn covers(&self, unit: &UnitKey) -> bool {
        fn agree<T: PartialEq>(pattern: &Option<T>, value: &Option<T>) -> bool {
            pattern.is_none() || pattern == value
        }
        self.model == unit.model
            && self.domain == unit.domain
            && self.kind == unit.kind
            && agree(&self.probe, &unit.probe)
            && agree(&self.layer_offset, &unit.layer_offset)
            && agree(&self.format, &unit.format)
            && agree(&self.k, &unit.k)
            && agree(&self.baseline, &unit.baseline)
            && agree(&self.condition, &unit.condition)
            && agree(&self.draw, &unit.draw)
    }

    /// The canonical text the shard is hashed from: the stage, then every field in a fixed
    /// order, `-` when absent. Changing it reassigns units, so it is part of the on-disk
    /// contract.
    pub fn canonical(&self) -> String {
        fn field<T: ToString>(v: &Option<T>) -> String {
            v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
        }
        format!(
            "model={};domain={};stage={};probe={};layer_offset={};condition={};k={};baseline={};format={};draw={}",
            self.model,
            self.domain,
            self.kind.stage(),
            field(&self.probe),
            field(&self.layer_offset),
            field(&self.condition),
            field(&self.k),
            field(&self.baseline),
            field(&self.format),
            field(&self.draw),
        )
    }

    /// The shard of `count` that computes this unit (xxh3-64 of [`Self::canonical`]).
    pub fn shard_of(&self, count: u32) -> u32 {
        (xxhash_rust::xxh3::xxh3_64(self.canonical().as_bytes()) % u64::from(count)) as u32
    }

    /// A probe unit: every Θ of `probe` at the veracity layer + `offset` (one unit, since
    /// sAwMIL's C is chosen once on Θ0 and held for every Θ).
    pub fn probe(model: &str, domain: Domain, probe: Probe, offset: i64) -> Self {
        UnitKey {
            probe: Some(probe),
            layer_offset: Some(offset),
            ..UnitKey::new(model, domain, UnitKind::Probe)
        }
    }

    /// A behavioral unit of `spec`: one Θ under one draw. The empty baseline serves every K
    /// and a perturbation's unit every baseline, so those fields are left out where the unit
    /// file is shared.
    pub fn prompt(
        spec: &StudySpec,
        condition: &pstat_data::Condition,
        draw: pstat_prompt::Draw,
    ) -> Self {
        UnitKey {
            condition: Some(condition.name.clone()),
            k: spec.unit_k(condition),
            baseline: condition.is_baseline().then_some(spec.context.baseline),
            format: Some(spec.format),
            draw: Some(draw.name()),
            ..UnitKey::new(&spec.model, spec.domain, UnitKind::Prompt)
        }
    }
}

impl UnitKey {
    /// A contextual unit: the held-out statements after `condition`'s main-draw context at
    /// `k` (`None`: the empty baseline, which every K shares); `baseline` only on a baseline
    /// unit, as for a behavioral one.
    pub fn context(
        model: &str,
        domain: Domain,
        condition: &pstat_data::Condition,
        k: Option<usize>,
        baseline: Baseline,
    ) -> Self {
        UnitKey {
            condition: Some(condition.name.clone()),
            k,
            baseline: condition.is_baseline().then_some(baseline),
            draw: Some(pstat_prompt::Draw::Main.name()),
            ..UnitKey::new(model, domain, UnitKind::Context)
        }
    }
}

/// `model/domain/kind[/probe][/l±n][/format][/kK][/baseline_B][/Θ][/draw]`: one line, stable.
impl fmt::Display for UnitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.model, self.domain, self.kind.as_str())?;
        if let Some(p) = self.probe {
            write!(f, "/{p}")?;
        }
        if let Some(o) = self.layer_offset {
            write!(f, "/l{o:+}")?;
        }
        if let Some(p) = self.format {
            write!(f, "/{p}")?;
        }
        if let Some(k) = self.k {
            write!(f, "/k{k}")?;
        }
        if let Some(b) = self.baseline {
            write!(f, "/baseline_{b}")?;
        }
        if let Some(c) = &self.condition {
            write!(f, "/{c}")?;
        }
        if let Some(d) = &self.draw {
            write!(f, "/{d}")?;
        }
        Ok(())
    }
}

/// A unit of a run's plan: its key, its size, its estimated cost and whether the out folder
/// already holds it. Each stage describes its own ([`crate::Stage::units`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedUnit {
    /// Which unit.
    pub key: UnitKey,
    /// The probe unit's layer, when the veracity layer is known (fixed in the config or
    /// already chosen in the out folder).
    pub layer: Option<usize>,
    /// How much work it is.
    pub work: Work,
    /// Seconds expected on this machine ([`crate::costs`]).
    pub estimate_s: Option<f64>,
    /// Seconds the reference table predicts, before this machine's pace.
    pub reference_s: Option<f64>,
    /// The out folder already holds its result.
    pub done: bool,
}

impl PlannedUnit {
    /// A unit of `work`, without a layer or an estimate yet.
    pub fn new(key: UnitKey, work: Work, done: bool) -> Self {
        PlannedUnit {
            key,
            layer: None,
            work,
            estimate_s: None,
            reference_s: None,
            done,
        }
    }
}

/// How much work a unit is, in the measure its cost is estimated from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Statements fed through the model.
    Statements(usize),
    /// Held-out statements judged after a context of `k` statements.
    Prompts {
        /// Held-out statements judged.
        statements: usize,
        /// The context size.
        k: usize,
    },
    /// Probe fits (one per Θ) on `bags` training bags; `search`: sAwMIL's C is chosen by CV.
    Fits {
        /// Fits, one per Θ.
        fits: usize,
        /// Training bags.
        bags: usize,
        /// Whether sAwMIL's C is searched first.
        search: bool,
    },
    /// One clustering grid.
    Grid,
}

impl Work {
    /// The items a unit's progress counts: statements, or Θs for a probe unit.
    pub fn items(self) -> usize {
        match self {
            Work::Statements(n) | Work::Prompts { statements: n, .. } => n,
            Work::Fits { fits, .. } => fits,
            Work::Grid => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: UnitKind) -> UnitKey {
        UnitKey::new("m", Domain::CityLocations, kind)
    }

    #[test]
    fn keys_print_stably_and_cover_their_groups() {
        let unit = UnitKey {
            format: Some(PromptFormat::Plain),
            k: Some(20),
            baseline: Some(Baseline::Empty),
            condition: Some("synthetic_tf".into()),
            draw: Some("main".into()),
            ..key(UnitKind::Prompt)
        };
        assert_eq!(
            unit.to_string(),
            "m/city_locations/prompt/plain/k20/baseline_empty/synthetic_tf/main"
        );
        let probe = UnitKey {
            probe: Some(Probe::Sawmil),
            layer_offset: Some(-2),
            ..key(UnitKind::Probe)
        };
        assert_eq!(probe.to_string(), "m/city_locations/probe/sawmil/l-2");
        let group = UnitKey {
            format: Some(PromptFormat::Plain),
            baseline: Some(Baseline::Empty),
            ..key(UnitKind::Prompt)
        };
        assert!(group.covers(&unit) && unit.covers(&unit) && !unit.covers(&group));
        let chat = UnitKey {
            format: Some(PromptFormat::Chat),
            ..group.clone()
        };
        assert!(!chat.covers(&unit) && !group.covers(&probe));
        let json = serde_json::to_string(&probe).unwrap();
        assert_eq!(
            json,
            r#"{"model":"m","domain":"city_locations","kind":"probe","probe":"sawmil","layer_offset":-2}"#
        );
        assert_eq!(serde_json::from_str::<UnitKey>(&json).unwrap(), probe);
    }

    #[test]
    fn the_hash_of_a_key_is_stable_across_builds() {
        let key = UnitKey::probe(
            "smollm2-135m-instruct",
            Domain::CityLocations,
            Probe::Sawmil,
            -1,
        );
        assert_eq!(
            key.canonical(),
            "model=smollm2-135m-instruct;domain=city_locations;stage=representational;probe=sawmil;layer_offset=-1;condition=-;k=-;baseline=-;format=-;draw=-"
        );
        // xxh3-64 is specified, not Rust's per-release DefaultHasher: this value never changes.
        assert_eq!(
            xxhash_rust::xxh3::xxh3_64(key.canonical().as_bytes()),
            12_427_039_623_961_623_811
        );
        assert_eq!(key.shard_of(3), (12_427_039_623_961_623_811u64 % 3) as u32);
    }
}
