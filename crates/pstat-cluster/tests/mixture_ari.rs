//! End-to-end check of PCA → UMAP → HDBSCAN on a seeded Gaussian mixture with known labels.

use pstat_cluster::mixture::gaussian_mixture;
use pstat_cluster::{
    Grid, HdbscanParams, PipelineConfig, UmapParams, adjusted_rand_index, run_grid,
};

#[test]
fn recovers_mixture_labels() {
    let (x, truth) = gaussian_mixture(300, 100, 4, 1.0, 11);
    let config = PipelineConfig {
        pca_dims: 10,
        umap: UmapParams {
            n_neighbors: 15,
            min_dist: 0.0,
            n_components: 2,
        },
        hdbscan: HdbscanParams {
            min_cluster_size: 10,
            min_samples: 5,
        },
    };
    let grid = Grid {
        pca_dims: vec![config.pca_dims],
        n_neighbors: vec![config.umap.n_neighbors],
        min_dist: vec![config.umap.min_dist],
        n_components: vec![config.umap.n_components],
        min_cluster_size: vec![config.hdbscan.min_cluster_size],
        min_samples: vec![config.hdbscan.min_samples],
    };
    let result = run_grid(&x, &grid, 42);
    let ari = adjusted_rand_index(&truth, &result.labels);
    assert!(ari > 0.95, "ARI {ari}, labels {:?}", result.labels);
    assert_eq!(result.scores.len(), 1);
    assert_eq!(result.embedding_2d.len(), 300);
}
