//! Spreading one run over N processes (Slurm array tasks, Kubernetes Indexed Job pods) that
//! write into the same run folder. Every unit of work has a [`UnitKey`] whose xxh3 hash picks
//! the one shard that computes it; a [`Scope`] says what this process computes:
//! - [`Scope::All`]: every missing unit, then the tables and the report (a plain `pstat run`);
//! - [`Scope::Shard`]: only its own missing units, no tables and no report;
//! - [`Scope::Merge`]: no unit at all (a missing one is an error naming its shard), then the
//!   tables and the report.
//!
//! What every unit of a (model, domain) needs first — the veracity layer, the activations and
//! the behavioral prompt format — is computed by whichever shard needs it first, under a file
//! lock, and read by the others (see docs/scale-out.md).

use crate::config::{Formats, RunConfig};
use anyhow::{Context, bail};
use pstat_data::{ConditionSet, Domain};
use pstat_prompt::{Baseline, ContextSpec, PromptFormat, StudySpec};
use pstat_tables::Probe;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// Shard `index` of `count` (0-based, as `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)` and
/// `JOB_COMPLETION_INDEX` count): `--shard 0/3`, `1/3`, `2/3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl FromStr for Shard {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        let parse = || -> Option<Shard> {
            let (i, n) = text.split_once('/')?;
            Some(Shard {
                index: i.trim().parse().ok()?,
                count: n.trim().parse().ok()?,
            })
        };
        match parse() {
            Some(shard) if shard.count > 0 && shard.index < shard.count => Ok(shard),
            _ => bail!("shard `{text}`: expected I/N with 0 <= I < N, e.g. 0/3"),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether `key` is this shard's.
    pub fn owns(&self, key: &UnitKey) -> bool {
        key.shard_of(self.count) == self.index
    }

    /// `shards/<I>-of-<N>.json`: written when the shard has computed all its units.
    pub fn done_file(&self, out: &Path) -> std::path::PathBuf {
        out.join("shards")
            .join(format!("{}-of-{}.json", self.index, self.count))
    }
}

/// The identity of one unit of work: a probe at one layer (every Θ of it, since sAwMIL's C is
/// chosen once on Θ0 and held for every Θ), one behavioral prompt unit (Θ × draw), or one
/// familiarity sample. The layer is the offset from the veracity layer: the layer itself is
/// chosen by the run, and a shard must know its units before anything is computed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitKey {
    pub model: String,
    pub domain: String,
    pub stage: &'static str,
    pub probe: Option<Probe>,
    pub layer_offset: Option<i64>,
    pub condition: Option<String>,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    /// `main`, a resample number or `shuffle`.
    pub draw: Option<String>,
}

impl UnitKey {
    /// The canonical text the shard is hashed from: every field, in a fixed order, `-` when
    /// absent. Changing it reassigns units, so it is part of the on-disk contract.
    pub fn canonical(&self) -> String {
        fn field<T: ToString>(v: &Option<T>) -> String {
            v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
        }
        format!(
            "model={};domain={};stage={};probe={};layer_offset={};condition={};k={};baseline={};format={};draw={}",
            self.model,
            self.domain,
            self.stage,
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

    /// A probe unit: every Θ of `probe` at the veracity layer + `offset`.
    pub fn probe(model: &str, domain: Domain, probe: Probe, offset: i64) -> Self {
        UnitKey {
            model: model.to_string(),
            domain: domain.to_string(),
            stage: "representational",
            probe: Some(probe),
            layer_offset: Some(offset),
            ..UnitKey::default()
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
            model: spec.model.clone(),
            domain: spec.domain.to_string(),
            stage: "behavioral",
            condition: Some(condition.name.clone()),
            k: spec.unit_k(condition),
            baseline: condition.is_baseline().then_some(spec.context.baseline),
            format: Some(spec.format),
            draw: Some(draw.name()),
            ..UnitKey::default()
        }
    }

    /// The object-token familiarity sample of a (model, domain).
    pub fn familiarity(model: &str, domain: Domain) -> Self {
        UnitKey {
            model: model.to_string(),
            domain: domain.to_string(),
            stage: "familiarity",
            ..UnitKey::default()
        }
    }
}

/// What this process computes (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    Shard(Shard),
    /// Assemble only; `shards` is the N of the shard runs found in the folder, if any, to
    /// name the shard of a missing unit.
    Merge {
        shards: Option<u32>,
    },
}

impl Scope {
    /// Whether this process computes `key`, whose unit is not on disk yet. In a merge a
    /// missing unit is an error.
    pub fn computes(&self, key: &UnitKey) -> anyhow::Result<bool> {
        match self {
            Scope::All => Ok(true),
            Scope::Shard(shard) => Ok(shard.owns(key)),
            Scope::Merge { shards } => {
                let owner = shards.map_or_else(String::new, |n| {
                    format!(" (shard {}/{n}: rerun it)", key.shard_of(n))
                });
                bail!(
                    "unit {} is missing{owner}; `pstat run` without --shard computes what is missing",
                    key.canonical()
                )
            }
        }
    }

