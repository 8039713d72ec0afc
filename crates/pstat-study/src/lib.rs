//! The P-StaT study as a library. [`execute`] runs the stages a [`RunConfig`] enables —
//! representational, behavioral, familiarity, clustering, in that order — for every (model,
//! domain) of the config, into one output folder. Every unit of work writes its result
//! atomically and is skipped when a rerun finds it, so an interrupted run loses at most the
//! unit in flight; what one stage hands the next (the veracity layer, its activations, the
//! retractions) passes in memory, and a resumed run reads it back through the same typed code.
//! [`execute_scoped`] runs one shard of a run, and [`merge`] assembles what shards computed.

pub mod activations;
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
pub mod shard;
pub mod stage;
pub mod study;
pub mod tracker;
pub mod unit;

pub use config::RunConfig;
pub use lock::RunLock;
pub use model::LoadedModel;
pub use plan::{Plan, PlannedUnit};
pub use progress::{Progress, RunStatus, Silent};
pub use shard::{Scope, Shard};
pub use stage::{Cell, Handoff, Stage, Tables};
pub use study::Study;
pub use tracker::Tracker;
pub use unit::{UnitKey, UnitKind, Work};

use anyhow::{Context, bail};
use costs::CostBook;
use pstat_data::Domain;
use pstat_data::artifact::{write_atomic, write_json_atomic};
use std::path::{Path, PathBuf};

/// The stages in the order a run executes them.
pub const STAGES: [&dyn Stage; 4] = [
    &representational::Representational,
    &behavioral::Behavioral,
    &familiarity::Familiarity,
    &clustering::Clustering,
];

/// Runs the stages `config` enables into `out`, then builds the report. Rerunning with the
/// same config continues where a run stopped; another config into the same folder is refused,
/// and so is a second run into a folder while one is running ([`RunLock`]).
pub fn execute(config: RunConfig, out: &Path, progress: &mut dyn Progress) -> anyhow::Result<()> {
    execute_scoped(config, out, Scope::All, progress)
}

/// [`execute`] for the units `scope` computes: a shard computes its own units and stops (the
/// folder is shared with the other shards of the same config); a merge computes no unit and
/// builds the tables and the report.
pub fn execute_scoped(
    config: RunConfig,
    out: &Path,
    scope: Scope,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    run(config, out, scope, false, progress)
}

/// [`execute`] for a single-stage command: where `out` already holds a study, `config`'s
/// stages are added to it ([`RunConfig::continued_by`], refused when the studies differ in
/// anything else) and the folder's `config.toml` becomes the study with them.
pub fn execute_stage(
    config: RunConfig,
    out: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    run(config, out, Scope::All, true, progress)
}

