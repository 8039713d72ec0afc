//! Benchmark half of tools/cluster/validate.py: runs one PCA → UMAP → HDBSCAN configuration on
//! tensor `X` of a safetensors file and prints the adjusted Rand index against tensor `labels`
//! and the wall time, as one JSON line.
//!
//! usage: validate FILE PCA_DIMS N_NEIGHBORS MIN_DIST N_COMPONENTS MIN_CLUSTER_SIZE MIN_SAMPLES SEED

use pstat_cluster::input::{load_labels, load_matrix};
use pstat_cluster::{Grid, adjusted_rand_index, run_grid};
use std::path::PathBuf;
use std::time::Instant;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Result<T, String> {
    args.get(i)
        .ok_or(format!("missing {name}"))?
        .parse()
        .map_err(|_| format!("bad {name}: {}", args[i]))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).ok_or("missing FILE")?);
    let grid = Grid {
        pca_dims: vec![arg(&args, 2, "PCA_DIMS")?],
        n_neighbors: vec![arg(&args, 3, "N_NEIGHBORS")?],
        min_dist: vec![arg(&args, 4, "MIN_DIST")?],
        n_components: vec![arg(&args, 5, "N_COMPONENTS")?],
        min_cluster_size: vec![arg(&args, 6, "MIN_CLUSTER_SIZE")?],
        min_samples: vec![arg(&args, 7, "MIN_SAMPLES")?],
    };
    let seed: u64 = arg(&args, 8, "SEED")?;
    let x = load_matrix(&path, "X").map_err(|e| e.to_string())?;
    let truth = load_labels(&path, "labels").map_err(|e| e.to_string())?;
    if truth.len() != x.rows() {
        return Err(format!("{} labels for {} points", truth.len(), x.rows()));
    }
    let start = Instant::now();
    let result = run_grid(&x, &grid, seed);
    let seconds = start.elapsed().as_secs_f64();
    let summary = serde_json_line(
        adjusted_rand_index(&truth, &result.labels),
        seconds,
        &result,
    );
    println!("{summary}");
    Ok(())
}

fn serde_json_line(ari: f64, seconds: f64, result: &pstat_cluster::GridResult) -> String {
    let noise = result.labels.iter().filter(|&&l| l < 0).count();
    format!(
        "{{\"ari\": {ari}, \"seconds\": {seconds}, \"n_clusters\": {}, \"noise\": {noise}}}",
        result.scores[0].n_clusters
    )
}
