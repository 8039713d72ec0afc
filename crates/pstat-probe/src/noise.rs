//! The paper's probing Noise condition (Appendix B.1.4): Gaussian activation sequences with
//! no linguistic content, matched to the real activations' per-feature mean and standard
//! deviation and to their sequence-length distribution.

use crate::bags::Bags;
use crate::error::{Result, invalid};
use crate::standardize::feature_moments;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// n_noise = 0.10·|D|, the one definition shared with Table 1's counts.
pub use pstat_data::stats::noise_count;

/// `n` sequences; each takes the length of a uniformly drawn reference bag (so lengths follow
/// the empirical distribution) and fills every token with independent N(μ_j, σ_j²) features,
/// μ_j and σ_j the per-feature mean and population std over all reference tokens.
pub fn gaussian_noise_bags(n: usize, reference: &Bags, seed: u64) -> Result<Bags> {
    if reference.is_empty() {
        return invalid("noise: no reference bags to match");
    }
    let d = reference.dim();
    let (mean, std) = feature_moments(std::iter::once(reference.values()), d);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::new();
    let mut offsets = vec![0];
    for _ in 0..n {
        let len = reference.bag_len(rng.random_range(0..reference.len()));
        for _ in 0..len {
            for j in 0..d {
                let z: f64 = StandardNormal.sample(&mut rng);
                values.push((mean[j] + std[j] * z) as f32);
            }
        }
        offsets.push(values.len() / d);
    }
    Bags::new(d, values, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_matches_reference_moments_and_lengths() {
        // Reference: bags of lengths 3, 5 and 8 with features of distinct means and spreads,
        // and one constant feature.
        let d = 4;
        let lengths = [3usize, 5, 8];
        let mut values = Vec::new();
        let mut offsets = vec![0];
        let mut t = 0.0f32;
        for len in lengths {
            for _ in 0..len {
                t += 1.0;
                values.extend([
                    10.0 + (t * 0.7).sin() * 2.0,
                    -3.0 + (t * 1.3).cos() * 0.5,
                    7.0,
                    t * 0.1,
                ]);
            }
            offsets.push(values.len() / d);
        }
        let reference = Bags::new(d, values, offsets).unwrap();
        let (mean, std) = feature_moments(std::iter::once(reference.values()), d);

        let noise = gaussian_noise_bags(3000, &reference, 9).unwrap();
        assert_eq!(noise.len(), 3000);
        let mut seen = [0usize; 9];
        for i in 0..noise.len() {
            let len = noise.bag_len(i);
            assert!(lengths.contains(&len), "length {len}");
            seen[len] += 1;
        }
        // Each length is drawn with probability 1/3: 1000 ± ~3.3σ (σ ≈ 25.8).
        for len in lengths {
            assert!(
                (seen[len] as f64 - 1000.0).abs() < 90.0,
                "length {len} drawn {} times",
                seen[len]
            );
        }
        let (m, s) = feature_moments(std::iter::once(noise.values()), d);
        let n = noise.n_instances() as f64;
        for j in 0..d {
            // Sample mean within 5 standard errors; sample std within 5% (n ≈ 16k).
            assert!(
                (m[j] - mean[j]).abs() <= 5.0 * std[j] / n.sqrt() + 1e-5,
                "feature {j} mean {} vs {}",
                m[j],
                mean[j]
            );
            assert!(
                (s[j] - std[j]).abs() <= 0.05 * std[j] + 1e-6,
                "feature {j} std {} vs {}",
                s[j],
                std[j]
            );
        }
        assert_eq!(s[2], 0.0, "a constant feature stays constant");
        assert_eq!(
            gaussian_noise_bags(3000, &reference, 9).unwrap(),
            noise,
            "seeded"
        );
        assert!(gaussian_noise_bags(0, &reference, 9).unwrap().is_empty());
        assert_eq!(noise_count(1234), 123);
    }
}
