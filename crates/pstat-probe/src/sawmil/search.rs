//! Choosing sAwMIL's C: k-fold CV on average precision with the one-standard-error rule
//! (notes §4.9), with upstream's two leaks fixed: each fold's scaler is fit on that fold's
//! training bags only, and CV fits the same mean-embedding stage 1 as the final fit. A C whose
//! fit is degenerate on any fold (no direction: w = 0 optimal, or no support vector of a class)
//! is skipped, and named in the result, instead of being scored as a constant predictor.

use super::{PreparedBags, SawMilParams};
use crate::bags::TrainingSet;
use crate::error::{ProbeError, Result};
use crate::metrics::average_precision;
use crate::probe::TrainedProbe;
use crate::standardize::Standardizer;
use pstat_tables::Probe;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// One C value's cross-validation result.
#[derive(Debug, Clone)]
pub struct CvScore {
    /// The C value.
    pub c: f64,
    /// Average precision of each fold's held-out bags, in fold order.
    pub fold_ap: Vec<f64>,
    /// Mean of `fold_ap`.
    pub mean: f64,
    /// Population std of the fold scores / √folds.
    pub se: f64,
    /// Why this C was skipped: the first fold whose fit was degenerate, and the reason. Its
    /// `fold_ap`, `mean` and `se` are then meaningless (empty and NaN).
    pub degenerate: Option<String>,
}

/// The C search: every grid value's CV score and the value the one-SE rule chose.
#[derive(Debug, Clone)]
pub struct CSearch {
    /// One score per grid value, in grid order.
    pub scores: Vec<CvScore>,
    /// The chosen C (the one the final fit used; a C degenerate on the whole training set is
    /// marked in `scores` and the rule's next choice taken).
    pub chosen: f64,
}

