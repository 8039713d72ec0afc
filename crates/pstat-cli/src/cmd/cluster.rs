//! `pstat cluster`: Algorithm 1 (PCA → UMAP → HDBSCAN grid, silhouette-based selection) on any
//! point matrix.

use crate::output::outln;
use anyhow::Context;
use clap::Args;
use pstat_cluster::input::load_matrix;
use pstat_cluster::{Grid, run_grid};
use std::path::PathBuf;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["input", "model"])))]
pub struct ClusterArgs {
    /// Points to cluster: a safetensors file with a 2-D f32 tensor [points, dims].
    #[arg(long)]
    input: Option<PathBuf>,
    /// Instead of --input: cluster the statements a model retracts in a domain (runs both
    /// instantiations first; see `pstat run`).
    #[arg(long, requires = "domain")]
    model: Option<String>,
    /// With --model: the domain.
    #[arg(long)]
    domain: Option<pstat_data::Domain>,
    /// With --model: an OpenAI-compatible chat endpoint that names each cluster.
    #[arg(long)]
    labeler: Option<String>,
    /// With --model: start from this run config (TOML) instead of the paper's defaults, as the
    /// other stage commands do, so the clustering joins the study they began.
    #[arg(long, value_name = "FILE", requires = "model")]
    config: Option<PathBuf>,
    /// With --model: `f32` or `q8`, overriding the config's `precision`.
    #[arg(long, requires = "model")]
    precision: Option<pstat_lm::Precision>,
    /// With --model: the run folder (default `results`; --out names it too).
    #[arg(long, conflicts_with = "out")]
    run_out: Option<PathBuf>,
    /// Name of the tensor inside --input.
    #[arg(long, default_value = "X")]
    tensor: String,
    /// Output JSON (chosen configuration, its score, every grid score, one label per point with
    /// −1 for noise, and the 2-D embedding); printed to stdout when omitted. With --model: the
    /// run folder the study is computed in, as every stage command's --out.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seeds PCA and UMAP; the same seed gives the same output.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(serde::Serialize)]
struct ClusterOutput<'a> {
    input: String,
    tensor: &'a str,
    n_points: usize,
    n_dims: usize,
    grid: &'a Grid,
    #[serde(flatten)]
    result: pstat_cluster::GridResult,
}

pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let (Some(input), None) = (&args.input, &args.model) else {
        let (Some(model), Some(domain)) = (args.model, args.domain) else {
            anyhow::bail!("--model needs --domain");
        };
        return super::stage::cluster(super::stage::ClusterModelArgs {
            target: super::stage::Target {
                model,
                domain,
                config: args.config,
                out: args
                    .out
                    .or(args.run_out)
                    .unwrap_or_else(|| PathBuf::from("results")),
                precision: args.precision,
            },
            labeler: args.labeler,
        });
    };
    let x = load_matrix(input, &args.tensor)?;
    if x.rows() == 0 {
        anyhow::bail!(
            "{}: tensor `{}` has no points",
            input.display(),
            args.tensor
        );
    }
    let grid = Grid::default();
    let result = run_grid(&x, &grid, args.seed);
    if let Some(reason) = &result.no_structure {
        eprintln!(
            "{}: no structure to cluster ({reason}); every point is labelled noise",
            input.display()
        );
    }
    let output = ClusterOutput {
        input: input.display().to_string(),
        tensor: &args.tensor,
        n_points: x.rows(),
        n_dims: x.cols(),
        grid: &grid,
        result,
    };
    match &args.out {
        Some(path) => pstat_data::artifact::write_json_atomic(path, &output)
            .with_context(|| format!("writing {}", path.display()))?,
        None => outln!("{}", serde_json::to_string_pretty(&output)?)?,
    }
    Ok(())
}
