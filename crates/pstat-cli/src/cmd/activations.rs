//! `pstat activations export` and `import --from vllm`: the activation folder of a run config (docs/activations.md), to
//! copy to another run or to fill on another machine (tools/extract/hf_extract.py) and read
//! back with `representational.activations` and `contextual.activations`.

use crate::output::outln;
use clap::{Args, Subcommand};
use pstat_study::RunConfig;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ActivationsCommand {
    /// Write, for every model and domain of the config, the statements the run reads with
    /// their token ids, export.json and the layer files (from the cache, or extracted).
    Export(ExportArgs),
    /// Group the per-request hidden-state files of an extractor elsewhere (vLLM's
    /// extract_hidden_states) into a cell's per-layer files, checking every token id.
    Import(ImportArgs),
}

#[derive(Args)]
pub struct ImportArgs {
    /// The extractor that wrote the files.
    #[arg(long = "from", value_parser = ["vllm"])]
    from: String,
    /// The folder of its files (vLLM's `shared_storage_path`: one safetensors per request).
    files: PathBuf,
    /// The cell to fill: `<dir>/<model>/<domain>` of `export --statements-only`.
    #[arg(long)]
    cell: PathBuf,
    /// The layer ids given to vLLM (`eagle_aux_hidden_state_layer_ids`), in that order.
    #[arg(long, value_delimiter = ',', required = true)]
    layers: Vec<usize>,
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
            for cell in pstat_study::export::activations(
                config,
                &args.out,
                args.statements_only,
                progress.as_mut(),
            )? {
                outln!("{}", cell.display())?;
            }
            Ok(())
        }
        ActivationsCommand::Import(args) => {
            debug_assert_eq!(args.from, "vllm");
            for file in pstat_study::vllm::import(&args.files, &args.cell, &args.layers)? {
                outln!("{}", file.display())?;
            }
            Ok(())
        }
    }
}
