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
pub mod costs;
pub mod familiarity;
mod io;
pub mod lock;
pub mod model;
pub mod plan;
pub mod progress;
pub mod representational;
pub mod stage;
pub mod study;
pub mod tracker;

pub use config::RunConfig;
pub use lock::RunLock;
pub use model::LoadedModel;
pub use plan::{Plan, PlannedUnit, UnitKey, UnitKind};
pub use progress::{Progress, Silent};
pub use stage::{Cell, Handoff, STAGES, Stage, Tables};
pub use study::Study;
pub use tracker::{RunStatus, Tracker};

use anyhow::{Context, bail};
use costs::CostBook;
use pstat_data::artifact::{write_atomic, write_json_atomic};
use std::path::Path;

/// Runs the stages `config` enables into `out`, then builds the report. Rerunning with the
/// same config continues where a run stopped; another config into the same folder is refused,
/// and so is a second run into a folder while one is running ([`RunLock`]).
pub fn execute(config: RunConfig, out: &Path, progress: &mut dyn Progress) -> anyhow::Result<()> {
    config.validate()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let _lock = RunLock::acquire(out)?;
    guard_config(out, &config)?;

    progress.stage("data and splits");
    let study = Study::open(config, out)?;
    pstat_familiarity::bigram::write_tables(&study.datasets, out)
        .context("writing the bigram tables")?;
    let costs = CostBook::load();
    let plan = Plan::build(&study, &costs);
    for line in plan.summary() {
        progress.note(&line);
    }
    let mut tracker = Tracker::new(plan, costs, progress);
    let mut tables = Tables::default();
    for name in &study.config.models {
        tracker.stage(&format!("model {name}"));
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
                    tracker.stage(&format!("{} {domain}: {}", model.name, stage.name()));
                    stage.run(&cell, &mut handoff, &mut tables, &mut tracker)?;
                    tracker.finish_stage(&model.name, domain, stage.name());
                }
            }
        }
        // After each model, so an interrupted run still has the tables of finished models.
        tables.write(&study, &mut tracker)?;
    }
    progress.stage("report");
    let report = pstat_report::build_report(out)?;
    for note in &report.notes {
        progress.note(&format!("note: {note}"));
    }
    progress.note(&format!("report: {}", out.join("report.html").display()));
    Ok(())
}

/// The plan of a run of `config` into `out`, with what `out` already holds: read only, no
/// model loaded, nothing written (`pstat run --dry-run`).
pub fn dry_run(config: RunConfig, out: &Path) -> anyhow::Result<Plan> {
    config.validate()?;
    check_config(out, &config)?;
    plan::preview(config, out)
}

/// A run folder belongs to one config: continuing it with another would mix results.
fn guard_config(out: &Path, config: &RunConfig) -> anyhow::Result<()> {
    if check_config(out, config)? {
        return Ok(());
    }
    let path = out.join("config.toml");
    let text = toml::to_string(config)?;
    write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    let build = pstat_data::artifact::build();
    write_json_atomic(
        &out.join("manifest.json"),
        &serde_json::json!({
            "pstat_version": env!("CARGO_PKG_VERSION"),
            "git_commit": build.commit,
            "git_dirty": build.dirty,
            "threads": build.threads,
            "config_hash": config.hash(),
            "seed": config.seed,
        }),
    )?;
    Ok(())
}

/// Whether `out` holds a run of `config` (false: no run yet); an error when it holds another.
fn check_config(out: &Path, config: &RunConfig) -> anyhow::Result<bool> {
    let path = out.join("config.toml");
    if !path.exists() {
        return Ok(false);
    }
    let previous =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    if previous != toml::to_string(config)? {
        bail!(
            "{} holds a run with another config ({}); choose another --out or delete the folder",
            out.display(),
            path.display()
        );
    }
    Ok(true)
}
