//! UMAP's layout optimisation: SGD over graph edges with per-edge sampling schedules and negative
//! sampling, mirroring umap-learn's `optimize_layout_euclidean` (single-threaded, so a seed fixes
//! the result exactly).

use super::fuzzy::Graph;
use crate::matrix::Matrix;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

pub struct SgdParams {
    pub a: f64,
    pub b: f64,
    pub n_epochs: usize,
    pub negative_sample_rate: f64,
    pub initial_alpha: f64,
    pub repulsion_strength: f64,
}

fn clip(v: f64) -> f64 {
    v.clamp(-4.0, 4.0)
}

/// Edges whose weight is below max/n_epochs would never be sampled; umap-learn drops them and
/// samples the rest with period n_epochs·max/weight epochs.
fn epochs_per_sample(weights: &[f64], n_epochs: usize) -> Vec<f64> {
    let max = weights.iter().copied().fold(0.0_f64, f64::max);
    weights
        .iter()
        .map(|&w| {
            let w = if w < max / n_epochs as f64 { 0.0 } else { w };
            let samples = n_epochs as f64 * w / max;
            if samples > 0.0 {
                n_epochs as f64 / samples
            } else {
                -1.0
            }
        })
        .collect()
}

pub fn optimize_layout(
    embedding: &mut Matrix,
    graph: &Graph,
    params: &SgdParams,
    rng: &mut ChaCha8Rng,
) {
    let n = embedding.rows();
    let dim = embedding.cols();
    let (a, b) = (params.a, params.b);
    let per_sample = epochs_per_sample(&graph.weights, params.n_epochs);
    let per_negative: Vec<f64> = per_sample
        .iter()
        .map(|e| e / params.negative_sample_rate)
        .collect();
    let mut next_sample = per_sample.clone();
    let mut next_negative = per_negative.clone();
    let mut current = vec![0.0; dim];
    let mut other = vec![0.0; dim];
    for epoch in 0..params.n_epochs {
        let alpha = params.initial_alpha * (1.0 - epoch as f64 / params.n_epochs as f64);
        let epoch = epoch as f64;
        for e in 0..graph.heads.len() {
            if per_sample[e] <= 0.0 || next_sample[e] > epoch {
                continue;
            }
            let (j, k) = (graph.heads[e], graph.tails[e]);
            current.copy_from_slice(embedding.row(j));
            other.copy_from_slice(embedding.row(k));
            let dist2: f64 = current
                .iter()
                .zip(&other)
                .map(|(x, y)| (x - y) * (x - y))
                .sum();
            let attract = if dist2 > 0.0 {
                -2.0 * a * b * dist2.powf(b - 1.0) / (a * dist2.powf(b) + 1.0)
            } else {
                0.0
            };
            for d in 0..dim {
                let grad = clip(attract * (current[d] - other[d]));
                current[d] += grad * alpha;
                other[d] -= grad * alpha;
            }
            embedding.row_mut(k).copy_from_slice(&other);
            next_sample[e] += per_sample[e];

            let n_negative = ((epoch - next_negative[e]) / per_negative[e])
                .floor()
                .max(0.0) as usize;
            for _ in 0..n_negative {
                let k = rng.random_range(0..n);
                if k == j {
                    continue;
                }
                let neg = embedding.row(k);
                let dist2: f64 = current
                    .iter()
                    .zip(neg)
                    .map(|(x, y)| (x - y) * (x - y))
                    .sum();
                let repulse = if dist2 > 0.0 {
                    2.0 * params.repulsion_strength * b
                        / ((0.001 + dist2) * (a * dist2.powf(b) + 1.0))
                } else {
                    0.0
                };
                if repulse > 0.0 {
                    for d in 0..dim {
                        current[d] += clip(repulse * (current[d] - neg[d])) * alpha;
                    }
                }
            }
            embedding.row_mut(j).copy_from_slice(&current);
            next_negative[e] += n_negative as f64 * per_negative[e];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_periods_follow_weights() {
        let periods = epochs_per_sample(&[1.0, 0.5, 0.001], 200);
        assert_eq!(periods, vec![1.0, 2.0, -1.0]);
    }
}
