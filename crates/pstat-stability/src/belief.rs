//! Belief sets under Θ0 and Θ on the held-out True statements, and the retraction and
//! expansion rates between them with their seeded bootstrap intervals (Section 3.3).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Per-statement judgment g(s, Θ): `true` = judged True, `false` = Not True.
pub type Judgments = HashMap<String, bool>;

/// Why belief sets could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum StabilityError {
    /// A held-out statement has no judgment under one of the two conditions.
    #[error("no {which} judgment for held-out statement `{id}`")]
    MissingJudgment {
        /// `baseline` or `perturbed`.
        which: &'static str,
        /// The statement's id.
        id: String,
    },
    /// There is nothing to compare on.
    #[error("no held-out True statements to evaluate")]
    NoHeldOut,
    /// A paired test was asked of comparisons over different statements or baselines.
    #[error("the two perturbations were not judged on the same held-out statements and baseline")]
    NotPaired,
    /// B_true(Θ0) is empty, so ρ_R is undefined.
    #[error("no held-out statement is believed at baseline: retraction rates are undefined")]
    NoBaselineTrue,
    /// The bootstrap's settings cannot be used.
    #[error("invalid bootstrap: {0}")]
    InvalidBootstrap(String),
}

/// A rate with its bootstrap interval; `None` where the denominator is empty.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Rate {
    /// The rate.
    pub value: Option<f64>,
    /// Lower end of its 95% percentile bootstrap interval.
    pub lo: Option<f64>,
    /// Upper end of that interval.
    pub hi: Option<f64>,
}

/// A seeded percentile bootstrap over the held-out statements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Resamples drawn.
    pub resamples: usize,
    /// Seed of the resampling.
    pub seed: u64,
}

impl Bootstrap {
    /// A bootstrap of `resamples` draws; zero resamples would leave every interval empty.
    pub fn new(resamples: usize, seed: u64) -> Result<Self, StabilityError> {
        let bootstrap = Bootstrap { resamples, seed };
        bootstrap.validate()?;
        Ok(bootstrap)
    }

    /// Check the settings (for a config validated before any work starts).
    pub fn validate(&self) -> Result<(), StabilityError> {
        if self.resamples == 0 {
            return Err(StabilityError::InvalidBootstrap(
                "bootstrap_resamples must be at least 1 (0 leaves every interval empty)".into(),
            ));
        }
        if self.resamples > MAX_RESAMPLES {
            return Err(StabilityError::InvalidBootstrap(format!(
                "bootstrap_resamples = {} is more than {MAX_RESAMPLES}: every comparison holds each resample's rate in memory",
                self.resamples
            )));
        }
        Ok(())
    }
}

/// The most resamples a run may ask for: 8 MB per comparison's rates, and a smallest
/// attainable p of 10⁻⁶, far below any family's threshold.
pub const MAX_RESAMPLES: usize = 1_000_000;

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 1000,
            seed: 42,
        }
    }
}

/// Baseline and perturbed belief sets over the same held-out True statements.
/// The judgments of Θ0 and Θ lined up on the held-out True statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeliefComparison {
    /// Held-out True statement ids, in evaluation order.
    pub held_out: Vec<String>,
    /// g(s, Θ0) for each held-out statement (same order).
    pub baseline: Vec<bool>,
    /// g(s, Θ) for each held-out statement (same order).
    pub perturbed: Vec<bool>,
}

/// Line up the judgments of Θ0 and Θ on the held-out True statements. Every held-out
/// statement must have both judgments: a silently missing one would bias the rates.
pub fn compare(
    held_out_true: &[String],
    baseline: &Judgments,
    perturbed: &Judgments,
) -> Result<BeliefComparison, StabilityError> {
    if held_out_true.is_empty() {
        return Err(StabilityError::NoHeldOut);
    }
    let get = |j: &Judgments, which: &'static str, id: &String| {
        j.get(id)
            .copied()
            .ok_or_else(|| StabilityError::MissingJudgment {
                which,
                id: id.clone(),
            })
    };
    Ok(BeliefComparison {
        held_out: held_out_true.to_vec(),
        baseline: held_out_true
            .iter()
            .map(|id| get(baseline, "baseline", id))
            .collect::<Result<_, _>>()?,
        perturbed: held_out_true
            .iter()
            .map(|id| get(perturbed, "perturbed", id))
            .collect::<Result<_, _>>()?,
    })
}

/// Counts over a multiset of held-out indices (the whole set, or a bootstrap resample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    baseline_true: usize,
    baseline_not_true: usize,
    retractions: usize,
    expansions: usize,
}

impl Tally {
    fn add(&mut self, baseline: bool, perturbed: bool) {
        match (baseline, perturbed) {
            (true, true) => self.baseline_true += 1,
            (true, false) => {
                self.baseline_true += 1;
                self.retractions += 1
            }
            (false, true) => {
                self.baseline_not_true += 1;
                self.expansions += 1
            }
            (false, false) => self.baseline_not_true += 1,
        }
    }

    fn retraction_rate(&self) -> Option<f64> {
        ratio(self.retractions, self.baseline_true)
    }

    fn expansion_rate(&self) -> Option<f64> {
        ratio(self.expansions, self.baseline_not_true)
    }
}

