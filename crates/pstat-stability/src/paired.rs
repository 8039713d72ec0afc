//! Paired tests of the comparisons a report states ("Synthetic (TF) retracts more than
//! Fictional"), beyond the paper's medians.
//!
//! Two perturbations Θa and Θb of one (model, domain, probe, ...) are judged against the same
//! baseline Θ0, so their retraction rates are measured on the same baseline-True statements:
//! each statement is retracted under both, neither, Θa only or Θb only. McNemar's exact test
//! reads the discordant ones (Θa only vs Θb only): under no difference each is equally likely
//! to fall either way, so the two-sided binomial(n, ½) tail is an exact p-value with no
//! resampling, and its smallest value 2^(1−n) is known in advance. The interval of
//! ρ_R(Θa) − ρ_R(Θb) is the percentile bootstrap over statements resampled in pairs.
//!
//! Multiple comparisons are corrected per claim: a family is one comparison (Θa vs Θb, main or
//! volume-matched) of one instantiation and probe across the run's (model, domain) cells, and
//! Holm's step-down runs within it, so adding a model or a probe never changes another
//! claim's p. Across models an exact sign test says whether the direction is consistent
//! ([`sign_tests_across_models`]).

use crate::belief::{BeliefComparison, Bootstrap, StabilityError, percentile};
use pstat_tables::POOLED;
pub use pstat_tables::{ComparisonFamilyRow, ComparisonRow, SignTestRow};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The level at which a Holm-corrected p-value is called significant in `comparisons.csv`.
pub const ALPHA: f64 = 0.05;

/// The `test` of every row of `comparisons.csv`.
pub const MCNEMAR_EXACT: &str = "mcnemar_exact";