    /// Whether this process computes a missing unit that `key`'s unit needs first (the chat
    /// baseline that decides a cell's prompt format): every shard that needs it, under a
    /// lock; a merge only reads it.
    pub fn computes_prerequisite(&self, key: &UnitKey) -> anyhow::Result<bool> {
        match self {
            Scope::Merge { .. } => self.computes(key),
            _ => Ok(true),
        }
    }

    /// Whether `key` is this process's to compute or read (a shard skips the others').
    pub fn covers(&self, key: &UnitKey) -> bool {
        match self {
            Scope::Shard(shard) => shard.owns(key),
            _ => true,
        }
    }

    /// Whether this process builds the tables, the cross-unit analyses and the report.
    pub fn assembles(&self) -> bool {
        !matches!(self, Scope::Shard(_))
    }
}

/// Every unit a (model, domain) of `config` can have, before anything is known about the
/// model: behavioral units of both formats where `auto` or the model may choose either.
pub fn possible_units(
    config: &RunConfig,
    conditions: &ConditionSet,
    model: &str,
    domain: Domain,
) -> anyhow::Result<Vec<UnitKey>> {
    let mut keys = Vec::new();
    let rep = &config.representational;
    if rep.enabled {
        for &probe in &rep.probes {
            for &offset in rep.offsets(probe) {
                keys.push(UnitKey::probe(model, domain, probe, offset));
            }
        }
    }
    let cfg = &config.behavioral;
    if cfg.enabled {
        let mut formats = vec![PromptFormat::Plain];
        if matches!(&cfg.formats, Formats::Auto)
            || matches!(&cfg.formats, Formats::Listed(l) if l.contains(&PromptFormat::Chat))
        {
            formats.push(PromptFormat::Chat);
        }
        for format in formats {
            for &k in &cfg.k {
                for &baseline in &cfg.baselines {
                    let spec = StudySpec {
                        model: model.to_string(),
                        domain,
                        format,
                        context: ContextSpec {
                            k,
                            baseline,
                            seed: 0,
                            allow_fewer: cfg.allow_fewer,
                        },
                        resamples: cfg.resamples,
                        shuffle_control: cfg.shuffle_control,
                        dir: Default::default(),
                    };
                    for (condition, draw) in spec.units(conditions).context("behavioral units")? {
                        let key = UnitKey::prompt(&spec, condition, draw);
                        // Units shared by several (K, baseline) specs are listed once.
                        if !keys.contains(&key) {
                            keys.push(key);
                        }
                    }
                }
            }
        }
    }
    if config.familiarity.enabled {
        keys.push(UnitKey::familiarity(model, domain));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_refuse_bad_text() {
        assert_eq!(
            "2/3".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 3 }
        );
        for bad in ["3/3", "0/0", "1", "a/3", "-1/3", "1/3/4"] {
            let err = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(err.contains("expected I/N"), "{bad}: {err}");
        }
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

    #[test]
    fn every_unit_has_exactly_one_shard_and_the_shards_share_the_work() {
        let config = RunConfig::default();
        let conditions = config.conditions().unwrap();
        let keys = possible_units(&config, &conditions, "m", Domain::CityLocations).unwrap();
        let texts: std::collections::BTreeSet<String> =
            keys.iter().map(|k| k.canonical()).collect();
        assert_eq!(texts.len(), keys.len(), "keys are distinct");
        // 10 probe units, 1 empty baseline + 1 True baseline + 5 perturbations per format, 1
        // familiarity sample.
        assert_eq!(keys.len(), 10 + 2 * 7 + 1);
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        let mut per_shard = [0usize; 3];
        for key in &keys {
            let owners: Vec<&Shard> = shards.iter().filter(|s| s.owns(key)).collect();
            assert_eq!(owners.len(), 1, "{}", key.canonical());
            per_shard[owners[0].index as usize] += 1;
        }
        assert!(per_shard.iter().all(|n| *n > 0), "{per_shard:?}");
    }
}
