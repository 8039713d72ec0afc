//! `pstat run`: the whole study in one resumable command. Stages run in dependency order;
//! every unit of work writes its result atomically and is skipped when a rerun finds it, so an
//! interrupted run loses at most the unit in flight.

mod behavioral;
mod clustering;
mod config;
mod familiarity;
mod io;
pub mod model;
mod progress;
pub mod representational;
mod study;

pub use config::RunConfig;

use anyhow::{Context, bail};
use clap::Args;
use pstat_data::Domain;
use pstat_data::artifact::{write_atomic, write_json_atomic};
use pstat_stability::StabilityRow;
use std::path::PathBuf;
use study::Study;

#[derive(Args)]
pub struct RunArgs {
    /// Run config (TOML); every field defaults to the paper's protocol on the embedded models.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Models to run (registry names or GGUF paths), overriding the config.
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Domains to run, overriding the config.
    #[arg(long, value_delimiter = ',')]
    domains: Vec<Domain>,
    /// The documented small preset (see README): first model, subsampled statements, K = 20,
    /// veracity layer only.
    #[arg(long)]
    quick: bool,
    /// Output folder; rerunning with the same config continues where a run stopped.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => RunConfig::from_file(path)?,
        None => RunConfig::default(),
    };
    if args.quick {
        config = config.quick();
    }
    if !args.models.is_empty() {
        config.models = args.models.clone();
    }
    if !args.domains.is_empty() {
        config.domains = args.domains.clone();
    }
    execute(config, &args.out)
}

/// Runs the stages `config` enables into `out` (also the entry point of the single-stage
/// commands `pstat probe`, `pstat familiarity` and `pstat cluster --model`).
pub fn execute(config: RunConfig, out: &std::path::Path) -> anyhow::Result<()> {
    config.validate()?;
    let out = out.to_path_buf();
    guard_config(&out, &config)?;

    progress::stage("data and splits");
    let study = Study::open(config, &out)?;
    pstat_familiarity::bigram::write_tables(&study.datasets, &out)
        .context("writing the bigram tables")?;
    let mut tables = Tables::default();
    for name in &study.config.models {
        progress::stage(&format!("model {name}"));
        let model =
            model::LoadedModel::load(name).with_context(|| format!("loading model `{name}`"))?;
        for &domain in &study.config.domains {
            let cfg = &study.config;
            let mut retractions = clustering::Retractions::default();
            if cfg.representational.enabled {
                progress::stage(&format!("{} {domain}: representational", model.name));
                let result = representational::run(&study, &model, domain)?;
                tables.stability.extend(result.rows);
                representational::collect_retractions(
                    &study,
                    &model,
                    domain,
                    result.layer_choice.veracity_layer,
                    &mut retractions,
                )?;
                tables.layers.push(result.layer_choice);
            }
            if cfg.behavioral.enabled {
                progress::stage(&format!("{} {domain}: behavioral", model.name));
                let result = behavioral::run(&study, &model, domain, &mut retractions)?;
                tables.stability.extend(result.stability);
                tables.answers.extend(result.answers);
                tables.resamples.extend(result.resamples);
            }
            if cfg.familiarity.enabled {
                progress::stage(&format!("{} {domain}: familiarity", model.name));
                tables
                    .familiarity
                    .extend(familiarity::object_token_table(&study, &model, domain)?);
            }
            // Distances and clusters read the veracity layer's activations.
            if cfg.representational.enabled && (cfg.familiarity.enabled || cfg.clustering.enabled) {
                let (layer, acts) = representational::veracity_activations(&study, &model, domain)?;
                if cfg.familiarity.enabled {
                    tables.distances.extend(familiarity::distance_table(
                        &study, &model, domain, layer, &acts,
                    ));
                }
                if cfg.clustering.enabled {
                    progress::stage(&format!("{} {domain}: retraction clustering", model.name));
                    let clusters = clustering::run(&study, &model, domain, &retractions, &acts)?;
                    tables.clusters.extend(clusters.rows);
                    tables.themes.extend(clusters.themes);
                    tables.labeled.extend(clusters.labeled);
                }
            }
        }
        // After each model, so an interrupted run still has the tables of finished models.
        tables.write(&study)?;
    }
    progress::stage("report");
    let report = pstat_report::build_report(&out)?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    eprintln!("report: {}", out.join("report.html").display());
    Ok(())
}

/// The tables at the top of the run folder, rebuilt from the units' results.
#[derive(Default)]
struct Tables {
    stability: Vec<StabilityRow>,
    layers: Vec<representational::LayerChoice>,
    familiarity: Vec<pstat_familiarity::summary::FamiliarityRow>,
    distances: Vec<pstat_familiarity::summary::DistanceSummaryRow>,
    answers: Vec<pstat_prompt::tables::AnswerRow>,
    resamples: Vec<pstat_prompt::tables::ResampleRow>,
    clusters: Vec<clustering::ClusterRow>,
    themes: Vec<clustering::ThemeCsvRow>,
    labeled: Vec<pstat_cluster::contrast::themes::LabeledCluster>,
}

impl Tables {
    fn write(&self, study: &Study) -> anyhow::Result<()> {
        let out = &study.out;
        let stability = out.join("stability.csv");
        pstat_stability::write_csv(&stability, &self.stability)?;
        pstat_stability::write_json(&out.join("stability.json"), &self.stability)?;
        write_json_atomic(&out.join("layers.json"), &self.layers)?;
        io::write_csv(&out.join("familiarity.csv"), &self.familiarity)?;
        io::write_csv(&out.join("distances.csv"), &self.distances)?;
        io::write_csv(&out.join("clusters.csv"), &self.clusters)?;
        io::write_csv(&out.join("answers.csv"), &self.answers)?;
        io::write_csv(&out.join("resamples.csv"), &self.resamples)?;
        if !self.themes.is_empty() {
            io::write_csv(&out.join("themes.csv"), &self.themes)?;
            let themes = pstat_cluster::contrast::themes::tabulate_themes(&self.labeled);
            write_json_atomic(&out.join("themes.json"), &themes)?;
        }
        for path in [
            "stability.csv",
            "familiarity.csv",
            "distances.csv",
            "layers.json",
            "clusters.csv",
            "answers.csv",
        ] {
            if !out.join(path).exists() {
                continue;
            }
            pstat_data::artifact::Manifest::new(
                path,
                &study.config_hash,
                &study.data_hash(),
                study.config.seed,
            )
            .write_beside(&out.join(path))?;
        }
        eprintln!(
            "wrote {} ({} rows)",
            stability.display(),
            self.stability.len()
        );
        Ok(())
    }
}

/// A run folder belongs to one config: continuing it with another would mix results.
fn guard_config(out: &std::path::Path, config: &RunConfig) -> anyhow::Result<()> {
    let path = out.join("config.toml");
    let text = toml::to_string(config)?;
    if path.exists() {
        let previous = std::fs::read_to_string(&path)?;
        if previous != text {
            bail!(
                "{} holds a run with another config ({}); choose another --out or delete the folder",
                out.display(),
                path.display()
            );
        }
        return Ok(());
    }
    write_atomic(&path, text.as_bytes())?;
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
