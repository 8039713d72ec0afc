//! `pstat cluster`: Algorithm 1 (PCA → UMAP → HDBSCAN grid, silhouette-based selection) on any
//! point matrix.

use anyhow::Context;
use clap::Args;
use pstat_cluster::input::load_matrix;
use pstat_cluster::{Grid, run_grid};
use std::path::PathBuf;

#[derive(Args)]
pub struct ClusterArgs {
    /// Points to cluster: a safetensors file with a 2-D f32 tensor [points, dims].
    #[arg(long)]
    input: PathBuf,
    /// Name of the tensor inside --input.
    #[arg(long, default_value = "X")]
    tensor: String,
    /// Output JSON (chosen configuration, its score, every grid score, one label per point with
    /// −1 for noise, and the 2-D embedding); printed to stdout when omitted.
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
    let x = load_matrix(&args.input, &args.tensor)?;
    let grid = Grid::default();
    let output = ClusterOutput {
        input: args.input.display().to_string(),
        tensor: &args.tensor,
        n_points: x.rows(),
        n_dims: x.cols(),
        grid: &grid,
        result: run_grid(&x, &grid, args.seed),
    };
    match &args.out {
        Some(path) => pstat_data::artifact::write_json_atomic(path, &output)
            .with_context(|| format!("writing {}", path.display()))?,
        None => println!("{}", serde_json::to_string_pretty(&output)?),
    }
    Ok(())
}
