//! Beyond the paper: whether two instantiations of one Θ retract the *same* statements.
//!
//! The paper compares instantiations only through their rates. Here the retraction sets of
//! two instantiations (representational, behavioral, contextual) of the same (model, domain,
//! Θ) are compared statement by statement over the held-out True statements both judged:
//! Jaccard overlap |R_a ∩ R_b| / |R_a ∪ R_b| and Cohen's κ of the two "retracted" indicators,
//! each with a seeded percentile bootstrap interval over the statements.

use crate::belief::{BeliefComparison, Bootstrap, Rate, StabilityError, with_interval};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Statement-level agreement of two retraction sets over the same held-out statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Held-out True statements both instantiations judged.
    pub n: usize,
    /// |R_a|.
    pub retracted_a: usize,
    /// |R_b|.
    pub retracted_b: usize,
    /// |R_a ∩ R_b|.
    pub retracted_both: usize,
    /// |R_a ∩ R_b| / |R_a ∪ R_b|; undefined when neither retracts anything.
    pub jaccard: Rate,
    /// Cohen's κ of the two indicators "retracted"; undefined when chance agreement is 1
    /// (both indicators constant and equal), where κ is 0/0.
    pub kappa: Rate,
}

/// Counts of the four cells of the 2×2 table of "retracted under a" × "retracted under b".
#[derive(Debug, Clone, Copy, Default)]
struct Cells {
    both: usize,
    only_a: usize,
    only_b: usize,
    neither: usize,
}

impl Cells {
    fn add(&mut self, a: bool, b: bool) {
        match (a, b) {
            (true, true) => self.both += 1,
            (true, false) => self.only_a += 1,
            (false, true) => self.only_b += 1,
            (false, false) => self.neither += 1,
        }
    }

    fn jaccard(&self) -> Option<f64> {
        let union = self.both + self.only_a + self.only_b;
        (union > 0).then(|| self.both as f64 / union as f64)
    }

    /// κ = (p_o − p_e) / (1 − p_e), computed from the counts as
    /// 2(ad − bc) / ((a + b)(b + d) + (a + c)(c + d)) in integers, so that independent
    /// indicators give exactly 0 rather than a rounding residue.
    fn kappa(&self) -> Option<f64> {
        let (a, b, c, d) = (
            self.both as i128,
            self.only_a as i128,
            self.only_b as i128,
            self.neither as i128,
        );
        let denominator = (a + b) * (b + d) + (a + c) * (c + d);
        (denominator > 0).then(|| (2 * (a * d - b * c)) as f64 / denominator as f64)
    }
}

/// Whether each held-out statement is in R = B_true(Θ0) \ B_true(Θ).
fn retracted(c: &BeliefComparison) -> impl Iterator<Item = bool> + '_ {
    c.baseline.iter().zip(&c.perturbed).map(|(b, p)| *b && !*p)
}

