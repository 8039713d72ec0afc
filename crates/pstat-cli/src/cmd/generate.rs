//! `pstat data build-fictional | synthesize | bigrams`: make the Fictional and Synthetic (Fi)
//! statement files from the curated tables, and the lexical (bigram) comparison of Fig. 2(a–c).

use super::DataArgs;
use crate::output::{out, outln};
use anyhow::Context;
use clap::Subcommand;
use pstat_authoring::fictional::{self, DEFAULT_SEED};
use pstat_authoring::lexicon::{DEFAULT_WORD_LIST, EnglishWords};
use pstat_authoring::pairing::to_csv;
use pstat_authoring::synthetic;
use pstat_data::artifact::write_atomic;
use pstat_data::{DataRoot, Domain, load_all};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum GenerateCommand {
    /// Build fictional/<domain>_fictional.csv from the curated canonical pairs in
    /// fictional/curated/ (four statements per pair: true/false × affirmative/negated).
    BuildFictional {
        /// Seed for drawing the wrong objects of the canonically false statements.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Only this domain (default: all three).
        #[arg(long)]
        domain: Option<Domain>,
        /// Data folder to read the curated tables from and write into.
        #[arg(long, default_value = "data", value_name = "DIR")]
        dir: PathBuf,
    },
    /// Generate Synthetic (Fi) statements with a Markov name generator trained on the
    /// Fictional names; writes synthetic_fi/<domain>_synthetic_fi.csv and synthetic_fi/SOURCE.md.
    Synthesize {
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Only this domain (default: all three).
        #[arg(long)]
        domain: Option<Domain>,
        /// Data folder holding trilemma/ and fictional/; output goes to its synthetic_fi/.
        #[arg(long, default_value = "data", value_name = "DIR")]
        dir: PathBuf,
        /// English word list; generated names that are English words are rejected.
        #[arg(long, default_value = DEFAULT_WORD_LIST, value_name = "FILE")]
        words: PathBuf,
    },
    /// Character-bigram rank–frequency curves of the entity strings per domain × statement
    /// type, and Jensen–Shannon distances between types (Fig. 2 a–c).
    Bigrams {
        /// Output folder for bigram_rank_frequency.csv and bigram_distances.csv.
        #[arg(long, default_value = "bigrams", value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        data: DataArgs,
    },
}

pub fn run(command: GenerateCommand) -> anyhow::Result<()> {
    match command {
        GenerateCommand::BuildFictional { seed, domain, dir } => {
            for domain in selected(domain) {
                let (rows, excluded) = fictional::build_from_dir(&dir, domain, seed)?;
                for message in &excluded {
                    eprintln!("left out: {message}");
                }
                let path = dir.join(fictional::output_file(domain));
                write_atomic(&path, to_csv(&rows)?.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                let truthy = rows.iter().filter(|r| r.correct).count();
                outln!(
                    "{domain}: {} statements (Fictional (T) {truthy}, (F) {}) -> {}",
                    rows.len(),
                    rows.len() - truthy,
                    path.display()
                )?;
            }
            Ok(())
        }
        GenerateCommand::Synthesize {
            seed,
            domain,
            dir,
            words,
        } => {
            let words = EnglishWords::load(&words)?;
            let root = DataRoot::from_dir(&dir)?;
            for domain in selected(domain) {
                let rows = synthetic::synthesize_from_root(&root, domain, &words, seed)?;
                let path = dir.join(synthetic::output_file(domain));
                write_atomic(&path, to_csv(&rows)?.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                outln!("{domain}: {} statements -> {}", rows.len(), path.display())?;
            }
            let source = dir.join("synthetic_fi/SOURCE.md");
            // Read again: the counts are those of the files just written.
            let written = DataRoot::from_dir(&dir)?;
            write_atomic(
                &source,
                synthetic::source_markdown(&written, seed, &words).as_bytes(),
            )
            .with_context(|| format!("writing {}", source.display()))?;
            Ok(())
        }
        GenerateCommand::Bigrams { out, data } => {
            let datasets = load_all(&data.root()?)?;
            let distances = pstat_familiarity::bigram::write_tables(&datasets, &out)
                .with_context(|| format!("writing bigram tables into {}", out.display()))?;
            outln!("{}", out.join("bigram_rank_frequency.csv").display())?;
            outln!("{}", out.join("bigram_distances.csv").display())?;
            out!(
                "{}",
                pstat_familiarity::bigram::nearest_kinds_report(&distances)
            )?;
            Ok(())
        }
    }
}

fn selected(domain: Option<Domain>) -> Vec<Domain> {
    domain.map_or_else(|| Domain::ALL.to_vec(), |d| vec![d])
}
