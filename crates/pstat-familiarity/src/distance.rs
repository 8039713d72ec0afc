//! Fig. 2(d): within-group pairwise Euclidean distances of veracity-layer representations, per
//! statement kind. The representation is each statement's last token at the veracity layer,
//! standardized with the mean and population std over all statements of the domain, so no
//! feature's scale dominates. Large groups are subsampled: `pairs` random distinct pairs per
//! kind, drawn with a seed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Standardize rows (each `dim` wide) in place with their own per-feature mean and std.
pub fn standardize(rows: &mut [Vec<f32>]) {
    let Some(dim) = rows.first().map(|r| r.len()) else {
        return;
    };
    let n = rows.len() as f64;
    for j in 0..dim {
        let mean = rows.iter().map(|r| r[j] as f64).sum::<f64>() / n;
        let var = rows
            .iter()
            .map(|r| (r[j] as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let scale = if var > 0.0 { var.sqrt() } else { 1.0 };
        for r in rows.iter_mut() {
            r[j] = ((r[j] as f64 - mean) / scale) as f32;
        }
    }
}

fn euclidean(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y) as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// Distances of up to `pairs` distinct random pairs among `group` (all pairs when there are
/// fewer). Empty when the group has fewer than two members.
pub fn pairwise_distances(group: &[&[f32]], pairs: usize, seed: u64) -> Vec<f64> {
    let n = group.len();
    if n < 2 {
        return Vec::new();
    }
    let total = n * (n - 1) / 2;
    if total <= pairs {
        return (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .map(|(i, j)| euclidean(group[i], group[j]))
            .collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..pairs)
        .map(|_| {
            let i = rng.random_range(0..n);
            let mut j = rng.random_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            euclidean(group[i], group[j])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_pairs_when_few_and_seeded_sample_when_many() {
        let rows = [[0.0f32, 0.0], [3.0, 4.0], [0.0, 8.0]];
        let group: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        let mut d = pairwise_distances(&group, 10, 1);
        d.sort_by(f64::total_cmp);
        assert_eq!(d, vec![5.0, 5.0, 8.0]);
        let sampled = pairwise_distances(&group, 2, 1);
        assert_eq!(sampled.len(), 2);
        assert_eq!(sampled, pairwise_distances(&group, 2, 1));
        assert!(pairwise_distances(&group[..1], 5, 1).is_empty());
    }

    #[test]
    fn standardize_gives_zero_mean_unit_variance() {
        let mut rows = vec![vec![1.0f32, 5.0], vec![3.0, 5.0]];
        standardize(&mut rows);
        assert_eq!(rows, vec![vec![-1.0, 0.0], vec![1.0, 0.0]]);
    }
}
