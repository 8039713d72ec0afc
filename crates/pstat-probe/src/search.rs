//! Choosing sAwMIL's C: k-fold CV on average precision with the one-standard-error rule
//! (notes §4.9), with upstream's two leaks fixed: each fold's scaler is fit on that fold's
//! training bags only, and CV fits the same mean-embedding stage 1 as the final fit.

use crate::bags::TrainingSet;
use crate::error::{ProbeError, Result};
use crate::metrics::average_precision;
use crate::probe::{ProbeKind, TrainedProbe};
use crate::sawmil::{PreparedBags, SawMilParams};
use crate::standardize::Standardizer;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

#[derive(Debug, Clone)]
pub struct CvScore {
    pub c: f64,
    pub fold_ap: Vec<f64>,
    pub mean: f64,
    /// Population std of the fold scores / √folds.
    pub se: f64,
}

#[derive(Debug, Clone)]
pub struct CSearch {
    pub scores: Vec<CvScore>,
    pub chosen: f64,
}

/// KFold(shuffle=True) folds: a seeded permutation cut into `k` contiguous parts, the first
/// n mod k parts one longer; returns (train, held-out) index lists, each ascending.
pub fn kfold(n: usize, k: usize, seed: u64) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut start = 0;
    (0..k)
        .map(|j| {
            let len = n / k + usize::from(j < n % k);
            let mut test = perm[start..start + len].to_vec();
            start += len;
            test.sort_unstable();
            let train = (0..n).filter(|i| test.binary_search(i).is_err()).collect();
            (train, test)
        })
        .collect()
}

/// One-SE rule: the first C in grid order whose mean beats (best mean − SE of the best);
/// the best itself if none does (e.g. SE = 0).
pub fn one_se_choice(scores: &[CvScore]) -> f64 {
    let best = scores
        .iter()
        .enumerate()
        .fold(0, |b, (i, s)| if s.mean > scores[b].mean { i } else { b });
    let threshold = scores[best].mean - scores[best].se;
    scores
        .iter()
        .find(|s| s.mean > threshold)
        .map_or(scores[best].c, |s| s.c)
}

/// The 3 × 5 CV fits are independent and deterministic (each seeded from `params.seed`), so
/// they run in parallel over rayon's pool; the scores are gathered in (C, fold) order, so the
/// choice does not depend on scheduling.
pub fn search_c(set: &TrainingSet, params: &SawMilParams) -> Result<CSearch> {
    let folds = kfold(set.len(), params.cv_folds, params.seed);
    let mut cv_folds = Vec::with_capacity(folds.len());
    for (j, (train_idx, test_idx)) in folds.iter().enumerate() {
        let train = set.subset(train_idx);
        let held_out = set.subset(test_idx);
        train.require_both_classes(&format!("C search fold {j} training bags"))?;
        let scaler = Standardizer::fit(
            (0..train.len()).map(|i| train.bags.bag(i)),
            train.bags.dim(),
        );
        let prepared = PreparedBags::new(
            &train,
            &scaler,
            params.max_bag_size,
            params.cv_bag_limit,
            params.seed,
        );
        cv_folds.push(CvFold {
            index: j,
            prepared,
            scaler,
            held_out,
        });
    }
    let tasks: Vec<(usize, usize)> = (0..params.c_grid.len())
        .flat_map(|ci| (0..cv_folds.len()).map(move |j| (ci, j)))
        .collect();
    let aps: Vec<f64> = tasks
        .par_iter()
        .map(|&(ci, j)| cv_folds[j].average_precision(params.c_grid[ci], params))
        .collect::<Result<_>>()?;
    let fold_ap: Vec<Vec<f64>> = aps.chunks(folds.len()).map(<[f64]>::to_vec).collect();
    let scores: Vec<CvScore> = params
        .c_grid
        .iter()
        .zip(fold_ap)
        .map(|(&c, fold_ap)| {
            let k = fold_ap.len() as f64;
            let mean = fold_ap.iter().sum::<f64>() / k;
            let std = (fold_ap.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / k).sqrt();
            CvScore {
                c,
                mean,
                se: std / k.sqrt(),
                fold_ap,
            }
        })
        .collect();
    let chosen = one_se_choice(&scores);
    Ok(CSearch { scores, chosen })
}

/// One CV fold: its training bags prepared for fitting, their scaler, and the held-out bags.
struct CvFold {
    index: usize,
    prepared: PreparedBags,
    scaler: Standardizer,
    held_out: TrainingSet,
}

impl CvFold {
    /// Average precision on the held-out bags of a fit at `c`. A degenerate fit (w = 0) scores
    /// every bag the same; its AP is the prevalence.
    fn average_precision(&self, c: f64, params: &SawMilParams) -> Result<f64> {
        let scores: Vec<f64> = match self.prepared.fit(c, params) {
            Ok(fit) => {
                let probe = TrainedProbe {
                    kind: ProbeKind::SawMil,
                    direction: fit.direction,
                    bias: fit.bias,
                    scaler: self.scaler.clone(),
                    c: Some(c),
                    eta: Some(self.prepared.eta),
                };
                probe
                    .scores(&self.held_out.bags)
                    .into_iter()
                    .map(f64::from)
                    .collect()
            }
            Err(ProbeError::Degenerate(_)) => vec![0.0; self.held_out.len()],
            Err(e) => return Err(e),
        };
        average_precision(&scores, &self.held_out.labels).ok_or_else(|| {
            ProbeError::Invalid(format!(
                "C search fold {}: no positive bags held out",
                self.index
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kfold_partitions_like_sklearn_sizes() {
        let folds = kfold(10, 3, 42);
        let sizes: Vec<usize> = folds.iter().map(|f| f.1.len()).collect();
        assert_eq!(sizes, vec![4, 3, 3]);
        let mut all: Vec<usize> = folds.iter().flat_map(|f| f.1.clone()).collect();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        for (train, test) in &folds {
            assert_eq!(train.len() + test.len(), 10);
            assert!(train.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn one_se_prefers_first_c_within_one_se() {
        let s = |c, mean, se| CvScore {
            c,
            fold_ap: vec![],
            mean,
            se,
        };
        assert_eq!(
            one_se_choice(&[s(0.05, 0.80, 0.0), s(0.1, 0.86, 0.0), s(1.0, 0.90, 0.05)]),
            0.1
        );
        // SE = 0: nothing strictly beats the best mean minus 0 → the best.
        assert_eq!(one_se_choice(&[s(0.05, 0.80, 0.0), s(1.0, 0.90, 0.0)]), 1.0);
    }
}
