//! Paired tests of the comparisons a report states ("Synthetic (TF) retracts more than
//! Fictional"), beyond the paper's medians.
//!
//! Two perturbations Θa and Θb of one (model, domain, probe, ...) are judged against the same
//! baseline Θ0, so their retraction rates are measured on the same baseline-True statements:
//! ρ_R(Θa) − ρ_R(Θb) is the mean of a per-statement difference (retracted under Θa minus
//! retracted under Θb), and resampling those statements with replacement keeps the pairing.
//! The interval is the percentile bootstrap interval; the p-value is the two-sided bootstrap
//! test of a zero difference (the resampled differences, centred on the observed one, at
//! least as far from zero as the observed one). Holm's step-down correction is applied over
//! the comparisons of a run; across models, an exact sign test over (model, domain) cells
//! says whether the direction is consistent.

use crate::belief::{BeliefComparison, Bootstrap, StabilityError, percentile};
pub use pstat_tables::ComparisonRow;
use pstat_tables::{Baseline, Instantiation, Probe, PromptFormat};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The level at which a Holm-corrected p-value is called significant in `comparisons.csv`.
pub const ALPHA: f64 = 0.05;

/// ρ_R(Θa) − ρ_R(Θb) over the same baseline-True statements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    pub n_baseline_true: usize,
    pub retraction_rate_a: f64,
    pub retraction_rate_b: f64,
    pub difference: f64,
    /// 95% percentile bootstrap interval of the difference.
    pub lo: f64,
    pub hi: f64,
    /// Two-sided bootstrap p-value of a zero difference (uncorrected).
    pub p_value: f64,
}

