//! The paths of a run folder, in one place: where each cell, stage and record lives. A stage's
//! files inside its own folder (a probe unit's `layer_LL/`, a behavioral unit's files) are the
//! stage's own business; where the folders are is this module's.

use pstat_data::Domain;
use std::path::{Path, PathBuf};

/// The layout of the run folder `out`.
#[derive(Debug, Clone, Copy)]
pub struct RunLayout<'a> {
    out: &'a Path,
}

impl<'a> RunLayout<'a> {
    /// The layout of the run folder `out`.
    pub fn new(out: &'a Path) -> Self {
        RunLayout { out }
    }

    /// `<out>/<model>/<domain>`: one cell's units.
    pub fn cell(&self, model: &str, domain: Domain) -> PathBuf {
        self.out.join(model).join(domain.as_str())
    }

    /// `<out>/<model>/<domain>/<stage>`: where a stage keeps a cell's units.
    pub fn stage(&self, model: &str, domain: Domain, stage: &str) -> PathBuf {
        self.cell(model, domain).join(stage)
    }

    /// `<out>/<model>/<domain>/familiarity.json`: a cell's familiarity rows.
    pub fn familiarity(&self, model: &str, domain: Domain) -> PathBuf {
        self.cell(model, domain).join("familiarity.json")
    }

    /// `<out>/clusters/<model>/<domain>`: where a cell's clustering is stored.
    pub fn clusters(&self, model: &str, domain: Domain) -> PathBuf {
        self.out.join("clusters").join(model).join(domain.as_str())
    }

    /// `<out>/<file>`: a table or record at the top of the run folder.
    pub fn top(&self, file: &str) -> PathBuf {
        self.out.join(file)
    }

    /// `<out>/shards`: the shards' records of finished work.
    pub fn shards(&self) -> PathBuf {
        self.out.join("shards")
    }
}
