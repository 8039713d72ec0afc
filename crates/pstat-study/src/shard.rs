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

use crate::unit::{UnitKey, UnitKind};
use anyhow::bail;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// Shard `index` of `count` (0-based, as `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)` and
/// `JOB_COMPLETION_INDEX` count): `--shard 0/3`, `1/3`, `2/3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard's number, from 0.
    pub index: u32,
    /// How many shards share the run.
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
        crate::layout::RunLayout::new(out)
            .shards()
            .join(format!("{}-of-{}.json", self.index, self.count))
    }
}

/// What this process computes (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every missing unit, then the tables and the report.
    All,
    /// This shard's missing units only.
    Shard(Shard),
    /// Assemble only.
    Merge {
        /// The N of the shard runs found in the folder, if any, to name the shard of a
        /// missing unit.
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

    /// Whether this process's plan lists `key`: a shard plans its own units and the
    /// prerequisites of its cells (computed by whichever shard needs them first), never the
    /// clustering or the contextual units, which read every probe unit of their cell and so
    /// are computed where the run is assembled.
    pub fn plans(&self, key: &UnitKey) -> bool {
        match key.kind {
            UnitKind::LayerSelection | UnitKind::Activations => true,
            UnitKind::Clustering | UnitKind::Context => self.assembles(),
            UnitKind::Probe | UnitKind::Prompt | UnitKind::ObjectTokens => self.covers(key),
        }
    }

    /// Whether this process builds the tables, the cross-unit analyses and the report.
    pub fn assembles(&self) -> bool {
        !matches!(self, Scope::Shard(_))
    }
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
}