fn run(
    mut config: RunConfig,
    out: &Path,
    scope: Scope,
    continuing: bool,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    config.validate()?;
    if out.exists() && !out.is_dir() {
        bail!(
            "{}: exists and is not a folder (the run's output folder, --out)",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let _lock = match scope {
        Scope::Shard(_) => RunLock::acquire_shared(out)?,
        _ => RunLock::acquire(out)?,
    };
    if continuing {
        config = continue_study(out, config)?;
    }
    guard_config(out, &config, progress)?;
    if let Scope::Shard(shard) = scope {
        progress.note(&format!("shard {shard}: computing this shard's units only"));
    }

    progress.stage("data and splits");
    let mut study = Study::open(config, out)?;
    study.scope = scope;
    if scope.assembles() {
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
    }
    let costs = CostBook::load();
    let plan = Plan::build(&study, &costs);
    for line in plan.summary() {
        progress.note(&line);
    }
    let mut tracker = Tracker::new(plan, costs, progress);
    let mut tables = Tables::default();
    let mut owned = 0;
    for name in &study.config.models {
        let domains = cells_to_run(&study, name, &mut owned)?;
        if domains.is_empty() {
            continue;
        }
        tracker.stage(&format!("model {name}"));
        let model = LoadedModel::load(name, study.config.precision)
            .with_context(|| format!("loading model `{name}`"))?;
        for domain in domains {
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
        if scope.assembles() {
            tables.write(&study, &mut tracker)?;
        }
    }
    if let Scope::Shard(shard) = scope {
        write_json_atomic(
            &shard.done_file(out),
            &serde_json::json!({"shard": shard.to_string(), "units": owned}),
        )?;
        progress.note(&format!(
            "shard {shard}: its {owned} units are done; `pstat merge {}` builds the tables once every shard is",
            out.display()
        ));
        return Ok(());
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

/// The domains of `model` this process works on: all of them, or those where a shard owns
/// a unit (it then loads no model it has nothing to compute for). Counts the owned units.
fn cells_to_run(study: &Study, model: &str, owned: &mut usize) -> anyhow::Result<Vec<Domain>> {
    let Scope::Shard(shard) = study.scope else {
        return Ok(study.config.domains.clone());
    };
    let name = model::display_name(model);
    let mut domains = Vec::new();
    for &domain in &study.config.domains {
        let keys = shard::possible_units(&study.config, &study.conditions, &name, domain)?;
        let mine = keys.iter().filter(|k| shard.owns(k)).count();
        if mine > 0 {
            *owned += mine;
            domains.push(domain);
        }
    }
    Ok(domains)
}

/// Assembles the run folder `outs[0]` from the shards that wrote there, after copying in the
/// unit files of shards that wrote into folders of their own (`outs[1..]`, same config): the
/// tables and the report of the whole run, or an error naming the first missing unit.
pub fn merge(outs: &[PathBuf], progress: &mut dyn Progress) -> anyhow::Result<()> {
    let (into, from) = outs.split_first().context("no run folder to merge")?;
    for folder in from {
        merge_folder(folder, into)?;
    }
    let config_path = into.join("config.toml");
    let text = std::fs::read_to_string(&config_path).with_context(|| {
        format!(
            "reading {} (no shard has run there yet)",
            config_path.display()
        )
    })?;
    let config: RunConfig = toml::from_str(&text)
        .with_context(|| format!("{}: invalid run config", config_path.display()))?;
    let shards = shard_count(into)?;
    execute_scoped(config, into, Scope::Merge { shards }, progress)
}

/// The N of the shards that finished in `out` (`shards/<I>-of-<N>.json`), if they agree.
fn shard_count(out: &Path) -> anyhow::Result<Option<u32>> {
    let dir = out.join("shards");
    if !dir.exists() {
        return Ok(None);
    }
    let mut counts = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_suffix(".json")
            .and_then(|n| n.split_once("-of-"))
            .and_then(|(_, n)| n.parse::<u32>().ok())
        {
            counts.insert(n);
        }
    }
    Ok((counts.len() == 1).then(|| *counts.first().expect("one count")))
}

/// Copies every file of the run folder `from` that `into` lacks (units are computed by one
/// shard each, so a file both hold has the same content), after checking the configs match.
fn merge_folder(from: &Path, into: &Path) -> anyhow::Result<()> {
    let config = |dir: &Path| {
        let path = dir.join("config.toml");
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let theirs = config(from)?;
    std::fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    if into.join("config.toml").exists() && config(into)? != theirs {
        bail!(
            "{} holds a run with another config than {}",
            from.display(),
            into.display()
        );
    }
    let _lock = RunLock::acquire(from)?;
    copy_missing(from, into)
}

fn copy_missing(from: &Path, into: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        // Locks, temporary files and the log belong to the folder they are in.
        if name.to_string_lossy().starts_with('.') || name == "run.log" {
            continue;
        }
        let (source, target) = (entry.path(), into.join(&name));
        if entry.file_type()?.is_dir() {
            copy_missing(&source, &target)?;
        } else if !target.exists() {
            let bytes =
                std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
            write_atomic(&target, &bytes)
                .with_context(|| format!("writing {}", target.display()))?;
        }
    }
    Ok(())
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
    if check_config(out, config)? {
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

/// The study of `out` with `config`'s stages added, written to its `config.toml` when that
/// changes it (the manifest, which names the config's hash, is rewritten by the guard).
fn continue_study(out: &Path, config: RunConfig) -> anyhow::Result<RunConfig> {
    let path = out.join("config.toml");
    if !path.is_file() {
        return Ok(config);
    }
    let held = RunConfig::from_file(&path)?;
    let merged = held
        .continued_by(&config)
        .with_context(|| format!("{}: cannot add this stage", out.display()))?;
    if merged != held {
        write_atomic(&path, toml::to_string(&merged)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        let manifest = out.join("manifest.json");
        if manifest.exists() {
            std::fs::remove_file(&manifest)
                .with_context(|| format!("removing {}", manifest.display()))?;
        }
    }
    Ok(merged)
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
