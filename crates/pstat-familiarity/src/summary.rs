//! Per-(model, domain, kind) means with seeded percentile-bootstrap 95% intervals: the values of
//! Tables A6–A8 (`familiarity.csv`) and of Fig. 2(d) (`distances.csv`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mean of `values` with a percentile bootstrap interval; `None` for an empty group.
pub fn mean_with_interval(values: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| values[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    if means.is_empty() {
        return Some((mean, mean, mean));
    }
    means.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (means.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        means[lo] + (means[hi] - means[lo]) * (pos - lo as f64)
    };
    Some((mean, at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_brackets_the_mean_and_is_seeded() {
        let values: Vec<f64> = (0..50).map(|i| i as f64 / 50.0).collect();
        let (m, lo, hi) = mean_with_interval(&values, 500, 3).unwrap();
        assert!((m - 0.49).abs() < 1e-12 && lo < m && m < hi);
        assert_eq!(mean_with_interval(&values, 500, 3), Some((m, lo, hi)));
        assert_eq!(mean_with_interval(&[], 10, 3), None);
    }
}
