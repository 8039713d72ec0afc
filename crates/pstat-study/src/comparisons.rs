//! `comparisons.csv`: a paired test of every Synthetic-vs-Fictional comparison the report
//! states (the report's pairs), in the cells it states them for: each probe at the veracity
//! layer, and the behavioral main draw at the largest K against the empty baseline. Holm's
//! correction runs over every row of the run when the table is written.

use pstat_stability::{
    Bootstrap, ComparisonRow, Judgments, RowKey, StabilityError, compare, comparison_row,
    paired_retraction_difference,
};
use std::collections::HashMap;

/// ρ_R(Θa) − ρ_R(Θb) for each reported pair whose two conditions were judged in this cell
/// (`judged`: condition → judgments of `held_out`). A cell whose baseline believes nothing has
/// no rows: its rates are undefined. Pair i resamples with `seed + i`.
pub fn paired_rows(
    key: &RowKey,
    held_out: &[String],
    baseline: &Judgments,
    judged: &HashMap<String, Judgments>,
    resamples: usize,
    seed: u64,
) -> anyhow::Result<Vec<ComparisonRow>> {
    let mut rows = Vec::new();
    for (i, (a, b)) in pstat_report::PAIRS.iter().enumerate() {
        let (Some(ja), Some(jb)) = (judged.get(*a), judged.get(*b)) else {
            continue;
        };
        let bootstrap = Bootstrap {
            resamples,
            seed: seed.wrapping_add(i as u64),
        };
        let diff = paired_retraction_difference(
            &compare(held_out, baseline, ja)?,
            &compare(held_out, baseline, jb)?,
            bootstrap,
        );
        match diff {
            Ok(diff) => rows.push(comparison_row(key, a, b, &diff)),
            Err(StabilityError::NoBaselineTrue) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_stability::{ALPHA, adjust_holm};
    use pstat_tables::{Instantiation, Probe};

    fn judgments(ids: &[String], judged_true: impl Fn(usize) -> bool) -> Judgments {
        ids.iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), judged_true(i)))
            .collect()
    }

    #[test]
    fn a_planted_gap_is_significant_after_holm_and_a_missing_condition_has_no_row() {
        let ids: Vec<String> = (0..200).map(|i| format!("s{i}")).collect();
        let baseline = judgments(&ids, |_| true);
        let mut judged = HashMap::new();
        // Synthetic (TF) retracts every other statement, Synthetic (FI) one in ten, Fictional
        // none; Fictional (T) was not judged.
        judged.insert("synthetic_tf".into(), judgments(&ids, |i| i % 2 == 1));
        judged.insert("synthetic_fi".into(), judgments(&ids, |i| i % 10 != 0));
        judged.insert("fictional".into(), judgments(&ids, |_| true));
        let key = RowKey {
            model: "m".into(),
            domain: "city_locations".into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(3),
            ..RowKey::default()
        };
        let mut rows = paired_rows(&key, &ids, &baseline, &judged, 500, 1).unwrap();
        let pairs: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.condition_a.as_str(), r.condition_b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("synthetic_tf", "fictional"), ("synthetic_fi", "fictional")]
        );
        assert_eq!(rows[0].difference, 0.5);
        assert!((rows[1].difference - 0.1).abs() < 1e-12);
        assert_eq!((rows[0].layer, rows[0].probe), (Some(3), Probe::Sawmil));
        adjust_holm(&mut rows);
        assert!(
            rows[0].p_holm < ALPHA && rows[0].significant,
            "{:?}",
            rows[0]
        );
        assert!(rows.iter().all(|r| r.p_holm >= r.p_value));

        let believes_nothing = judgments(&ids, |_| false);
        let none = paired_rows(&key, &ids, &believes_nothing, &judged, 500, 1).unwrap();
        assert!(none.is_empty(), "undefined rates have no comparison");
    }
}
