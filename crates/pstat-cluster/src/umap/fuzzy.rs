//! UMAP's fuzzy simplicial set: per-point smooth-kNN bandwidths (ρ, σ) and the symmetrised
//! membership graph (fuzzy union, set_op_mix_ratio = 1, local_connectivity = 1), following
//! umap-learn's `smooth_knn_dist` and `fuzzy_simplicial_set`.

use crate::knn::Neighbours;

const SMOOTH_K_TOLERANCE: f64 = 1e-5;
const MIN_K_DIST_SCALE: f64 = 1e-3;

/// An undirected weighted edge list; each unordered pair appears once per direction, as in
/// umap-learn's COO graph (both directions are optimised).
pub struct Graph {
    pub heads: Vec<usize>,
    pub tails: Vec<usize>,
    pub weights: Vec<f64>,
}

/// ρ_i (distance to the nearest non-identical neighbour) and σ_i such that
/// Σ_j exp(−max(0, d_ij − ρ_i)/σ_i) = log2(k) over the k−1 non-self neighbours.
fn smooth_knn_dist(nn: &Neighbours) -> (Vec<f64>, Vec<f64>) {
    let all_mean = {
        let (sum, count) = nn
            .distances
            .iter()
            .flatten()
            .fold((0.0, 0usize), |(s, c), &d| (s + d, c + 1));
        if count == 0 { 0.0 } else { sum / count as f64 }
    };
    let mut rhos = Vec::with_capacity(nn.distances.len());
    let mut sigmas = Vec::with_capacity(nn.distances.len());
    for dists in &nn.distances {
        let k = dists.len();
        let target = (k as f64).log2();
        let rho = dists.iter().copied().find(|&d| d > 0.0).unwrap_or(0.0);
        let (mut lo, mut hi, mut mid) = (0.0_f64, f64::INFINITY, 1.0_f64);
        for _ in 0..64 {
            let psum: f64 = dists[1..]
                .iter()
                .map(|&d| {
                    let gap = d - rho;
                    if gap > 0.0 { (-gap / mid).exp() } else { 1.0 }
                })
                .sum();
            if (psum - target).abs() < SMOOTH_K_TOLERANCE {
                break;
            }
            if psum > target {
                hi = mid;
                mid = (lo + hi) / 2.0;
            } else {
                lo = mid;
                mid = if hi.is_infinite() {
                    mid * 2.0
                } else {
                    (lo + hi) / 2.0
                };
            }
        }
        let own_mean = dists.iter().sum::<f64>() / k.max(1) as f64;
        let floor = if rho > 0.0 {
            MIN_K_DIST_SCALE * own_mean
        } else {
            MIN_K_DIST_SCALE * all_mean
        };
        rhos.push(rho);
        sigmas.push(mid.max(floor));
    }
    (rhos, sigmas)
}

/// The fuzzy union P + Pᵀ − P∘Pᵀ of the directed membership strengths.
pub fn fuzzy_simplicial_set(nn: &Neighbours) -> Graph {
    let n = nn.indices.len();
    let (rhos, sigmas) = smooth_knn_dist(nn);
    let mut directed: Vec<std::collections::BTreeMap<usize, f64>> = vec![Default::default(); n];
    for i in 0..n {
        for (&j, &d) in nn.indices[i].iter().zip(&nn.distances[i]) {
            if j == i {
                continue;
            }
            let gap = d - rhos[i];
            let w = if gap <= 0.0 || sigmas[i] == 0.0 {
                1.0
            } else {
                (-gap / sigmas[i]).exp()
            };
            directed[i].insert(j, w);
        }
    }
    let mut graph = Graph {
        heads: Vec::new(),
        tails: Vec::new(),
        weights: Vec::new(),
    };
    let mut union: Vec<std::collections::BTreeMap<usize, f64>> = vec![Default::default(); n];
    for i in 0..n {
        for (&j, &w) in &directed[i] {
            let back = directed[j].get(&i).copied().unwrap_or(0.0);
            let value = w + back - w * back;
            union[i].insert(j, value);
            union[j].insert(i, value);
        }
    }
    for (i, row) in union.iter().enumerate() {
        for (&j, &w) in row {
            if w > 0.0 {
                graph.heads.push(i);
                graph.tails.push(j);
                graph.weights.push(w);
            }
        }
    }
    graph
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn::exact_knn;
    use crate::matrix::Matrix;

    #[test]
    fn bandwidth_hits_log2_k_and_graph_is_symmetric() {
        let x = Matrix::new(6, 1, vec![0.0, 1.0, 2.5, 4.0, 7.0, 11.0]).unwrap();
        let nn = exact_knn(&x, 4);
        let (rhos, sigmas) = smooth_knn_dist(&nn);
        for i in 0..6 {
            let s: f64 = nn.distances[i][1..]
                .iter()
                .map(|d| {
                    if d - rhos[i] > 0.0 {
                        (-(d - rhos[i]) / sigmas[i]).exp()
                    } else {
                        1.0
                    }
                })
                .sum();
            assert!((s - 2.0).abs() < 1e-4, "point {i}: {s}");
        }
        let g = fuzzy_simplicial_set(&nn);
        for e in 0..g.heads.len() {
            let back = (0..g.heads.len())
                .find(|&f| g.heads[f] == g.tails[e] && g.tails[f] == g.heads[e])
                .expect("reverse edge");
            assert_eq!(g.weights[e], g.weights[back]);
            assert!(g.weights[e] > 0.0 && g.weights[e] <= 1.0);
        }
    }
}
