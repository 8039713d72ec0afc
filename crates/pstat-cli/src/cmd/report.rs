//! `pstat report --run DIR`: rebuild the figures and report.html of a run folder from its
//! files alone (no model needed), e.g. after editing themes.csv or copying a run elsewhere.

use crate::output::outln;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ReportArgs {
    /// Run output folder holding stability.csv (and optionally familiarity.csv, layers.json,
    /// clusters/, themes.csv, answers.csv, manifest.json, ...). Figures go to DIR/figures/,
    /// the page to DIR/report.html.
    #[arg(long, value_name = "DIR")]
    run: PathBuf,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let report = pstat_report::build_report(&args.run)
        .with_context(|| format!("building the report of {}", args.run.display()))?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    outln!(
        "{} ({} figure files under {})",
        report.html.display(),
        report.figures.len(),
        args.run.join("figures").display()
    )?;
    Ok(())
}
