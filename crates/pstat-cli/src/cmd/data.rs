use super::DataArgs;
use crate::output::{out, outln};
use anyhow::Context;
use clap::Subcommand;
use pstat_data::split::exclusive_split;
use pstat_data::{Domain, SplitConfig, load_all, load_domain, stats};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum DataCommand {
    /// Table 1: statements per domain and kind (affirmative / negated).
    Stats {
        /// Print JSON: {"city_locations": {"true": {"affirmative": .., "negated": .., "total": ..}, ...}, ...}.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataArgs,
    },
    /// Build the exclusive train / calibration / test split (55 / 20 / 25) of each domain.
    Split {
        /// Seed of the split.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Domains to split (default: all three).
        #[arg(long, value_delimiter = ',')]
        domains: Vec<Domain>,
        /// Output folder: one `<domain>.json` per domain with the ids of each split.
        #[arg(long, default_value = "splits")]
        out: PathBuf,
        /// Print JSON: [{"domain": .., "statements": .., "train": .., "calibration": .., "test": .., "path": ..}, ...].
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataArgs,
    },
    #[command(flatten)]
    Generate(super::generate::GenerateCommand),
}

pub fn run(command: DataCommand) -> anyhow::Result<()> {
    match command {
        DataCommand::Generate(c) => super::generate::run(c),
        DataCommand::Stats { json, data } => {
            let table = stats::table1(&load_all(&data.root()?)?);
            if json {
                outln!("{}", serde_json::to_string_pretty(&table)?)?;
            } else {
                out!("{}", stats::render_table1(&table))?;
            }
            Ok(())
        }
        DataCommand::Split {
            seed,
            domains,
            out,
            json,
            data,
        } => {
            let root = data.root()?;
            let domains = if domains.is_empty() {
                Domain::ALL.to_vec()
            } else {
                domains
            };
            let mut written = Vec::new();
            for domain in domains {
                let dataset = load_domain(&root, domain)?;
                let split = exclusive_split(
                    &dataset,
                    SplitConfig {
                        seed,
                        ..SplitConfig::default()
                    },
                )?;
                let path = out.join(format!("{domain}.json"));
                pstat_data::artifact::write_json_atomic(&path, &split)
                    .with_context(|| format!("writing {}", path.display()))?;
                if json {
                    written.push(serde_json::json!({
                        "domain": domain,
                        "statements": dataset.statements.len(),
                        "train": split.train.len(),
                        "calibration": split.calibration.len(),
                        "test": split.test.len(),
                        "path": path,
                    }));
                } else {
                    outln!("{} -> {}", split.summary_line(), path.display())?;
                }
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&written)?)?;
            }
            Ok(())
        }
    }
}