/// ρ_R(Θa) − ρ_R(Θb) over the same baseline-True statements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// |B_true(Θ0)|: the statements both rates are over.
    pub n_baseline_true: usize,
    /// ρ_R(Θa).
    pub retraction_rate_a: f64,
    /// ρ_R(Θb).
    pub retraction_rate_b: f64,
    /// ρ_R(Θa) − ρ_R(Θb).
    pub difference: f64,
    /// Lower end of the 95% percentile bootstrap interval of the difference.
    pub lo: f64,
    /// Upper end of that interval.
    pub hi: f64,
    /// Statements retracted under Θa only.
    pub a_only: usize,
    /// Statements retracted under Θb only.
    pub b_only: usize,
    /// McNemar's exact two-sided p-value (uncorrected).
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
    let a_only = d.iter().filter(|&&x| x > 0).count();
    let b_only = d.iter().filter(|&&x| x < 0).count();
    let mut rng = ChaCha8Rng::seed_from_u64(bootstrap.seed);
    let mut samples: Vec<f64> = (0..bootstrap.resamples)
        .map(|_| {
            let sum: i64 = (0..n).map(|_| i64::from(d[rng.random_range(0..n)])).sum();
            sum as f64 / n as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Ok(PairedDifference {
        n_baseline_true: n,
        retraction_rate_a: retracted(a),
        retraction_rate_b: retracted(b),
        difference: (a_only as f64 - b_only as f64) / n as f64,
        lo: percentile(&samples, 0.025),
        hi: percentile(&samples, 0.975),
        a_only,
        b_only,
        p_value: mcnemar_exact(a_only, b_only),
    })
}

/// McNemar's exact test: two-sided binomial(a_only + b_only, ½) p-value of the split of the
/// discordant pairs; 1 when there are none.
pub fn mcnemar_exact(a_only: usize, b_only: usize) -> f64 {
    binomial_two_sided(a_only.min(b_only), a_only + b_only)
}

/// 2·P(X ≤ k) for X ~ Binomial(n, ½), capped at 1 (k is the smaller of the two counts);
/// 1 when n = 0. Terms are summed in logs so that large n do not overflow.
fn binomial_two_sided(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let ln_choose = |i: usize| ln_factorial(n) - ln_factorial(i) - ln_factorial(n - i);
    let tail: f64 = (0..=k)
        .map(|i| (ln_choose(i) - n as f64 * std::f64::consts::LN_2).exp())
        .sum();
    (2.0 * tail).min(1.0)
}

/// The smallest p-value McNemar's exact test can give over `n` paired statements: every one
/// of them discordant, all the same way.
pub fn smallest_mcnemar_p(n: usize) -> f64 {
    mcnemar_exact(n, 0)
}

/// Holm's step-down adjustment of `p` (in the input order): the i-th smallest p-value is
/// multiplied by (m − i), capped at 1 and made monotone. Controls the family-wise error rate
/// over a family at any dependence between its tests.
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

/// The family of a comparison: one claim (Θa vs Θb, in one variant) of one instantiation and
/// probe, across cells.
pub fn family_of(row: &ComparisonRow) -> String {
    format!(
        "{}/{}/{}-vs-{}/{}",
        row.instantiation, row.probe, row.condition_a, row.condition_b, row.variant
    )
}

/// The row of `comparisons.csv` for Θa against Θb under `key` (its `condition` and `resample`
/// unused), in `variant`; its family columns are filled by [`adjust_holm`] over the run.
pub fn comparison_row(
    key: &crate::table::RowKey,
    (condition_a, condition_b): (&str, &str),
    variant: &str,
    diff: &PairedDifference,
) -> ComparisonRow {
    let mut row = ComparisonRow {
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
        variant: variant.to_string(),
        n_baseline_true: diff.n_baseline_true,
        retraction_rate_a: diff.retraction_rate_a,
        retraction_rate_b: diff.retraction_rate_b,
        difference: diff.difference,
        difference_lo: diff.lo,
        difference_hi: diff.hi,
        a_only: diff.a_only,
        b_only: diff.b_only,
        test: MCNEMAR_EXACT.to_string(),
        p_value: diff.p_value,
        family: String::new(),
        family_size: 1,
        p_holm: diff.p_value,
        significant: diff.p_value < ALPHA,
        floor_difference: None,
        exceeds_floor: None,
    };
    row.family = family_of(&row);
    row
}

/// Fill `family_size`, `p_holm` and `significant` of every row, correcting within each
/// family ([`family_of`]) over the run's cells.
pub fn adjust_holm(rows: &mut [ComparisonRow]) {
    let mut families: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter_mut().enumerate() {
        row.family = family_of(row);
        families.entry(row.family.clone()).or_default().push(i);
    }
    for members in families.values() {
        let p: Vec<f64> = members.iter().map(|&i| rows[i].p_value).collect();
        for (&i, adjusted) in members.iter().zip(holm(&p)) {
            rows[i].family_size = members.len();
            rows[i].p_holm = adjusted;
            rows[i].significant = adjusted < ALPHA;
        }
    }
}

/// One row per family of (Holm-adjusted) `rows`: its size, how many rows are significant, and
/// the smallest adjusted p any of its rows could reach, m · 2^(1−n) for the family's largest
/// row of n baseline-True statements (Holm multiplies the smallest p by the family size).
pub fn comparison_families(rows: &[ComparisonRow]) -> Vec<ComparisonFamilyRow> {
    let mut families: BTreeMap<&str, Vec<&ComparisonRow>> = BTreeMap::new();
    for row in rows {
        families.entry(&row.family).or_default().push(row);
    }
    families
        .into_iter()
        .map(|(family, members)| {
            let first = members[0];
            let largest = members.iter().map(|r| r.n_baseline_true).max().unwrap_or(0);
            ComparisonFamilyRow {
                family: family.to_string(),
                instantiation: first.instantiation,
                probe: first.probe,
                condition_a: first.condition_a.clone(),
                condition_b: first.condition_b.clone(),
                variant: first.variant.clone(),
                test: first.test.clone(),
                family_size: members.len(),
                n_significant: members.iter().filter(|r| r.significant).count(),
                smallest_attainable_p_holm: (members.len() as f64 * smallest_mcnemar_p(largest))
                    .min(1.0),
            }
        })
        .collect()
}

/// Exact two-sided sign test: of the non-zero differences, how many are positive, and the
/// binomial(n, 1/2) probability of a split at least as uneven. Zeros are ties and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SignTest {
    /// Differences above zero.
    pub positive: usize,
    /// Differences below zero.
    pub negative: usize,
    /// Differences of exactly zero (dropped from the test).
    pub ties: usize,
    /// The exact two-sided p-value.
    pub p_value: f64,
}

