//! The P-StaT study as a library. [`execute`] runs the stages a [`RunConfig`] enables —
//! representational, behavioral, familiarity, clustering, in that order — for every (model,
//! domain) of the config, into one output folder. Every unit of work writes its result
//! atomically and is skipped when a rerun finds it, so an interrupted run loses at most the
//! unit in flight; what one stage hands the next (the veracity layer, its activations, the
//! retractions) passes in memory, and a resumed run reads it back through the same typed code.

pub mod behavioral;
pub mod clustering;
pub mod comparisons;
pub mod config;
pub mod familiarity;
mod io;
pub mod model;
pub mod progress;
pub mod representational;
pub mod stage;
pub mod study;

pub use config::RunConfig;
pub use model::LoadedModel;
pub use progress::{Progress, Silent};
pub use stage::{Cell, Handoff, STAGES, Stage, Tables};
pub use study::Study;

use anyhow::{Context, bail};
use pstat_data::artifact::{write_atomic, write_json_atomic};
use std::path::Path;

/// Runs the stages `config` enables into `out`, then builds the report. Rerunning with the
/// same config continues where a run stopped; another config into the same folder is refused.
pub fn execute(config: RunConfig, out: &Path, progress: &mut dyn Progress) -> anyhow::Result<()> {
    config.validate()?;
    guard_config(out, &config)?;

    progress.stage("data and splits");
    let study = Study::open(config, out)?;
    pstat_familiarity::bigram::write_tables(&study.datasets, out)
        .context("writing the bigram tables")?;
    let mut tables = Tables::default();
    for name in &study.config.models {
        progress.stage(&format!("model {name}"));
        let model = LoadedModel::load(name).with_context(|| format!("loading model `{name}`"))?;
        for &domain in &study.config.domains {
            let cell = Cell {
                study: &study,
                model: &model,
                domain,
            };
            let mut handoff = Handoff::default();
            for stage in STAGES {
                if stage.enabled(&study.config) {
                    progress.stage(&format!("{} {domain}: {}", model.name, stage.name()));
                    stage.run(&cell, &mut handoff, &mut tables, progress)?;
                }
            }
        }
        // After each model, so an interrupted run still has the tables of finished models.
        tables.write(&study, progress)?;
    }
    progress.stage("report");
    let report = pstat_report::build_report(out)?;
    for note in &report.notes {
        progress.note(&format!("note: {note}"));
    }
    progress.note(&format!("report: {}", out.join("report.html").display()));
    Ok(())
}

/// A run folder belongs to one config: continuing it with another would mix results.
fn guard_config(out: &Path, config: &RunConfig) -> anyhow::Result<()> {
    let path = out.join("config.toml");
    let text = toml::to_string(config)?;
    if path.exists() {
        let previous = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if previous != text {
            bail!(
                "{} holds a run with another config ({}); choose another --out or delete the folder",
                out.display(),
                path.display()
            );
        }
        return Ok(());
    }
    write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    write_json_atomic(
        &out.join("manifest.json"),
        &serde_json::json!({
            "pstat_version": env!("CARGO_PKG_VERSION"),
            "config_hash": config.hash(),
            "seed": config.seed,
        }),
    )?;
    Ok(())
}
