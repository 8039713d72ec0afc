//! `pstat run`: the whole study in one resumable command (see `pstat_study::execute`).

use crate::output::outln;
use crate::progress::{Bars, Resumable};
use clap::Args;
use pstat_data::Domain;
use pstat_study::progress::{Lines, Verbosity};
use pstat_study::{Plan, Progress, RunConfig, Scope, Shard};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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
    /// `f32` or `q8`, overriding the config's `precision` (another precision is another
    /// study: its config hash differs).
    #[arg(long)]
    precision: Option<pstat_lm::Precision>,
    /// The documented small preset (see README): first model, subsampled statements, K = 20,
    /// veracity layer only.
    #[arg(long)]
    quick: bool,
    /// Output folder; rerunning with the same config continues where a run stopped.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Compute only shard I of N (0-based, e.g. `1/3`): the units whose key hashes to I.
    /// Shards of one config run at once into the same folder (or each into its own);
    /// `pstat merge` then builds the tables and the report (docs/scale-out.md).
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// Status lines every 5 s instead of 30 s when stderr is not a terminal.
    #[arg(short, long, conflicts_with = "quiet")]
    verbose: bool,
    /// Only stage headings and notes on stderr (run.log keeps every line).
    #[arg(short, long)]
    quiet: bool,
    /// Print the plan and the units still to compute (those --out does not hold yet) with
    /// their estimated cost, then stop: no model is loaded and nothing is written.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: one JSON object on stdout instead of text.
    #[arg(long, requires = "dry_run")]
    json: bool,
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
    if let Some(precision) = args.precision {
        config.precision = precision;
    }
    if args.dry_run {
        let plan = pstat_study::dry_run(config, &args.out)?;
        return print_plan(&plan, &args.out, args.json);
    }
    let scope = args.shard.map_or(Scope::All, Scope::Shard);
    let mut progress = reporter(&args.out, args.quiet, args.verbose);
    pstat_study::execute_scoped(config, &args.out, scope, progress.as_mut())
}

/// Bars on a terminal, else plain lines; both keep `<out>/run.log`, and where the run stands
/// for the line an interrupted run prints.
pub fn reporter(out: &Path, quiet: bool, verbose: bool) -> Box<dyn Progress> {
    Box::new(Resumable::new(out, shown(out, quiet, verbose)))
}

fn shown(out: &Path, quiet: bool, verbose: bool) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Box::new(Bars::logging(out))
    } else {
        let verbosity = match (quiet, verbose) {
            (true, _) => Verbosity::Quiet,
            (_, true) => Verbosity::Verbose,
            _ => Verbosity::Normal,
        };
        Box::new(Lines::stderr(out, verbosity))
    }
}

/// The dry run's answer: the plan's lines, then one line per unit to compute (or JSON).
fn print_plan(plan: &Plan, out: &Path, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(&plan.to_json(out))?)?;
        return Ok(());
    }
    for line in plan.summary().into_iter().chain(plan.pending_lines()) {
        outln!("{line}")?;
    }
    Ok(())
}
