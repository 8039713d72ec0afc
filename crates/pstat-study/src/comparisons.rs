//! `comparisons.csv` and the tables read from it: a paired test of every compared pair of
//! the condition set (`compare_with`) in the cells the report states them for (each probe at
//! the veracity layer, and the behavioral main draw at the largest K against the empty
//! baseline); Holm's correction within each claim's family; the families' sizes and smallest
//! attainable p (`comparison_families.csv`); and the across-model tables and sign tests
//! (`across_models.csv`, `across_model_pairs.csv`, `sign_tests.csv`, `across_models.json`).

use crate::study::Study;
use pstat_data::ConditionSet;
use pstat_stability::{
    Bootstrap, ComparisonRow, Judgments, RowKey, StabilityError, StabilityRow,
    aggregate_across_models, compare, comparison_families, comparison_row,
    paired_retraction_difference, sign_tests_across_models,
};
use pstat_tables::{ACROSS_MODELS_JSON, AcrossModels, LayerChoice, write_json, write_table};
use std::collections::HashMap;

/// ρ_R(Θa) − ρ_R(Θb) for each compared pair of `conditions` whose two conditions were judged
/// in this cell (`judged`: condition → judgments of `held_out`), as rows of `variant`. A cell
/// whose baseline believes nothing has no rows: its rates are undefined. Pair i resamples
/// its interval with `seed + i`.
pub fn paired_rows(
    key: &RowKey,
    held_out: &[String],
    baseline: &Judgments,
    judged: &HashMap<String, Judgments>,
    (conditions, variant): (&ConditionSet, &str),
    resamples: usize,
    seed: u64,
) -> anyhow::Result<Vec<ComparisonRow>> {
    let mut rows = Vec::new();
    for (i, (a, b)) in conditions.compared_pairs().into_iter().enumerate() {
        let (Some(ja), Some(jb)) = (judged.get(a), judged.get(b)) else {
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
            Ok(diff) => rows.push(comparison_row(key, (a, b), variant, &diff)),
            Err(StabilityError::NoBaselineTrue) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(rows)
}

/// Writes `comparisons.csv` (Holm-adjusted within families), `comparison_families.csv` and the
/// across-model tables of `stability` and `comparisons`.
pub fn write_tables(
    study: &Study,
    stability: &[StabilityRow],
    comparisons: &[ComparisonRow],
    layers: &[LayerChoice],
) -> anyhow::Result<()> {
    let out = &study.out;
    let mut comparisons = comparisons.to_vec();
    pstat_stability::adjust_holm(&mut comparisons);
    write_table(out, &comparisons)?;
    write_table(out, &comparison_families(&comparisons))?;
    let across = across_models(&study.conditions, stability, &comparisons, layers);
    write_table(out, &across.perturbations)?;
    write_table(out, &across.pairs)?;
    write_table(out, &across.sign_tests)?;
    write_json(&out.join(ACROSS_MODELS_JSON), &across)?;
    Ok(())
}

/// The across-model tables of a run: the authors' perturbation and comparison tables over
/// `stability`, and the sign tests over `comparisons` (already Holm-adjusted).
pub fn across_models(
    conditions: &ConditionSet,
    stability: &[StabilityRow],
    comparisons: &[ComparisonRow],
    layers: &[LayerChoice],
) -> AcrossModels {
    let veracity = |model: &str, domain: &str| {
        layers
            .iter()
            .find(|l| l.model == model && l.domain == domain)
            .map(|l| l.veracity_layer)
    };
    let names: Vec<String> = conditions.names().into_iter().map(String::from).collect();
    let pairs: Vec<(String, String)> = conditions
        .compared_pairs()
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let (perturbations, pairs) = aggregate_across_models(stability, veracity, &names, &pairs);
    AcrossModels {
        perturbations,
        pairs,
        sign_tests: sign_tests_across_models(comparisons),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_stability::{ALPHA, adjust_holm};
    use pstat_tables::{Instantiation, MAIN_VARIANT, Probe};

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
        let set = ConditionSet::paper();
        let mut rows =
            paired_rows(&key, &ids, &baseline, &judged, (&set, MAIN_VARIANT), 500, 1).unwrap();
        let pairs: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.condition_a.as_str(), r.condition_b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("synthetic_tf", "fictional"), ("synthetic_fi", "fictional")]
        );
        assert_eq!(rows[0].difference, 0.5);
        assert_eq!((rows[0].a_only, rows[0].b_only), (100, 0));
        assert!((rows[1].difference - 0.1).abs() < 1e-12);
        assert_eq!((rows[0].layer, rows[0].probe), (Some(3), Probe::Sawmil));
        adjust_holm(&mut rows);
        assert!(
            rows[0].p_holm < ALPHA && rows[0].significant,
            "{:?}",
            rows[0]
        );
        assert_eq!(rows[0].test, "mcnemar_exact");
        assert_eq!(
            rows[1].family,
            "representational/sawmil/synthetic_fi-vs-fictional/main"
        );
        assert!(rows.iter().all(|r| r.p_holm >= r.p_value));

        let believes_nothing = judgments(&ids, |_| false);
        let none = paired_rows(
            &key,
            &ids,
            &believes_nothing,
            &judged,
            (&set, MAIN_VARIANT),
            500,
            1,
        )
        .unwrap();
        assert!(none.is_empty(), "undefined rates have no comparison");
    }
}
