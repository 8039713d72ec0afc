//! UMAP (McInnes et al. 2018) for small point sets: exact kNN, fuzzy simplicial set, PCA
//! initialisation and SGD layout, with umap-learn's defaults (spread 1, 5 negative samples per
//! edge, learning rate 1, 500 epochs below 10 000 points). Differs from umap-learn's default in
//! the initialisation only: PCA (umap-learn `init="pca"`) instead of a spectral layout.

mod curve;
mod fuzzy;
mod sgd;

use crate::knn::exact_knn;
use crate::matrix::Matrix;
use crate::pca::pca_scores;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

/// UMAP's hyperparameters (the rest are umap-learn's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UmapParams {
    /// Size of each point's neighbourhood in the kNN graph (at least 2 is used; clamped to the
    /// point count).
    pub n_neighbors: usize,
    /// Smallest distance between embedded points (umap-learn's `min_dist`).
    pub min_dist: f64,
    /// Dimensions of the embedding (at least 1 is used).
    pub n_components: usize,
}

/// Embeds the rows of `x` into `params.n_components` dimensions. Deterministic for a given seed.
/// Fewer than 2 points yield an all-zero embedding; `n_neighbors` is clamped to the point count.
pub fn umap_embed(x: &Matrix, params: &UmapParams, seed: u64) -> Matrix {
    let n = x.rows();
    let dim = params.n_components.max(1);
    if n < 2 {
        return Matrix::zeros(n, dim);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut embedding = pca_initialisation(x, dim, seed, &mut rng);
    let neighbours = exact_knn(x, params.n_neighbors.max(2));
    let graph = fuzzy::fuzzy_simplicial_set(&neighbours);
    if graph.weights.is_empty() {
        return embedding;
    }
    let (a, b) = curve::find_ab_params(1.0, params.min_dist);
    let sgd_params = sgd::SgdParams {
        a,
        b,
        n_epochs: if n <= 10_000 { 500 } else { 200 },
        negative_sample_rate: 5.0,
        initial_alpha: 1.0,
        repulsion_strength: 1.0,
    };
    sgd::optimize_layout(&mut embedding, &graph, &sgd_params, &mut rng);
    embedding
}

/// umap-learn's `init="pca"`: PCA scores scaled to max |coordinate| 10, jittered with N(0, 1e-4),
/// then every axis rescaled to [0, 10]. Missing axes (fewer input dims than components) start as
/// pure jitter.
fn pca_initialisation(x: &Matrix, dim: usize, seed: u64, rng: &mut ChaCha8Rng) -> Matrix {
    let scores = pca_scores(x, dim, seed);
    let n = x.rows();
    let max_abs = (0..n)
        .flat_map(|i| scores.row(i).iter().map(|v| v.abs()).collect::<Vec<_>>())
        .fold(0.0_f64, f64::max);
    let expansion = if max_abs > 0.0 { 10.0 / max_abs } else { 0.0 };
    let jitter = Normal::new(0.0, 1e-4).expect("valid normal");
    let mut init = Matrix::zeros(n, dim);
    for i in 0..n {
        for c in 0..dim {
            let base = if c < scores.cols() {
                scores.get(i, c) * expansion
            } else {
                0.0
            };
            init.set(i, c, base + jitter.sample(rng));
        }
    }
    for c in 0..dim {
        let column: Vec<f64> = (0..n).map(|i| init.get(i, c)).collect();
        let lo = column.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = column.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let range = hi - lo;
        for (i, v) in column.iter().enumerate() {
            init.set(
                i,
                c,
                if range > 0.0 {
                    10.0 * (v - lo) / range
                } else {
                    0.0
                },
            );
        }
    }
    init
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_degenerate_safe() {
        let data: Vec<f64> = (0..40)
            .map(|i| ((i * 7919) % 13) as f64 + if i < 20 { 0.0 } else { 50.0 })
            .collect();
        let x = Matrix::new(20, 2, data).unwrap();
        let p = UmapParams {
            n_neighbors: 5,
            min_dist: 0.1,
            n_components: 2,
        };
        let first = umap_embed(&x, &p, 7);
        assert_eq!(first, umap_embed(&x, &p, 7));
        assert!(first.to_f32().iter().all(|v| v.is_finite()));
        assert_eq!(umap_embed(&Matrix::zeros(0, 3), &p, 1).rows(), 0);
        assert_eq!(umap_embed(&Matrix::zeros(1, 3), &p, 1).rows(), 1);
        let same = umap_embed(
            &Matrix::zeros(4, 3),
            &UmapParams {
                n_neighbors: 30,
                ..p
            },
            1,
        );
        assert!(same.to_f32().iter().all(|v| v.is_finite()));
    }
}
