//! One module per subcommand. Each exposes clap argument types and a `run` function; the
//! arguments several share are here.
pub mod activations;
pub mod cluster;
pub mod data;
pub mod generate;
pub mod hidden;
pub mod merge;
pub mod models;
pub mod prompt;
pub mod report;
pub mod run;
pub mod sawmil;
pub mod score;
pub mod stage;
pub mod tokenize;

use clap::Args;
use pstat_data::DataRoot;
use std::path::PathBuf;

/// Where statements come from: the bundled copy unless `--data DIR` names a folder laid out
/// like the repo's `data/` (trilemma/, fictional/, synthetic_fi/).
#[derive(Args, Clone, Debug, Default)]
pub struct DataArgs {
    /// Data folder (default: the data bundled in this binary).
    #[arg(long, global = true, value_name = "DIR")]
    pub data: Option<PathBuf>,
}

impl DataArgs {
    /// The data folder these arguments name, opened.
    pub fn root(&self) -> anyhow::Result<DataRoot> {
        Ok(DataRoot::open(self.data.as_deref())?)
    }
}