/// The exact two-sided sign test of `differences` ([`SignTest`]).
pub fn sign_test(differences: &[f64]) -> SignTest {
    let positive = differences.iter().filter(|&&d| d > 0.0).count();
    let negative = differences.iter().filter(|&&d| d < 0.0).count();
    SignTest {
        positive,
        negative,
        ties: differences.len() - positive - negative,
        p_value: binomial_two_sided(positive.min(negative), positive + negative),
    }
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

/// The sign test of each comparison of `rows` (`comparisons.csv`, one difference per model
/// and domain) across models: per domain, and pooled with one difference per model (its mean
/// over the model's rows), so models stay the independent units. Holm runs over the
/// per-domain tests of each claim; the pooled test is a family of its own.
pub fn sign_tests_across_models(rows: &[ComparisonRow]) -> Vec<SignTestRow> {
    type Claim = (
        pstat_tables::Instantiation,
        pstat_tables::Probe,
        String,
        String,
        String,
    );
    // claim → domain → model → differences
    let mut claims: BTreeMap<Claim, BTreeMap<&str, BTreeMap<&str, Vec<f64>>>> = BTreeMap::new();
    for r in rows {
        let claim = (
            r.instantiation,
            r.probe,
            r.variant.clone(),
            r.condition_a.clone(),
            r.condition_b.clone(),
        );
        claims
            .entry(claim)
            .or_default()
            .entry(&r.domain)
            .or_default()
            .entry(&r.model)
            .or_default()
            .push(r.difference);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut out = Vec::new();
    for ((instantiation, probe, variant, condition_a, condition_b), domains) in claims {
        let row = |domain: &str, family: &str, d: &[f64]| {
            let t = sign_test(d);
            SignTestRow {
                instantiation,
                probe,
                variant: variant.clone(),
                condition_a: condition_a.clone(),
                condition_b: condition_b.clone(),
                domain: domain.to_string(),
                n_models: d.len(),
                positive: t.positive,
                negative: t.negative,
                ties: t.ties,
                p_value: t.p_value,
                family: format!(
                    "{instantiation}/{probe}/{condition_a}-vs-{condition_b}/{variant}/{family}"
                ),
                family_size: 1,
                p_holm: t.p_value,
                significant: t.p_value < ALPHA,
            }
        };
        let mut per_domain: Vec<SignTestRow> = domains
            .iter()
            .map(|(domain, models)| {
                let d: Vec<f64> = models.values().map(|v| mean(v)).collect();
                row(domain, "per_domain", &d)
            })
            .collect();
        let p: Vec<f64> = per_domain.iter().map(|r| r.p_value).collect();
        let m = per_domain.len();
        for (r, adjusted) in per_domain.iter_mut().zip(holm(&p)) {
            r.family_size = m;
            r.p_holm = adjusted;
            r.significant = adjusted < ALPHA;
        }
        let mut pooled: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for models in domains.values() {
            for (model, d) in models {
                pooled.entry(model).or_default().push(mean(d));
            }
        }
        let d: Vec<f64> = pooled.values().map(|v| mean(v)).collect();
        out.extend(per_domain);
        out.push(row(POOLED, POOLED, &d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_tables::{Baseline, Instantiation, Probe, PromptFormat};

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
    fn mcnemar_matches_hand_computed_values() {
        // 8 vs 2 discordant: 2 × (1 + 10 + 45) / 1024.
        assert!((mcnemar_exact(8, 2) - 112.0 / 1024.0).abs() < 1e-12);
        assert!((mcnemar_exact(2, 8) - 112.0 / 1024.0).abs() < 1e-12);
        // 10 vs 0: 2 / 1024; 3 vs 3 and 1 vs 0 cap at 1; no discordant pair says nothing.
        assert!((mcnemar_exact(10, 0) - 2.0 / 1024.0).abs() < 1e-15);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        assert_eq!(mcnemar_exact(1, 0), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // 5 vs 1: 2 × (1 + 6) / 64.
        assert!((mcnemar_exact(5, 1) - 14.0 / 64.0).abs() < 1e-12);
        assert!((smallest_mcnemar_p(50) - 2f64.powi(-49)).abs() < 1e-25);
    }

    /// Six statements believed at baseline: Θa retracts s0..s3, Θb retracts s3 and s4; s5
    /// stays. Discordant: s0, s1, s2 (Θa only), s4 (Θb only): McNemar 2 × (1 + 4) / 16.
    #[test]
    fn a_paired_difference_counts_its_discordant_statements() {
        let held_out: Vec<String> = (0..7).map(|i| format!("s{i}")).collect();
        let mut baseline = vec![true; 7];
        baseline[6] = false;
        let cmp = |retracted: &[usize]| BeliefComparison {
            held_out: held_out.clone(),
            baseline: baseline.clone(),
            perturbed: (0..7).map(|i| i == 6 || !retracted.contains(&i)).collect(),
        };
        let d = paired_retraction_difference(&cmp(&[0, 1, 2, 3]), &cmp(&[3, 4]), boot(1)).unwrap();
        assert_eq!((d.n_baseline_true, d.a_only, d.b_only), (6, 3, 1));
        assert!((d.difference - 2.0 / 6.0).abs() < 1e-12);
        assert!((d.retraction_rate_a - 4.0 / 6.0).abs() < 1e-12);
        assert!((d.p_value - 10.0 / 16.0).abs() < 1e-12);
    }

    fn row(family: (&str, &str), model: &str, p: f64, n: usize) -> ComparisonRow {
        let key = crate::table::RowKey {
            model: model.into(),
            domain: "city_locations".into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(3),
            ..Default::default()
        };
        let diff = PairedDifference {
            n_baseline_true: n,
            retraction_rate_a: 0.0,
            retraction_rate_b: 0.0,
            difference: 0.0,
            lo: 0.0,
            hi: 0.0,
            a_only: 0,
            b_only: 0,
            p_value: p,
        };
        comparison_row(&key, family, pstat_tables::MAIN_VARIANT, &diff)
    }

    #[test]
    fn holm_runs_within_each_family_only() {
        let tf = ("synthetic_tf", "fictional");
        let fi = ("synthetic_fi", "fictional");
        let mut rows = vec![
            row(tf, "m1", 0.01, 100),
            row(fi, "m1", 0.03, 100),
            row(tf, "m2", 0.04, 100),
        ];
        adjust_holm(&mut rows);
        // The Synthetic (TF) family has two rows: 0.01 × 2 and max(0.02, 0.04 × 1).
        assert_eq!(
            rows[0].family,
            "representational/sawmil/synthetic_tf-vs-fictional/main"
        );
        assert_eq!((rows[0].family_size, rows[1].family_size), (2, 1));
        assert!((rows[0].p_holm - 0.02).abs() < 1e-12);
        assert!((rows[2].p_holm - 0.04).abs() < 1e-12);
        // The Synthetic (Fi) row is alone in its family: not corrected for the others.
        assert!((rows[1].p_holm - 0.03).abs() < 1e-12 && rows[1].significant);
        let families = comparison_families(&rows);
        assert_eq!(families.len(), 2);
        assert_eq!((families[1].family_size, families[1].n_significant), (2, 2));
        assert!((families[1].smallest_attainable_p_holm - 2.0 * 2f64.powi(-99)).abs() < 1e-40);
    }

    /// The quick run's families (3 domains of one model) and the default study's (2 models ×
    /// 3 domains, two formats at most): with 50 baseline-True statements the smallest attainable
    /// adjusted p is far below 0.001, so a claim can reach significance; with 10 it cannot.
    #[test]
    fn the_smallest_attainable_adjusted_p_is_below_a_thousandth() {
        for cells in [3, 6, 12] {
            let rows: Vec<ComparisonRow> = (0..cells)
                .map(|i| row(("synthetic_tf", "fictional"), &format!("m{i}"), 1.0, 50))
                .collect();
            let family = &comparison_families(&rows)[0];
            assert_eq!(family.family_size, cells);
            assert!(family.smallest_attainable_p_holm <= 0.001, "{family:?}");
        }
        let small: Vec<ComparisonRow> = (0..3)
            .map(|i| row(("synthetic_tf", "fictional"), &format!("m{i}"), 1.0, 10))
            .collect();
        assert!(comparison_families(&small)[0].smallest_attainable_p_holm > 0.001);
    }

    /// Δρ = 0.2 over 50 statements with the discordance all one way comes out significant after
    /// Holm in a family of the quick run's size.
    #[test]
    fn a_planted_effect_is_significant_at_default_settings() {
        let held_out: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        let cmp = |retracted: usize| BeliefComparison {
            held_out: held_out.clone(),
            baseline: vec![true; 50],
            perturbed: (0..50).map(|i| i >= retracted).collect(),
        };
        let d = paired_retraction_difference(&cmp(15), &cmp(5), Bootstrap::default()).unwrap();
        assert!((d.difference - 0.2).abs() < 1e-12);
        let key = |domain: &str| crate::table::RowKey {
            model: "m".into(),
            domain: domain.into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            ..Default::default()
        };
        let mut rows: Vec<ComparisonRow> =
            ["city_locations", "med_indications", "word_definitions"]
                .iter()
                .map(|domain| {
                    comparison_row(
                        &key(domain),
                        ("synthetic_tf", "fictional"),
                        pstat_tables::MAIN_VARIANT,
                        &d,
                    )
                })
                .collect();
        adjust_holm(&mut rows);
        assert!(
            rows.iter().all(|r| r.significant && r.difference_lo > 0.0),
            "{rows:?}"
        );
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
        let models = ["m1", "m2", "m3", "m4", "m5", "m6"];
        for (i, model) in models.into_iter().enumerate() {
            for (j, domain) in ["city_locations", "med_indications"]
                .into_iter()
                .enumerate()
            {
                let (a, b) = planted(100, 0.5, 0.2, (i * 2 + j) as u64);
                let d = paired_retraction_difference(&a, &b, boot(1)).unwrap();
                rows.push(comparison_row(
                    &key(model, domain),
                    ("synthetic_tf", "fictional"),
                    pstat_tables::MAIN_VARIANT,
                    &d,
                ));
            }
        }
        adjust_holm(&mut rows);
        assert!(
            rows.iter()
                .all(|r| r.p_holm >= r.p_value && r.significant && r.family_size == 12)
        );
        let dir = tempfile::tempdir().unwrap();
        pstat_tables::write_table(dir.path(), &rows).unwrap();
        let text = std::fs::read_to_string(dir.path().join("comparisons.csv")).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            pstat_tables::COMPARISON_COLUMNS.join(",")
        );
        assert!(text.contains(",mcnemar_exact,"), "{text}");
        assert_eq!(
            pstat_tables::read_table::<ComparisonRow>(dir.path()).unwrap(),
            rows
        );
        // Per domain: 6 of 6 models positive, 2 × 2^-6, Holm × 2; pooled: the same 6 models.
        let signs = sign_tests_across_models(&rows);
        assert_eq!(signs.len(), 3);
        assert_eq!(
            signs.iter().map(|s| s.domain.as_str()).collect::<Vec<_>>(),
            ["city_locations", "med_indications", POOLED]
        );
        for s in &signs {
            assert_eq!((s.n_models, s.positive), (6, 6));
            assert!((s.p_value - 2.0 / 64.0).abs() < 1e-12);
        }
        assert!((signs[0].p_holm - 4.0 / 64.0).abs() < 1e-12 && signs[0].family_size == 2);
        assert!((signs[2].p_holm - 2.0 / 64.0).abs() < 1e-12 && signs[2].significant);
    }

    /// Pooling averages each model's domains first: a model positive in one domain and more
    /// negative in another counts once, as negative.
    #[test]
    fn the_pooled_sign_test_counts_each_model_once() {
        let mut rows = Vec::new();
        for (model, domain, difference) in [
            ("m1", "city_locations", 0.1),
            ("m1", "med_indications", -0.3),
            ("m2", "city_locations", 0.2),
            ("m2", "med_indications", 0.1),
        ] {
            let mut r = row(("synthetic_tf", "fictional"), model, 0.5, 50);
            r.domain = domain.into();
            r.difference = difference;
            rows.push(r);
        }
        let signs = sign_tests_across_models(&rows);
        let pooled = signs.iter().find(|s| s.domain == POOLED).unwrap();
        assert_eq!(
            (pooled.n_models, pooled.positive, pooled.negative),
            (2, 1, 1)
        );
        assert_eq!(pooled.p_value, 1.0);
    }
}
