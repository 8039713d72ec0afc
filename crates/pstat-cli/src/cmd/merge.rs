//! `pstat merge`: the tables and the report of a run whose units shards computed (see
//! `pstat_study::merge`).

use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct MergeArgs {
    /// The run folder the shards wrote into; more folders (shards run with their own --out
    /// and the same config) are copied into the first before it is assembled.
    #[arg(required = true, value_name = "OUT")]
    outs: Vec<PathBuf>,
    /// Status lines every 5 s instead of 30 s when stderr is not a terminal.
    #[arg(short, long, conflicts_with = "quiet")]
    verbose: bool,
    /// Only stage headings and notes on stderr (run.log keeps every line).
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let mut progress = super::run::reporter(&args.outs[0], args.quiet, args.verbose);
    pstat_study::merge(&args.outs, progress.as_mut())
}