fn ratio(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

impl BeliefComparison {
    fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for (b, p) in self.baseline.iter().zip(&self.perturbed) {
            t.add(*b, *p);
        }
        t
    }

    /// Ids of R = B_true(Θ0) \ B_true(Θ).
    pub fn retractions(&self) -> Vec<&str> {
        self.ids_where(|b, p| b && !p)
    }

    /// Ids of E = B_true(Θ) \ B_true(Θ0).
    pub fn expansions(&self) -> Vec<&str> {
        self.ids_where(|b, p| !b && p)
    }

    fn ids_where(&self, keep: impl Fn(bool, bool) -> bool) -> Vec<&str> {
        self.held_out
            .iter()
            .zip(self.baseline.iter().zip(&self.perturbed))
            .filter(|(_, (b, p))| keep(**b, **p))
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// |B_true(Θ0)|.
    pub fn n_baseline_true(&self) -> usize {
        self.tally().baseline_true
    }

    /// |B_not_true(Θ0)|.
    pub fn n_baseline_not_true(&self) -> usize {
        self.tally().baseline_not_true
    }

    /// ρ_R and ρ_E with percentile bootstrap intervals (2.5%, 97.5%) over resamples of the
    /// held-out statements; resamples with an empty denominator are left out of the interval.
    pub fn rates(&self, bootstrap: Bootstrap) -> (Rate, Rate) {
        let full = self.tally();
        let mut rng = ChaCha8Rng::seed_from_u64(bootstrap.seed);
        let n = self.held_out.len();
        let mut retraction = Vec::with_capacity(bootstrap.resamples);
        let mut expansion = Vec::with_capacity(bootstrap.resamples);
        for _ in 0..bootstrap.resamples {
            let mut t = Tally::default();
            for _ in 0..n {
                let i = rng.random_range(0..n);
                t.add(self.baseline[i], self.perturbed[i]);
            }
            retraction.extend(t.retraction_rate());
            expansion.extend(t.expansion_rate());
        }
        (
            with_interval(full.retraction_rate(), retraction),
            with_interval(full.expansion_rate(), expansion),
        )
    }
}

pub(crate) fn with_interval(value: Option<f64>, mut samples: Vec<f64>) -> Rate {
    if value.is_none() || samples.is_empty() {
        return Rate {
            value,
            lo: None,
            hi: None,
        };
    }
    samples.sort_by(f64::total_cmp);
    Rate {
        value,
        lo: Some(percentile(&samples, 0.025)),
        hi: Some(percentile(&samples, 0.975)),
    }
}

/// Linear-interpolation percentile of sorted samples (numpy's default method).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judgments(pairs: &[(&str, bool)]) -> Judgments {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn hand_computed_retractions_and_expansions() {
        // s1..s4 believed at baseline, s5..s6 not. Under Θ: s2, s3 retracted; s6 expanded.
        let ids: Vec<String> = (1..=6).map(|i| format!("s{i}")).collect();
        let base = judgments(&[
            ("s1", true),
            ("s2", true),
            ("s3", true),
            ("s4", true),
            ("s5", false),
            ("s6", false),
        ]);
        let pert = judgments(&[
            ("s1", true),
            ("s2", false),
            ("s3", false),
            ("s4", true),
            ("s5", false),
            ("s6", true),
        ]);
        let cmp = compare(&ids, &base, &pert).unwrap();
        assert_eq!(cmp.retractions(), ["s2", "s3"]);
        assert_eq!(cmp.expansions(), ["s6"]);
        assert_eq!((cmp.n_baseline_true(), cmp.n_baseline_not_true()), (4, 2));
        let (r, e) = cmp.rates(Bootstrap::default());
        assert_eq!(r.value, Some(0.5));
        assert_eq!(e.value, Some(0.5));
        let (lo, hi) = (r.lo.unwrap(), r.hi.unwrap());
        assert!(lo <= 0.5 && 0.5 <= hi && lo >= 0.0 && hi <= 1.0);
        assert_eq!(
            cmp.rates(Bootstrap::default()),
            (r, e),
            "seeded bootstrap is deterministic"
        );
    }

    #[test]
    fn empty_denominator_is_undefined_not_zero() {
        let ids = vec!["a".to_string(), "b".to_string()];
        let all_true = judgments(&[("a", true), ("b", true)]);
        let cmp = compare(&ids, &all_true, &all_true).unwrap();
        let (r, e) = cmp.rates(Bootstrap::default());
        assert_eq!(r.value, Some(0.0));
        assert_eq!(
            e,
            Rate::default(),
            "no baseline Not True statements: ρ_E undefined"
        );
    }

    #[test]
    fn zero_resamples_are_refused() {
        let err = Bootstrap::new(0, 42).unwrap_err();
        assert!(
            err.to_string()
                .contains("bootstrap_resamples must be at least 1")
        );
        assert!(matches!(err, StabilityError::InvalidBootstrap(_)));
        assert_eq!(Bootstrap::new(1000, 42).unwrap(), Bootstrap::default());
    }

    #[test]
    fn missing_judgment_is_an_error() {
        let ids = vec!["a".to_string()];
        let err = compare(&ids, &judgments(&[("a", true)]), &Judgments::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("perturbed judgment for held-out statement `a`")
        );
        assert!(matches!(
            compare(&[], &Judgments::new(), &Judgments::new()),
            Err(StabilityError::NoHeldOut)
        ));
    }
}
