//! `pstat run`: the whole study in one resumable command (see `pstat_study::execute`).

use clap::Args;
use pstat_data::Domain;
use pstat_study::RunConfig;
use std::path::PathBuf;

#[derive(Args)]
pub struct RunArgs {
    /// Run config (TOML); every field defaults to the paper's protocol on the embedded models.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Models to run (registry names or GGUF paths), overriding the config.
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Domains to run, overriding the config.
    #[arg(long, value_delimiter = ',')]
    domains: Vec<Domain>,
    /// The documented small preset (see README): first model, subsampled statements, K = 20,
    /// veracity layer only.
    #[arg(long)]
    quick: bool,
    /// Output folder; rerunning with the same config continues where a run stopped.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => RunConfig::from_file(path)?,
        None => RunConfig::default(),
    };
    if args.quick {
        config = config.quick();
    }
    if !args.models.is_empty() {
        config.models = args.models.clone();
    }
    if !args.domains.is_empty() {
        config.domains = args.domains.clone();
    }
    pstat_study::execute(config, &args.out, &mut crate::progress::Bars::new())
}
