//! `pstat sawmil`: sAwMIL as a generic multiple-instance learner on any bags of vectors.

use anyhow::Context;
use clap::Subcommand;
use pstat_probe::milfile::MilFile;
use pstat_probe::{SawMilParams, TrainedProbe};
use std::io::Write;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SawmilCommand {
    /// Fit a probe on labelled bags (safetensors with `X`, `bag_offsets`, `y`, optional `intra`).
    Fit {
        /// Input bags: `X` [instances, d] f32, `bag_offsets` [bags+1] i64, `y` [bags] i8 (±1),
        /// `intra` [instances] u8 known-positive mask (default: the last 2 instances of each bag).
        #[arg(long)]
        bags: PathBuf,
        /// Regularization C (> 0); omit to choose it from 0.05, 0.1, 0.5, 1, 10 by 3-fold CV.
        #[arg(long = "C", value_parser = positive)]
        c: Option<f64>,
        /// Seeds capping, CV folds and the solver's coordinate order.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Bags used for the fit (the first ones), as upstream.
        #[arg(long, default_value_t = 1800)]
        train_bag_limit: usize,
        /// Instances kept per training bag (known positives always kept).
        #[arg(long, default_value_t = 10)]
        max_bag_size: usize,
        /// Output probe (safetensors: w, b, scaler_mean, scaler_scale; C and eta in metadata).
        #[arg(long)]
        out: PathBuf,
    },
    /// Score bags: one JSON line per bag, `{"score": s, "label": 1|-1}`, in bag order; or, with
    /// `--activations`, every statement of an activation file (a run's cache or an imported
    /// one), `{"id": ..., "score": s, "label": 1|-1}`, exactly as the run judged it.
    Predict {
        /// A probe file: `pstat sawmil fit --out`, or a run's
        /// `<model>/<domain>/representational/<probe>/layer_<l>/<condition>.probe.safetensors`.
        #[arg(long)]
        probe: PathBuf,
        /// Bags file (`X` and `bag_offsets`; `y` and `intra` are ignored).
        #[arg(
            long,
            required_unless_present = "activations",
            conflicts_with = "activations"
        )]
        bags: Option<PathBuf>,
        /// Activation file (safetensors with per-statement token rows, as the activation
        /// cache writes them); any probe kind.
        #[arg(long)]
        activations: Option<PathBuf>,
    },
}

pub fn run(command: SawmilCommand) -> anyhow::Result<()> {
    match command {
        SawmilCommand::Fit {
            bags,
            c,
            seed,
            train_bag_limit,
            max_bag_size,
            out,
        } => {
            let set = MilFile::read(&bags)?
                .training_set()
                .with_context(|| bags.display().to_string())?;
            let params = SawMilParams {
                c,
                seed,
                train_bag_limit,
                max_bag_size,
                ..SawMilParams::default()
            };
            let report = params.fit_report(&set)?;
            for (c, why) in report.search.iter().flat_map(|s| s.skipped()) {
                eprintln!("C search: skipped C = {c}, degenerate fit ({why})");
            }
            report.probe.save(&out)?;
            let c = report.probe.c.unwrap_or(f64::NAN);
            eprintln!(
                "fit {} bags (d = {}): C = {c}, eta = {:.4}, {} selected positive instances -> {}",
                set.len(),
                set.bags.dim(),
                report.eta,
                report.selected.iter().filter(|&&s| s).count(),
                out.display()
            );
            Ok(())
        }
        SawmilCommand::Predict {
            probe,
            bags,
            activations,
        } => {
            let model = TrainedProbe::load(&probe)?;
            let with_probe = || format!("probe {}", probe.display());
            let mut out = std::io::BufWriter::new(crate::output::stdout());
            if let Some(path) = activations {
                let acts = pstat_data::activations::Activations::read(&path)?;
                let scores = model
                    .score_activations(&acts)
                    .with_context(|| format!("{}, {}", path.display(), with_probe()))?;
                for (id, score) in acts.statement_ids.iter().zip(scores) {
                    let label = TrainedProbe::label(score);
                    let line = serde_json::json!({ "id": id, "score": score, "label": label });
                    writeln!(out, "{line}")?;
                }
            } else if let Some(bags) = bags {
                let scores = model
                    .score_bags_file(&MilFile::read(&bags)?)
                    .with_context(|| format!("{}, {}", bags.display(), with_probe()))?;
                for score in scores {
                    let line =
                        serde_json::json!({ "score": score, "label": TrainedProbe::label(score) });
                    writeln!(out, "{line}")?;
                }
            }
            out.flush()?;
            Ok(())
        }
    }
}

/// `--C`: a finite number above 0, refused before any file is read.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 => Ok(c),
        Ok(_) => Err("C must be a finite number above 0".into()),
        Err(e) => Err(e.to_string()),
    }
}
