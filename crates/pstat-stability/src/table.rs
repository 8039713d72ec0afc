//! Rows of `stability.csv` (the type lives in `pstat-tables`, which owns every table of a run
//! folder) built from a belief comparison.

use crate::belief::{BeliefComparison, Bootstrap, Rate};
pub use pstat_tables::{MIN_BASELINE_TRUE, RowKey, StabilityRow};

/// The row of `key` with the rates of `cmp` and their bootstrap intervals.
pub fn stability_row(key: RowKey, cmp: &BeliefComparison, bootstrap: Bootstrap) -> StabilityRow {
    let (r, e): (Rate, Rate) = cmp.rates(bootstrap);
    let n_true = cmp.n_baseline_true();
    StabilityRow {
        model: key.model,
        domain: key.domain,
        instantiation: key.instantiation,
        probe: key.probe,
        k: key.k,
        baseline: key.baseline,
        format: key.format,
        layer: key.layer,
        condition: key.condition,
        resample: key.resample,
        n_baseline_true: n_true,
        n_baseline_not_true: cmp.n_baseline_not_true(),
        retractions: cmp.retractions().len(),
        expansions: cmp.expansions().len(),
        retraction_rate: r.value,
        retraction_rate_lo: r.lo,
        retraction_rate_hi: r.hi,
        expansion_rate: e.value,
        expansion_rate_lo: e.lo,
        expansion_rate_hi: e.hi,
        flag: (n_true < MIN_BASELINE_TRUE).then(|| "small_baseline".to_string()),
        c: None,
        context_size: None,
        short_context: None,
        converged: None,
        relabelled: None,
        floor_retraction_rate: None,
        exceeds_floor: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::belief::compare;

    #[test]
    fn a_row_counts_retractions_and_flags_a_small_baseline() {
        let ids: Vec<String> = (0..3).map(|i| format!("s{i}")).collect();
        let j = |v: &[bool]| ids.iter().cloned().zip(v.iter().copied()).collect();
        let cmp = compare(&ids, &j(&[true, true, false]), &j(&[false, true, false])).unwrap();
        let row = stability_row(RowKey::default(), &cmp, Bootstrap::default());
        assert_eq!((row.n_baseline_true, row.retractions), (2, 1));
        assert_eq!(row.retraction_rate, Some(0.5));
        assert_eq!(row.flag.as_deref(), Some("small_baseline"));
    }
}