/// Agreement of the retraction sets of two instantiations judged on the same held-out
/// statements in the same order (anything else is [`StabilityError::NotPaired`]).
pub fn retraction_agreement(
    a: &BeliefComparison,
    b: &BeliefComparison,
    bootstrap: Bootstrap,
) -> Result<Agreement, StabilityError> {
    if a.held_out != b.held_out {
        return Err(StabilityError::NotPaired);
    }
    if a.held_out.is_empty() {
        return Err(StabilityError::NoHeldOut);
    }
    let pairs: Vec<(bool, bool)> = retracted(a).zip(retracted(b)).collect();
    let mut full = Cells::default();
    for &(x, y) in &pairs {
        full.add(x, y);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(bootstrap.seed);
    let (mut jaccards, mut kappas) = (Vec::new(), Vec::new());
    for _ in 0..bootstrap.resamples {
        let mut cells = Cells::default();
        for _ in 0..pairs.len() {
            let (x, y) = pairs[rng.random_range(0..pairs.len())];
            cells.add(x, y);
        }
        jaccards.extend(cells.jaccard());
        kappas.extend(cells.kappa());
    }
    Ok(Agreement {
        n: pairs.len(),
        retracted_a: full.both + full.only_a,
        retracted_b: full.both + full.only_b,
        retracted_both: full.both,
        jaccard: with_interval(full.jaccard(), jaccards),
        kappa: with_interval(full.kappa(), kappas),
    })
}

/// Ids of the statements every comparison retracts, in held-out order (empty when the
/// comparisons are not over the same held-out statements).
pub fn retracted_by_all<'a>(comparisons: &[&'a BeliefComparison]) -> Vec<&'a str> {
    let Some(first) = comparisons.first() else {
        return Vec::new();
    };
    if comparisons.iter().any(|c| c.held_out != first.held_out) {
        return Vec::new();
    }
    let indicators: Vec<Vec<bool>> = comparisons.iter().map(|c| retracted(c).collect()).collect();
    first
        .held_out
        .iter()
        .enumerate()
        .filter(|(i, _)| indicators.iter().all(|r| r[*i]))
        .map(|(_, id)| id.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten held-out statements, all believed at baseline; `retracted` lists the indices
    /// judged Not True under Θ.
    fn comparison(retracted: &[usize]) -> BeliefComparison {
        BeliefComparison {
            held_out: (0..10).map(|i| format!("s{i}")).collect(),
            baseline: vec![true; 10],
            perturbed: (0..10).map(|i| !retracted.contains(&i)).collect(),
        }
    }

    #[test]
    fn jaccard_and_kappa_match_a_hand_computation() {
        // R_a = {1, 2, 3}, R_b = {2, 3, 4} of 10: both 2, union 4, so J = 0.5.
        // Observed agreement (2 + 6) / 10 = 0.8; chance 0.3·0.3 + 0.7·0.7 = 0.58;
        // κ = (0.8 − 0.58) / (1 − 0.58) = 0.22 / 0.42.
        let a = comparison(&[1, 2, 3]);
        let b = comparison(&[2, 3, 4]);
        let agreement = retraction_agreement(&a, &b, Bootstrap::default()).unwrap();
        assert_eq!(
            (agreement.n, agreement.retracted_a, agreement.retracted_b),
            (10, 3, 3)
        );
        assert_eq!(agreement.retracted_both, 2);
        assert_eq!(agreement.jaccard.value, Some(0.5));
        let kappa = agreement.kappa.value.unwrap();
        assert!((kappa - 0.22 / 0.42).abs() < 1e-12, "κ = {kappa}");
        let (lo, hi) = (agreement.kappa.lo.unwrap(), agreement.kappa.hi.unwrap());
        assert!(lo <= kappa && kappa <= hi && (-1.0..=1.0).contains(&lo) && hi <= 1.0);
        assert_eq!(
            retraction_agreement(&a, &b, Bootstrap::default()).unwrap(),
            agreement,
            "seeded bootstrap is deterministic"
        );
        assert_eq!(retracted_by_all(&[&a, &b]), ["s2", "s3"]);
        assert_eq!(retracted_by_all(&[&a, &b, &comparison(&[3])]), ["s3"]);
    }

    #[test]
    fn a_statement_not_believed_at_baseline_is_never_retracted() {
        let mut a = comparison(&[1]);
        a.baseline[1] = false;
        let agreement = retraction_agreement(&a, &comparison(&[1]), Bootstrap::default()).unwrap();
        assert_eq!((agreement.retracted_a, agreement.retracted_both), (0, 0));
        assert_eq!(agreement.jaccard.value, Some(0.0));
    }

    #[test]
    fn nothing_retracted_leaves_both_statistics_undefined() {
        let none = comparison(&[]);
        let agreement = retraction_agreement(&none, &none, Bootstrap::default()).unwrap();
        assert_eq!(agreement.jaccard, Rate::default());
        assert_eq!(agreement.kappa, Rate::default());
    }

    #[test]
    fn one_side_retracting_nothing_gives_a_kappa_of_exactly_zero() {
        // 7 of 10: in f64, 1 − 0.7 is not 3/10, which left κ at −8e-17.
        let agreement = retraction_agreement(
            &comparison(&[0, 1, 2, 3, 4, 5, 6]),
            &comparison(&[]),
            Bootstrap::default(),
        )
        .unwrap();
        assert_eq!(agreement.kappa.value, Some(0.0));
        assert_eq!(
            (agreement.kappa.lo, agreement.kappa.hi),
            (Some(0.0), Some(0.0))
        );
        assert_eq!(agreement.jaccard.value, Some(0.0));
    }

    #[test]
    fn identical_retractions_agree_perfectly() {
        let a = comparison(&[0, 5]);
        let agreement = retraction_agreement(&a, &a, Bootstrap::default()).unwrap();
        assert_eq!(agreement.jaccard.value, Some(1.0));
        assert_eq!(agreement.kappa.value, Some(1.0));
    }

    #[test]
    fn different_held_out_statements_are_not_paired() {
        let a = comparison(&[1]);
        let mut b = comparison(&[1]);
        b.held_out[0] = "other".into();
        assert!(matches!(
            retraction_agreement(&a, &b, Bootstrap::default()),
            Err(StabilityError::NotPaired)
        ));
        assert!(retracted_by_all(&[&a, &b]).is_empty());
    }
}
