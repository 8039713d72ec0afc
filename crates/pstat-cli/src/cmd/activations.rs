//! `pstat activations export`: the activation folder of a run config (docs/activations.md), to
//! copy to another run or to fill on another machine (tools/extract/hf_extract.py) and read
//! back with `representational.activations`.

use crate::output::outln;
use clap::{Args, Subcommand};
use pstat_study::RunConfig;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ActivationsCommand {
    /// Write, for every model and domain of the config, the statements the run reads with
    /// their token ids, export.json and the layer files (from the cache, or extracted).
    Export(ExportArgs),
}

#[derive(Args)]
pub struct ExportArgs {
    /// The run config whose activations are exported.
    #[arg(long)]
    config: PathBuf,
    /// The activation folder: `<model>/<domain>/layer_LL.safetensors`, statements.jsonl,
    /// export.json.
    #[arg(long)]
    out: PathBuf,
    /// Only statements.jsonl and export.json (for an extractor elsewhere); runs no model.
    #[arg(long)]
    statements_only: bool,
}

pub fn run(command: ActivationsCommand) -> anyhow::Result<()> {
    match command {
        ActivationsCommand::Export(args) => {
            let config = RunConfig::from_file(&args.config)?;
            let mut progress = super::run::reporter(&args.out, false, false);
            for cell in pstat_study::activations::export(
                config,
                &args.out,
                args.statements_only,
                progress.as_mut(),
            )? {
                outln!("{}", cell.display())?;
            }
            Ok(())
        }
    }
}