/// Compare the retraction rates of two perturbations measured against the same baseline.
/// Errors when the two comparisons do not share their held-out statements and baseline
/// judgments (they would not be paired), or when no statement is believed at baseline.
pub fn paired_retraction_difference(
    a: &BeliefComparison,
    b: &BeliefComparison,
    bootstrap: Bootstrap,
) -> Result<PairedDifference, StabilityError> {
    bootstrap.validate()?;
    if a.held_out != b.held_out || a.baseline != b.baseline {
        return Err(StabilityError::NotPaired);
    }
    // Per baseline-True statement: retracted under Θa minus retracted under Θb.
    let d: Vec<i8> = (0..a.held_out.len())
        .filter(|&i| a.baseline[i])
        .map(|i| i8::from(!a.perturbed[i]) - i8::from(!b.perturbed[i]))
        .collect();
    let n = d.len();
    if n == 0 {
        return Err(StabilityError::NoBaselineTrue);
    }
    let retracted = |c: &BeliefComparison| {
        (0..c.held_out.len())
            .filter(|&i| c.baseline[i] && !c.perturbed[i])
            .count() as f64
            / n as f64
    };
    let observed = d.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(bootstrap.seed);
    let mut samples: Vec<f64> = (0..bootstrap.resamples)
        .map(|_| {
            let sum: i64 = (0..n).map(|_| i64::from(d[rng.random_range(0..n)])).sum();
            sum as f64 / n as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    // Centring on the observed difference gives the resampled null distribution; the +1s
    // count the observed sample itself, so p is never 0.
    let extreme = samples
        .iter()
        .filter(|&&s| (s - observed).abs() >= observed.abs() - 1e-12)
        .count();
    Ok(PairedDifference {
        n_baseline_true: n,
        retraction_rate_a: retracted(a),
        retraction_rate_b: retracted(b),
        difference: observed,
        lo: percentile(&samples, 0.025),
        hi: percentile(&samples, 0.975),
        p_value: (1 + extreme) as f64 / (1 + samples.len()) as f64,
    })
}

/// Holm's step-down adjustment of `p` (in the input order): the i-th smallest p-value is
/// multiplied by (m − i), capped at 1 and made monotone. Controls the family-wise error rate
/// over the comparisons of a run at any dependence between them.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The row of `comparisons.csv` for Θa against Θb under `key` (its `condition` and
/// `resample` unused); `p_holm` is the uncorrected p until [`adjust_holm`] runs over the run.
pub fn comparison_row(
    key: &crate::table::RowKey,
    condition_a: &str,
    condition_b: &str,
    diff: &PairedDifference,
) -> ComparisonRow {
    ComparisonRow {
        model: key.model.clone(),
        domain: key.domain.clone(),
        instantiation: key.instantiation,
        probe: key.probe,
        k: key.k,
        baseline: key.baseline,
        format: key.format,
        layer: key.layer,
        condition_a: condition_a.to_string(),
        condition_b: condition_b.to_string(),
        n_baseline_true: diff.n_baseline_true,
        retraction_rate_a: diff.retraction_rate_a,
        retraction_rate_b: diff.retraction_rate_b,
        difference: diff.difference,
        difference_lo: diff.lo,
        difference_hi: diff.hi,
        p_value: diff.p_value,
        p_holm: diff.p_value,
        significant: diff.p_value < ALPHA,
    }
}

/// Fill `p_holm` and `significant` of every row, correcting over all rows together (the
/// comparisons of one run form one family).
pub fn adjust_holm(rows: &mut [ComparisonRow]) {
    let p: Vec<f64> = rows.iter().map(|r| r.p_value).collect();
    for (row, adjusted) in rows.iter_mut().zip(holm(&p)) {
        row.p_holm = adjusted;
        row.significant = adjusted < ALPHA;
    }
}

/// Exact two-sided sign test: of the non-zero differences, how many are positive, and the
/// binomial(n, 1/2) probability of a split at least as uneven. Zeros are ties and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SignTest {
    pub positive: usize,
    pub negative: usize,
    pub ties: usize,
    pub p_value: f64,
}

pub fn sign_test(differences: &[f64]) -> SignTest {
    let positive = differences.iter().filter(|&&d| d > 0.0).count();
    let negative = differences.iter().filter(|&&d| d < 0.0).count();
    let n = positive + negative;
    let k = positive.min(negative);
    // P(X ≤ k) for X ~ Binomial(n, 1/2), doubled, capped at 1; C(n, i) / 2^n in logs.
    let ln_choose = |i: usize| ln_factorial(n) - ln_factorial(i) - ln_factorial(n - i);
    let tail: f64 = (0..=k)
        .map(|i| (ln_choose(i) - n as f64 * std::f64::consts::LN_2).exp())
        .sum();
    SignTest {
        positive,
        negative,
        ties: differences.len() - n,
        p_value: if n == 0 { 1.0 } else { (2.0 * tail).min(1.0) },
    }
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

/// A sign test of one comparison across the (model, domain) cells of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignTestRow {
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    pub condition_a: String,
    pub condition_b: String,
    /// (model, domain) cells with this comparison.
    pub n_cells: usize,
    pub positive: usize,
    pub negative: usize,
    pub ties: usize,
    pub p_value: f64,
}

/// Group `rows` by comparison (everything but model, domain and layer, which differs between
/// models) and run the sign test over each group's differences.
pub fn sign_tests_across_models(rows: &[ComparisonRow]) -> Vec<SignTestRow> {
    type Key = (
        Instantiation,
        Probe,
        Option<usize>,
        Option<Baseline>,
        Option<PromptFormat>,
        String,
        String,
    );
    let mut groups: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for r in rows {
        let key = (
            r.instantiation,
            r.probe,
            r.k,
            r.baseline,
            r.format,
            r.condition_a.clone(),
            r.condition_b.clone(),
        );
        groups.entry(key).or_default().push(r.difference);
    }
    groups
        .into_iter()
        .map(
            |((instantiation, probe, k, baseline, format, condition_a, condition_b), d)| {
                let t = sign_test(&d);
                SignTestRow {
                    instantiation,
                    probe,
                    k,
                    baseline,
                    format,
                    condition_a,
                    condition_b,
                    n_cells: d.len(),
                    positive: t.positive,
                    negative: t.negative,
                    ties: t.ties,
                    p_value: t.p_value,
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Baseline believes all `n` statements; Θa retracts each with probability `ra`, Θb with
    /// `rb`, independently.
    fn planted(n: usize, ra: f64, rb: f64, seed: u64) -> (BeliefComparison, BeliefComparison) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let held_out: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let baseline = vec![true; n];
        let a: Vec<bool> = (0..n).map(|_| !rng.random_bool(ra)).collect();
        let b: Vec<bool> = (0..n).map(|_| !rng.random_bool(rb)).collect();
        let cmp = |perturbed| BeliefComparison {
            held_out: held_out.clone(),
            baseline: baseline.clone(),
            perturbed,
        };
        (cmp(a), cmp(b))
    }

    fn boot(seed: u64) -> Bootstrap {
        Bootstrap {
            resamples: 1000,
            seed,
        }
    }

    #[test]
    fn a_planted_gap_is_found_and_covered() {
        let mut covered = 0;
        for seed in 0..40 {
            let (a, b) = planted(150, 0.5, 0.2, seed);
            let d = paired_retraction_difference(&a, &b, boot(seed)).unwrap();
            assert!(d.p_value < 0.01, "seed {seed}: {d:?}");
            assert!(d.lo > 0.0, "seed {seed}: {d:?}");
            assert!((d.difference - (d.retraction_rate_a - d.retraction_rate_b)).abs() < 1e-12);
            covered += usize::from(d.lo <= 0.3 && 0.3 <= d.hi);
        }
        assert!(
            covered >= 34,
            "the 95% interval covered 0.3 in {covered} of 40"
        );
    }

    #[test]
    fn a_zero_gap_is_rejected_at_about_the_stated_level() {
        let runs = 200;
        let rejected = (0..runs)
            .filter(|&seed| {
                let (a, b) = planted(120, 0.3, 0.3, 10_000 + seed);
                paired_retraction_difference(&a, &b, boot(seed))
                    .unwrap()
                    .p_value
                    < ALPHA
            })
            .count();
        // 5% of 200 is 10; 20 would be 3.2 binomial standard deviations above it.
        assert!(rejected <= 20, "{rejected} of {runs} rejected at 5%");
    }

    #[test]
    fn identical_perturbations_differ_by_exactly_zero() {
        let (a, _) = planted(50, 0.4, 0.4, 3);
        let d = paired_retraction_difference(&a, &a, boot(1)).unwrap();
        assert_eq!((d.difference, d.lo, d.hi, d.p_value), (0.0, 0.0, 0.0, 1.0));
    }

    #[test]
    fn unpaired_or_empty_inputs_are_errors() {
        let (a, b) = planted(20, 0.4, 0.4, 3);
        let mut other = b.clone();
        other.held_out[0] = "elsewhere".into();
        assert!(matches!(
            paired_retraction_difference(&a, &other, boot(1)),
            Err(StabilityError::NotPaired)
        ));
        let mut none = a.clone();
        none.baseline = vec![false; 20];
        assert!(matches!(
            paired_retraction_difference(&none, &none, boot(1)),
            Err(StabilityError::NoBaselineTrue)
        ));
        let zero = Bootstrap {
            resamples: 0,
            seed: 1,
        };
        assert!(matches!(
            paired_retraction_difference(&a, &b, zero),
            Err(StabilityError::InvalidBootstrap(_))
        ));
    }

    #[test]
    fn holm_matches_hand_computed_values() {
        // Sorted 0.01, 0.02, 0.04, 0.5 -> ×4, ×3, ×2, ×1 = 0.04, 0.06, 0.08, 0.5.
        let adjusted = holm(&[0.04, 0.01, 0.5, 0.02]);
        let want = [0.08, 0.04, 0.5, 0.06];
        for (got, want) in adjusted.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{adjusted:?}");
        }
        // Monotone: the largest p (0.5 × 1) is raised to the adjusted p before it (0.25 × 3).
        assert_eq!(holm(&[0.25, 0.5, 0.25]), vec![0.75, 0.75, 0.75]);
        assert_eq!(holm(&[0.6, 0.7]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn sign_test_matches_the_binomial() {
        // 8 of 8 positive: 2 × 2^-8.
        let t = sign_test(&[0.1; 8]);
        assert_eq!((t.positive, t.negative, t.ties), (8, 0, 0));
        assert!((t.p_value - 2.0 / 256.0).abs() < 1e-12);
        // 6 vs 2 with a tie: 2 × (1 + 8 + 28) / 256.
        let d = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 0.0];
        let t = sign_test(&d);
        assert_eq!(t.ties, 1);
        assert!((t.p_value - 74.0 / 256.0).abs() < 1e-12);
        assert_eq!(sign_test(&[0.0, 0.0]).p_value, 1.0);
    }

    #[test]
    fn comparisons_csv_round_trips_with_holm_and_sign_tests() {
        let key = |model: &str, domain: &str| crate::table::RowKey {
            model: model.into(),
            domain: domain.into(),
            instantiation: Instantiation::Behavioral,
            probe: Probe::Prompt,
            k: Some(100),
            baseline: Some(Baseline::Empty),
            format: Some(PromptFormat::Chat),
            ..Default::default()
        };
        let mut rows = Vec::new();
        for (i, model) in ["m1", "m2"].into_iter().enumerate() {
            for (j, domain) in ["city_locations", "med_indications"]
                .into_iter()
                .enumerate()
            {
                let (a, b) = planted(100, 0.5, 0.2, (i * 2 + j) as u64);
                let d = paired_retraction_difference(&a, &b, boot(1)).unwrap();
                rows.push(comparison_row(
                    &key(model, domain),
                    "synthetic_tf",
                    "fictional",
                    &d,
                ));
            }
        }
        adjust_holm(&mut rows);
        assert!(rows.iter().all(|r| r.p_holm >= r.p_value && r.significant));
        let dir = tempfile::tempdir().unwrap();
        pstat_tables::write_table(dir.path(), &rows).unwrap();
        let text = std::fs::read_to_string(dir.path().join("comparisons.csv")).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            pstat_tables::COMPARISON_COLUMNS.join(",")
        );
        assert_eq!(
            pstat_tables::read_table::<ComparisonRow>(dir.path()).unwrap(),
            rows
        );
        let signs = sign_tests_across_models(&rows);
        assert_eq!(signs.len(), 1);
        assert_eq!((signs[0].n_cells, signs[0].positive), (4, 4));
        assert!((signs[0].p_value - 2.0 / 16.0).abs() < 1e-12);
    }
}
