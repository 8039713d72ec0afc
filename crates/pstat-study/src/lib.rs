//! The P-StaT study as a library. [`execute`] runs the stages a [`RunConfig`] enables —
//! representational, behavioral, familiarity, clustering, in that order — for every (model,
//! domain) of the config, into one output folder. Every unit of work writes its result
//! atomically and is skipped when a rerun finds it, so an interrupted run loses at most the
//! unit in flight; what one stage hands the next (the veracity layer, its activations, the
//! retractions) passes in memory, and a resumed run reads it back through the same typed code.
//! [`execute_scoped`] runs one shard of a run, and [`merge`] assembles what shards computed.

#![warn(missing_docs)]

pub mod activations;
mod agreement;
pub mod behavioral;
pub mod clustering;
pub mod comparisons;
pub mod config;
pub mod contextual;
pub mod costs;
pub mod export;
pub mod familiarity;
mod io;
pub mod layout;
pub mod lock;
pub mod model;
pub mod plan;
pub mod progress;
pub mod representational;
pub mod shard;
pub mod stage;
pub mod stages;
pub mod study;
pub mod tracker;
pub mod unit;
pub mod vllm;

pub use config::RunConfig;
pub use layout::RunLayout;
pub use lock::RunLock;
pub use model::LoadedModel;
pub use plan::Plan;
pub use progress::{Progress, RunStatus, Silent};
pub use shard::{Scope, Shard};
pub use stage::{Cell, CellPlan, Handoff, Known, Stage, Tables};
pub use stages::STAGES;
pub use study::Study;
pub use tracker::Tracker;
pub use unit::{PlannedUnit, UnitKey, UnitKind, Work};

use anyhow::{Context, bail};
use costs::CostBook;
use pstat_data::Domain;
use pstat_data::artifact::{write_atomic, write_json_atomic};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    let _waits = crate::progress::NetworkWaits::report_into(out);
    let claimed = !out.join("config.toml").exists();
    guard_config(out, &config, progress)?;
    // Not a shard's: the other shards of the run share the claim.
    let alone = !matches!(scope, Scope::Shard(_));
    let result = run_claimed(config, out, scope, progress);
    if result.is_err() && claimed && alone && !computed_anything(out) {
        // A first run that failed before computing anything (a model that does not load, a
        // data folder that does not parse) leaves the folder to the corrected config.
        for file in ["config.toml", "manifest.json"] {
            let path = out.join(file);
            if let Err(e) = std::fs::remove_file(&path) {
                progress.note(&format!("warning: removing {}: {e}", path.display()));
            }
        }
    }
    result
}

/// Whether `out` holds anything a unit computed: a file in a folder other than the splits and
/// the shards' records (units live under `<model>/` and `clusters/`). The splits, the bigram
/// tables, the log and the lock follow from the data or name no result; nor do the folders a
/// stage makes before it fails, or the hidden lock files in them.
fn computed_anything(out: &Path) -> bool {
    fn holds_a_file(dir: &Path) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            match entry.file_type() {
                Ok(t) if t.is_dir() => holds_a_file(&entry.path()),
                Ok(_) => !hidden,
                Err(_) => false,
            }
        })
    }
    let Ok(entries) = std::fs::read_dir(out) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        entry.file_type().is_ok_and(|t| t.is_dir())
            && !name.starts_with('.')
            && name != "splits"
            && name != "shards"
            && holds_a_file(&entry.path())
    })
}