impl CSearch {
    /// The C values skipped because their fit was degenerate, with the reason.
    pub fn skipped(&self) -> impl Iterator<Item = (f64, &str)> {
        self.scores
            .iter()
            .filter_map(|s| s.degenerate.as_deref().map(|why| (s.c, why)))
    }
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

/// One-SE rule over the C values that were not skipped: the first in grid order whose mean
/// beats (best mean − SE of the best); the best itself if none does (e.g. SE = 0). `None` when
/// every C was skipped.
pub fn one_se_choice(scores: &[CvScore]) -> Option<f64> {
    let usable: Vec<&CvScore> = scores.iter().filter(|s| s.degenerate.is_none()).collect();
    let best = usable
        .iter()
        .copied()
        .reduce(|b, s| if s.mean > b.mean { s } else { b })?;
    let threshold = best.mean - best.se;
    Some(
        usable
            .iter()
            .find(|s| s.mean > threshold)
            .map_or(best.c, |s| s.c),
    )
}

/// The 3 × 5 CV fits are independent and deterministic (each seeded from `params.seed`), so
/// they run in parallel over rayon's pool; the scores are gathered in (C, fold) order, so the
/// choice does not depend on scheduling.
pub fn search_c(set: &TrainingSet, params: &SawMilParams) -> Result<CSearch> {
    let folds = kfold(set.len(), params.cv_folds, params.seed);
    let parts: Vec<(TrainingSet, TrainingSet)> = folds
        .iter()
        .map(|(train_idx, test_idx)| (set.subset(train_idx), set.subset(test_idx)))
        .collect();
    for (j, (train, _)) in parts.iter().enumerate() {
        train.require_both_classes(&format!("C search fold {j} training bags"))?;
    }
    // Standardizing and capping a fold's bags is a fifth of a search's work when done one
    // fold after another.
    let cv_folds: Vec<CvFold> = parts
        .into_par_iter()
        .enumerate()
        .map(|(index, (train, held_out))| {
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
            CvFold {
                index,
                prepared,
                scaler,
                held_out,
            }
        })
        .collect();
    let aps = fold_results(&cv_folds, params)?;
    let scores: Vec<CvScore> = params
        .c_grid
        .iter()
        .zip(aps.chunks(folds.len()))
        .map(|(&c, results)| {
            let degenerate = results.iter().enumerate().find_map(|(j, r)| match r {
                FoldResult::Degenerate(why) => Some(format!("fold {j}: {why}")),
                FoldResult::Ap(_) => None,
            });
            let fold_ap: Vec<f64> = results
                .iter()
                .filter_map(|r| match r {
                    FoldResult::Ap(ap) => Some(*ap),
                    FoldResult::Degenerate(_) => None,
                })
                .collect();
            if degenerate.is_some() {
                return CvScore {
                    c,
                    fold_ap: Vec::new(),
                    mean: f64::NAN,
                    se: f64::NAN,
                    degenerate,
                };
            }
            let k = fold_ap.len() as f64;
            let mean = fold_ap.iter().sum::<f64>() / k;
            let std = (fold_ap.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / k).sqrt();
            CvScore {
                c,
                mean,
                se: std / k.sqrt(),
                fold_ap,
                degenerate: None,
            }
        })
        .collect();
    let Some(chosen) = one_se_choice(&scores) else {
        let reasons: Vec<String> = scores
            .iter()
            .map(|s| format!("C = {}: {}", s.c, s.degenerate.as_deref().unwrap_or("")))
            .collect();
        return Err(ProbeError::Degenerate(format!(
            "every C of the grid gives a degenerate fit ({})",
            reasons.join("; ")
        )));
    };
    Ok(CSearch { scores, chosen })
}

/// Every (C, fold) fit's result, in (C, fold) order. The fits take longer the larger C is
/// (the largest often as long as the three smallest together), so idle workers take the next
/// fit from a list ordered largest C first (`par_bridge` hands out a sequential iterator's
/// items in order): a slow fit started last would leave the other workers idle until it
/// ends. Which worker fits what changes no result.
fn fold_results(cv_folds: &[CvFold], params: &SawMilParams) -> Result<Vec<FoldResult>> {
    let mut tasks: Vec<(usize, usize)> = (0..params.c_grid.len())
        .flat_map(|ci| (0..cv_folds.len()).map(move |j| (ci, j)))
        .collect();
    tasks.sort_by_key(|&(ci, j)| (std::cmp::Reverse(params.c_grid[ci].to_bits()), j));
    let mut done: Vec<(usize, usize, Result<FoldResult>)> = tasks
        .into_iter()
        .par_bridge()
        .map(|(ci, j)| {
            (
                ci,
                j,
                cv_folds[j].average_precision(params.c_grid[ci], params),
            )
        })
        .collect();
    done.sort_by_key(|&(ci, j, _)| (ci, j));
    done.into_iter().map(|(_, _, result)| result).collect()
}

/// A fold's fit at one C: its held-out average precision, or why there is no fit.
enum FoldResult {
    Ap(f64),
    Degenerate(String),
}

/// One CV fold: its training bags prepared for fitting, their scaler, and the held-out bags.
struct CvFold {
    index: usize,
    prepared: PreparedBags,
    scaler: Standardizer,
    held_out: TrainingSet,
}

impl CvFold {
    /// Average precision on the held-out bags of a fit at `c`, or why the fit is degenerate.
    fn average_precision(&self, c: f64, params: &SawMilParams) -> Result<FoldResult> {
        let fit = match self.prepared.fit(c, params) {
            Ok(fit) => fit,
            Err(ProbeError::Degenerate(why)) => return Ok(FoldResult::Degenerate(why)),
            Err(e) => return Err(e),
        };
        let probe = TrainedProbe {
            kind: Probe::Sawmil,
            direction: fit.direction,
            bias: fit.bias,
            scaler: self.scaler.clone(),
            c: Some(c),
            eta: Some(self.prepared.eta),
            converged: Some(fit.converged),
        };
        let scores: Vec<f64> = probe
            .scores(&self.held_out.bags)
            .into_iter()
            .map(f64::from)
            .collect();
        average_precision(&scores, &self.held_out.labels)
            .map(FoldResult::Ap)
            .ok_or_else(|| {
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
            degenerate: None,
        };
        assert_eq!(
            one_se_choice(&[s(0.05, 0.80, 0.0), s(0.1, 0.86, 0.0), s(1.0, 0.90, 0.05)]),
            Some(0.1)
        );
        // SE = 0: nothing strictly beats the best mean minus 0 → the best.
        assert_eq!(
            one_se_choice(&[s(0.05, 0.80, 0.0), s(1.0, 0.90, 0.0)]),
            Some(1.0)
        );
        // A degenerate C is never chosen, however it would score.
        let skipped = CvScore {
            degenerate: Some("fold 0: w = 0".into()),
            ..s(0.05, 0.99, 0.0)
        };
        assert_eq!(
            one_se_choice(&[skipped.clone(), s(1.0, 0.90, 0.0)]),
            Some(1.0)
        );
        assert_eq!(one_se_choice(&[skipped]), None);
    }
}
