//! Seeded isotropic Gaussian mixtures: the ground truth for validating the pipeline.

use crate::matrix::Matrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// `clusters` equal-sized groups of `points / clusters` (rounded down) in `dims` dimensions:
/// centres N(0, separation²·I), points centre + N(0, I). Returns the matrix and true labels.
pub fn gaussian_mixture(
    points: usize,
    dims: usize,
    clusters: usize,
    separation: f64,
    seed: u64,
) -> (Matrix, Vec<i32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let clusters = clusters.max(1);
    let per = points / clusters;
    let centres: Vec<Vec<f64>> = (0..clusters)
        .map(|_| {
            (0..dims)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    separation * z
                })
                .collect()
        })
        .collect();
    let mut data = Vec::with_capacity(per * clusters * dims);
    let mut labels = Vec::with_capacity(per * clusters);
    for (c, centre) in centres.iter().enumerate() {
        for _ in 0..per {
            data.extend(centre.iter().map(|m| {
                m + {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    z
                }
            }));
            labels.push(c as i32);
        }
    }
    let x = Matrix::new(per * clusters, dims, data).expect("finite by construction");
    (x, labels)
}