/// The part of a run after the folder is claimed for `config`.
fn run_claimed(
    config: RunConfig,
    out: &Path,
    scope: Scope,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    if let Scope::Shard(shard) = scope {
        progress.note(&format!("shard {shard}: computing this shard's units only"));
    }

    progress.stage("data and splits");
    let mut study = Study::open(config, out, progress)?;
    behavioral::check_context_sizes(&study)?;
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
            let bytes = std::fs::read(out.join(table))
                .with_context(|| format!("reading {}", out.join(table).display()))?;
            io::write_manifest(
                &pstat_data::artifact::Manifest::new(
                    table,
                    &study.config_hash,
                    &pstat_data::artifact::sha256_hex(all_data.join("\n").as_bytes()),
                    study.config.seed,
                )
                .with_content(&bytes),
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
            tables
                .agreement
                .extend(agreement::agreement_rows(&cell, &handoff.retractions)?);
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
        let keys = plan::possible_units(study, &name, domain);
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
    let dir = RunLayout::new(out).shards();
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
        // Locks, temporary files, the log, checkpoints of units still under way and files
        // moved aside as damaged belong to the folder they are in.
        let text = name.to_string_lossy();
        if text.starts_with('.')
            || name == "run.log"
            || text.ends_with(".partial.jsonl")
            || text.ends_with(".corrupt")
        {
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
/// with the folder's manifest, before any model loads ([`check_config`]). A manifest that does
/// not parse or names another config than `config.toml` was damaged; it is named in a warning
/// and moved aside (`manifest.json.corrupt`). The manifest is written again on every run, so it
/// names the program that last wrote into the folder.
fn guard_config(out: &Path, config: &RunConfig, progress: &mut dyn Progress) -> anyhow::Result<()> {
    let path = out.join("config.toml");
    let manifest = out.join("manifest.json");
    if check_config(out, config)? {
        let problem = match read_run_manifest(&manifest)? {
            None => None,
            Some(Err(e)) => Some(format!("unreadable ({e})")),
            Some(Ok(m)) if m.config_hash != config.hash() => Some(format!(
                "names config {} but config.toml hashes to {}",
                m.config_hash,
                config.hash()
            )),
            Some(Ok(_)) => None,
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
        if computed_anything(out) {
            // check_config found the manifest naming this very config.
            progress.note(&format!(
                "warning: {} was missing; written again from this config, which {} names",
                path.display(),
                manifest.display()
            ));
        }
        write_atomic(&path, toml::to_string(config)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let build = pstat_data::artifact::build();
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

/// The folder's `manifest.json`: `None` when absent, `Some(Err)` when it does not parse.
fn read_run_manifest(
    path: &Path,
) -> anyhow::Result<Option<Result<RunManifest, serde_json::Error>>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes))),
    }
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
/// The folder's `config.toml` is compared as a config, not as text (a whitespace edit or a
/// reordered table is the same config); one that does not parse, or another config, stops the
/// run naming the settings and what to do. A folder whose `config.toml` is gone while units
/// remain is the run its `manifest.json` names: this config only if the hashes agree, since
/// nothing computed under another config may be reused.
fn check_config(out: &Path, config: &RunConfig) -> anyhow::Result<bool> {
    let path = out.join("config.toml");
    let what_to_do = "choose another --out, or delete the folder to start again";
    if !path.exists() {
        if !computed_anything(out) {
            return Ok(false);
        }
        let manifest = out.join("manifest.json");
        return match read_run_manifest(&manifest)? {
            Some(Ok(m)) if m.config_hash == config.hash() => Ok(false),
            Some(Ok(m)) => bail!(
                "{} holds results of config {} (its {}) but its config.toml is missing, and this \
                 config hashes to {}: nothing computed under another config is reused; put the \
                 run's config.toml back, or {what_to_do}",
                out.display(),
                m.config_hash,
                manifest.display(),
                config.hash()
            ),
            _ => bail!(
                "{} holds results but neither a config.toml nor a readable manifest.json says \
                 which config computed them: nothing of it is reused; put the run's config.toml \
                 back, or {what_to_do}",
                out.display()
            ),
        };
    }
    let previous = RunConfig::from_file(&path).with_context(|| {
        format!(
            "{} holds a run whose config.toml cannot be read; restore it, or {what_to_do}",
            out.display()
        )
    })?;
    let differ = settings_that_differ(&previous, config)?;
    if !differ.is_empty() {
        bail!(
            "{} holds a run with another config ({}): {}; {what_to_do}",
            out.display(),
            path.display(),
            differ.join(", ")
        );
    }
    Ok(true)
}

/// Each setting whose values differ, as `key: folder X, this run Y` (dotted keys).
fn settings_that_differ(held: &RunConfig, asked: &RunConfig) -> anyhow::Result<Vec<String>> {
    fn flatten(prefix: &str, value: &serde_json::Value, into: &mut BTreeMap<String, String>) {
        match value.as_object() {
            Some(fields) => {
                for (key, v) in fields {
                    let key = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    flatten(&key, v, into);
                }
            }
            None => {
                into.insert(prefix.to_string(), value.to_string());
            }
        }
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", &serde_json::to_value(held)?, &mut a);
    flatten("", &serde_json::to_value(asked)?, &mut b);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let none = "(unset)".to_string();
    Ok(keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            format!(
                "`{k}` is {} there, {} here",
                a.get(k).unwrap_or(&none),
                b.get(k).unwrap_or(&none)
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merge brings the other folder's results, not what belongs to that folder alone: its
    /// locks, log, checkpoints of units under way and files moved aside as damaged.
    #[test]
    fn a_merge_copies_results_only() {
        let dir = tempfile::tempdir().unwrap();
        let (from, into) = (dir.path().join("from"), dir.path().join("into"));
        let unit = from.join("m/city_locations/behavioral/plain");
        std::fs::create_dir_all(&unit).unwrap();
        for name in [
            "noise.main.jsonl",
            "noise.main.partial.jsonl",
            "fictional.main.jsonl.corrupt",
            ".format.lock",
        ] {
            std::fs::write(unit.join(name), name).unwrap();
        }
        std::fs::write(from.join("run.log"), "log").unwrap();
        copy_missing(&from, &into).unwrap();
        let copied = into.join("m/city_locations/behavioral/plain");
        let names: Vec<String> = std::fs::read_dir(&copied)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["noise.main.jsonl"]);
        assert!(!into.join("run.log").exists());
    }
}
