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
pub mod lock;
pub mod model;
pub mod progress;
pub mod representational;
pub mod stage;
pub mod study;

pub use config::RunConfig;
pub use lock::RunLock;
pub use model::LoadedModel;
pub use progress::{Progress, Silent};
pub use stage::{Cell, Handoff, STAGES, Stage, Tables};
pub use study::Study;

use anyhow::{Context, bail};
use pstat_data::artifact::{write_atomic, write_json_atomic};
use std::path::Path;

/// Runs the stages `config` enables into `out`, then builds the report. Rerunning with the
/// same config continues where a run stopped; another config into the same folder is refused,
/// and so is a second run into a folder while one is running ([`RunLock`]).
pub fn execute(config: RunConfig, out: &Path, progress: &mut dyn Progress) -> anyhow::Result<()> {
    config.validate()?;
    if out.exists() && !out.is_dir() {
        bail!(
            "{}: exists and is not a folder (the run's output folder, --out)",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let _lock = RunLock::acquire(out)?;
    guard_config(out, &config, progress)?;
    progress.note(&plan(&config));

    progress.stage("data and splits");
    let study = Study::open(config, out)?;
    pstat_familiarity::bigram::write_tables(&study.datasets, out)
        .context("writing the bigram tables")?;
    for table in [
        <pstat_tables::BigramRankRow as pstat_tables::Table>::FILE,
        <pstat_tables::BigramDistanceRow as pstat_tables::Table>::FILE,
    ] {
        // Computed over every domain's data, whatever the config's domains.
        let all_data: Vec<&str> = study
            .datasets
            .iter()
            .map(|d| d.data_hash.as_str())
            .collect();
        io::write_manifest(
            &pstat_data::artifact::Manifest::new(
                table,
                &study.config_hash,
                &pstat_data::artifact::sha256_hex(all_data.join("\n").as_bytes()),
                study.config.seed,
            ),
            &out.join(table),
        )?;
    }
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

/// What the run will do, before it starts: every (model, domain) runs the enabled stages.
fn plan(config: &RunConfig) -> String {
    let stages: Vec<&str> = STAGES
        .iter()
        .filter(|s| s.enabled(config))
        .map(|s| s.name())
        .collect();
    format!(
        "plan: {} model(s) × {} domain(s) = {} cells, each running {} ({} stage runs)",
        config.models.len(),
        config.domains.len(),
        config.models.len() * config.domains.len(),
        stages.join(", "),
        config.models.len() * config.domains.len() * stages.len()
    )
}

/// `<out>/manifest.json`: the program and config that own the run folder.
#[derive(serde::Serialize, serde::Deserialize)]
struct RunManifest {
    pstat_version: String,
    git_commit: String,
    git_dirty: Option<bool>,
    threads: usize,
    config_hash: String,
    seed: u64,
}

/// A run folder belongs to one config: continuing it with another would mix results. Checked,
/// with the folder's manifest, before any model loads: a manifest that does not parse or names
/// another config than `config.toml` was damaged; it is named in a warning, moved aside
/// (`manifest.json.corrupt`) and written again.
fn guard_config(out: &Path, config: &RunConfig, progress: &mut dyn Progress) -> anyhow::Result<()> {
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
        let manifest = out.join("manifest.json");
        let problem = match std::fs::read(&manifest) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", manifest.display())),
            Ok(bytes) => match serde_json::from_slice::<RunManifest>(&bytes) {
                Err(e) => Some(format!("unreadable ({e})")),
                Ok(m) if m.config_hash != config.hash() => Some(format!(
                    "names config {} but config.toml hashes to {}",
                    m.config_hash,
                    config.hash()
                )),
                Ok(_) => return Ok(()),
            },
        };
        if let Some(problem) = problem {
            let aside = pstat_data::artifact::move_aside(&manifest)
                .with_context(|| format!("moving {} aside", manifest.display()))?;
            progress.note(&format!(
                "warning: {}: {problem}; moved to {} and written again",
                manifest.display(),
                aside.display()
            ));
        }
    } else {
        write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let build = pstat_data::artifact::build();
    let manifest = out.join("manifest.json");
    write_json_atomic(
        &manifest,
        &RunManifest {
            pstat_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: build.commit,
            git_dirty: build.dirty,
            threads: build.threads,
            config_hash: config.hash(),
            seed: config.seed,
        },
    )
    .with_context(|| format!("writing {}", manifest.display()))
}
