//! Aggregation across models, as the authors' analysis scripts tabulate it
//! (`analysis_plot_scripts/build_retraction_expansion_tables_*.py`): per perturbation, the
//! mean and median ρ_R and ρ_E over models, the average rank of each perturbation and how
//! often it ranks first; per comparison, the number and share of models in which it holds.

use crate::belief::percentile;
use crate::table::StabilityRow;
use pstat_tables::{
    AcrossModelPairRow, AcrossModelRow, BASELINE_REFIT, Baseline, Instantiation, MAIN_VARIANT,
    Probe, PromptFormat, VOLUME_MATCHED,
};
use std::collections::BTreeMap;

/// Rows that differ only in model and condition: one selection of the across-model tables.
type Selection = (
    String,
    Instantiation,
    Probe,
    Option<usize>,
    Option<Baseline>,
    Option<PromptFormat>,
    Option<i64>,
    String,
);

/// ρ_R and ρ_E of one row.
type RatePair = (Option<f64>, Option<f64>);

/// One of the two rates of a [`RatePair`].
type Pick = fn(&RatePair) -> Option<f64>;

/// ρ_R and ρ_E of every (model, condition) of one selection.
type Rates<'a> = BTreeMap<&'a str, BTreeMap<&'a str, RatePair>>;

/// The across-model tables of `rows`. `veracity_layer` gives the veracity layer of a (model,
/// domain), so representational and contextual rows group by their offset from it;
/// `conditions` is the run's condition order (the order of the rows); `pairs` are the compared
/// (Θa, Θb). The noise floor's refits and behavioral resamples are left out; volume-matched
/// rows form their own variant.
pub fn aggregate_across_models(
    rows: &[StabilityRow],
    veracity_layer: impl Fn(&str, &str) -> Option<usize>,
    conditions: &[String],
    pairs: &[(String, String)],
) -> (Vec<AcrossModelRow>, Vec<AcrossModelPairRow>) {
    let selections = group_selections(rows, veracity_layer);
    let order = |c: &str| conditions.iter().position(|x| x == c).unwrap_or(usize::MAX);
    let (mut perturbations, mut comparisons) = (Vec::new(), Vec::new());
    for (key, models) in &selections {
        let mut present: Vec<&str> = models.values().flat_map(|m| m.keys().copied()).collect();
        present.sort_by_key(|c| (order(c), *c));
        present.dedup();
        perturbations.extend(perturbation_rows(key, models, &present));
        comparisons.extend(pair_rows(key, models, &present, pairs, &order));
    }
    (perturbations, comparisons)
}

/// The rates of `rows` per selection and model; the noise floor's refits and behavioral
/// resamples are left out, and the layers of representational and contextual rows become
/// offsets from the veracity layer.
fn group_selections<'a>(
    rows: &'a [StabilityRow],
    veracity_layer: impl Fn(&str, &str) -> Option<usize>,
) -> BTreeMap<Selection, Rates<'a>> {
    let mut selections: BTreeMap<Selection, Rates> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.condition != BASELINE_REFIT) {
        let variant = match r.resample.as_deref() {
            None => MAIN_VARIANT,
            Some(VOLUME_MATCHED) => VOLUME_MATCHED,
            Some(_) => continue,
        };
        // Representational and contextual rows both carry a layer: keyed by its offset, each
        // layer is a selection of its own (offset 0 holds the stages' main rows).
        let layer_offset = r
            .layer
            .and_then(|layer| veracity_layer(&r.model, &r.domain).map(|v| layer as i64 - v as i64));
        let key = (
            r.domain.clone(),
            r.instantiation,
            r.probe,
            r.k,
            r.baseline,
            r.format,
            layer_offset,
            variant.to_string(),
        );
        selections
            .entry(key)
            .or_default()
            .entry(&r.model)
            .or_default()
            .insert(&r.condition, (r.retraction_rate, r.expansion_rate));
    }
    selections
}

/// One row per condition of one selection: its mean and median rates across models and its
/// average rank.
fn perturbation_rows<'a>(
    key: &Selection,
    models: &Rates<'a>,
    present: &[&'a str],
) -> Vec<AcrossModelRow> {
    let (domain, instantiation, probe, k, baseline, format, layer_offset, variant) = key;
    let retraction = ranks(models, present, |r| r.0);
    let expansion = ranks(models, present, |r| r.1);
    let mut rows = Vec::new();
    for &condition in present {
        let values = |get: Pick| -> Vec<f64> {
            models
                .values()
                .filter_map(|m| m.get(condition).and_then(get))
                .collect()
        };
        let (r, e) = (values(|r| r.0), values(|r| r.1));
        rows.push(AcrossModelRow {
            domain: domain.clone(),
            instantiation: *instantiation,
            probe: *probe,
            k: *k,
            baseline: *baseline,
            format: *format,
            layer_offset: *layer_offset,
            variant: variant.clone(),
            condition: condition.to_string(),
            n_models: models
                .values()
                .filter(|m| m.contains_key(condition))
                .count(),
            n_models_retraction: r.len(),
            retraction_rate_mean: mean(&r),
            retraction_rate_median: median(r),
            n_models_expansion: e.len(),
            expansion_rate_mean: mean(&e),
            expansion_rate_median: median(e),
            average_retraction_rank: retraction.average(condition),
            average_expansion_rank: expansion.average(condition),
            n_models_ranked_first_retraction: retraction.first(condition),
            n_models_ranked_first_expansion: expansion.first(condition),
        });
    }
    rows
}

/// In how many models of one selection each compared pair holds (Θa retracts more than Θb),
/// and, where a side has several conditions, all of one side against all of the other.
fn pair_rows(
    key: &Selection,
    models: &Rates,
    present: &[&str],
    pairs: &[(String, String)],
    order: &dyn Fn(&str) -> usize,
) -> Vec<AcrossModelPairRow> {
    let (domain, instantiation, probe, k, baseline, format, layer_offset, variant) = key;
    let mut comparisons = Vec::new();
    let row = |comparison: String, holds: &dyn Fn(&BTreeMap<&str, f64>) -> bool| {
        let num_models = models
            .values()
            .filter(|m| {
                let rates: BTreeMap<&str, f64> =
                    m.iter().filter_map(|(c, r)| Some((*c, r.0?))).collect();
                holds(&rates)
            })
            .count();
        AcrossModelPairRow {
            domain: domain.clone(),
            instantiation: *instantiation,
            probe: *probe,
            k: *k,
            baseline: *baseline,
            format: *format,
            layer_offset: *layer_offset,
            variant: variant.clone(),
            comparison,
            n_models: models.len(),
            num_models,
            prop_models: num_models as f64 / models.len() as f64,
        }
    };
    let pairs: Vec<&(String, String)> = pairs
        .iter()
        .filter(|(a, b)| present.contains(&a.as_str()) && present.contains(&b.as_str()))
        .collect();
    for (a, b) in &pairs {
        comparisons.push(row(
            format!("{a} > {b}"),
            &|m| matches!((m.get(a.as_str()), m.get(b.as_str())), (Some(x), Some(y)) if x > y),
        ));
    }
    // Each side in the condition set's order, as the names of the comparison.
    let side = |pick: fn(&(String, String)) -> &str| {
        let mut v: Vec<&str> = pairs.iter().map(|p| pick(p)).collect();
        v.sort_by_key(|c| order(c));
        v.dedup();
        v
    };
    let sides = (side(|p| p.0.as_str()), side(|p| p.1.as_str()));
    if sides.0.len() > 1 || sides.1.len() > 1 {
        let names = |s: &[&str]| s.join(", ");
        let extreme = |m: &BTreeMap<&str, f64>, side: &[&str], max: bool| {
            side.iter()
                .filter_map(|c| m.get(c).copied())
                .reduce(if max { f64::max } else { f64::min })
        };
        let (a, b) = (names(&sides.0), names(&sides.1));
        comparisons.push(row(format!("all of {a} > all of {b}"), &|m| {
            matches!((extreme(m, &sides.0, false), extreme(m, &sides.1, true)), (Some(x), Some(y)) if x > y)
        }));
        comparisons.push(row(format!("any of {a} > all of {b}"), &|m| {
            matches!((extreme(m, &sides.0, true), extreme(m, &sides.1, true)), (Some(x), Some(y)) if x > y)
        }));
    }
    comparisons
}

/// Per model, the rank of each condition by a rate (1 = largest; equal rates share the average
/// of the ranks they span), over the conditions whose rate is defined, and in how many models
/// each condition's rate equals the largest (every tied one counts).
struct Ranks<'a> {
    ranks: BTreeMap<&'a str, Vec<f64>>,
    first: BTreeMap<&'a str, usize>,
}

impl Ranks<'_> {
    /// The mean rank over the models where the condition's rate is defined.
    fn average(&self, condition: &str) -> Option<f64> {
        self.ranks.get(condition).and_then(|r| mean(r))
    }

    fn first(&self, condition: &str) -> usize {
        self.first.get(condition).copied().unwrap_or(0)
    }
}

fn ranks<'a>(models: &Rates<'a>, present: &[&'a str], get: Pick) -> Ranks<'a> {
    let mut out = Ranks {
        ranks: BTreeMap::new(),
        first: BTreeMap::new(),
    };
    for m in models.values() {
        let mut defined: Vec<(&str, f64)> = present
            .iter()
            .filter_map(|c| Some((*c, m.get(c).and_then(get)?)))
            .collect();
        defined.sort_by(|x, y| y.1.total_cmp(&x.1));
        let Some(&(_, top)) = defined.first() else {
            continue;
        };
        // A run of equal rates at positions start..end (0-based) spans ranks start+1..=end;
        // ranking them in condition order would put whichever comes first ahead of the others.
        let mut start = 0;
        while start < defined.len() {
            let end = start + defined[start..].partition_point(|&(_, v)| v == defined[start].1);
            let rank = (start + 1 + end) as f64 / 2.0;
            for &(c, v) in &defined[start..end] {
                out.ranks.entry(c).or_default().push(rank);
                if v == top {
                    *out.first.entry(c).or_default() += 1;
                }
            }
            start = end;
        }
    }
    out
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| percentile(&v, 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(model: &str, condition: &str, r: Option<f64>, e: Option<f64>) -> StabilityRow {
        StabilityRow {
            model: model.into(),
            domain: "city_locations".into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(if model == "m1" { 10 } else { 20 }),
            condition: condition.into(),
            retraction_rate: r,
            expansion_rate: e,
            ..StabilityRow::default()
        }
    }

    /// Three models, three conditions, computed by hand as the authors' pandas code would.
    #[test]
    fn means_medians_ranks_and_pair_counts_match_hand_computed_values() {
        let rows = vec![
            row("m1", "synthetic_tf", Some(0.4), Some(0.1)),
            row("m1", "fictional", Some(0.2), Some(0.3)),
            row("m1", "noise", Some(0.2), None),
            row("m2", "synthetic_tf", Some(0.1), Some(0.2)),
            row("m2", "fictional", Some(0.3), Some(0.1)),
            row("m2", "noise", Some(0.0), None),
            row("m3", "synthetic_tf", Some(0.5), None),
            row("m3", "fictional", None, None),
            row("m3", "noise", Some(0.6), None),
            // The floor's refits and other resamples never enter.
            StabilityRow {
                resample: Some("refit1".into()),
                ..row("m1", BASELINE_REFIT, Some(0.9), None)
            },
        ];
        let conditions: Vec<String> = ["baseline", "synthetic_tf", "fictional", "noise"]
            .map(String::from)
            .to_vec();
        let pairs = vec![("synthetic_tf".to_string(), "fictional".to_string())];
        let veracity = |model: &str, _: &str| Some(if model == "m1" { 10 } else { 19 });
        let (table, pair_rows) = aggregate_across_models(&rows, veracity, &conditions, &pairs);
        // m1 sits at its veracity layer, m2 and m3 one above theirs: two selections.
        let at = |offset: i64, condition: &str| {
            table
                .iter()
                .find(|r| r.layer_offset == Some(offset) && r.condition == condition)
                .unwrap()
        };
        let tf = at(1, "synthetic_tf");
        assert_eq!((tf.n_models, tf.n_models_retraction), (2, 2));
        assert!((tf.retraction_rate_mean.unwrap() - 0.3).abs() < 1e-12);
        assert!((tf.retraction_rate_median.unwrap() - 0.3).abs() < 1e-12);
        // m2 ranks fictional 0.3 > synthetic_tf 0.1 > noise 0.0; m3 noise 0.6 > synthetic_tf 0.5.
        assert_eq!(tf.average_retraction_rank, Some(2.0));
        assert_eq!(at(1, "noise").average_retraction_rank, Some(2.0));
        assert_eq!(at(1, "fictional").average_retraction_rank, Some(1.0));
        assert_eq!(at(1, "fictional").n_models_retraction, 1);
        assert_eq!(at(1, "noise").n_models_ranked_first_retraction, 1);
        // m1: synthetic_tf 0.4 first; fictional and noise tie at 0.2 and share ranks 2 and 3.
        assert_eq!(at(0, "fictional").average_retraction_rank, Some(2.5));
        assert_eq!(at(0, "noise").average_retraction_rank, Some(2.5));
        assert_eq!(at(0, "fictional").n_models_ranked_first_expansion, 1);
        assert!(!table.iter().any(|r| r.condition == BASELINE_REFIT));
        // Synthetic (TF) > Fictional holds in neither model one layer up (m3's Fictional rate
        // is undefined, which counts as not holding), and in m1.
        let pair = |offset: i64| {
            pair_rows
                .iter()
                .find(|r| r.layer_offset == Some(offset))
                .unwrap()
        };
        assert_eq!(pair(1).comparison, "synthetic_tf > fictional");
        assert_eq!((pair(1).num_models, pair(1).n_models), (0, 2));
        assert_eq!((pair(0).num_models, pair(0).prop_models), (1, 1.0));
    }

    /// Equal rates share the average of the ranks they span, whatever the condition order, and
    /// a model whose rate of a condition is undefined does not rank it.
    #[test]
    fn tied_rates_share_their_average_rank_and_undefined_rates_are_not_ranked() {
        let rows = vec![
            // m1 retracts nothing under any perturbation.
            row("m1", "synthetic_tf", Some(0.0), None),
            row("m1", "fictional", Some(0.0), None),
            row("m1", "noise", Some(0.0), None),
            // m2 (same selection: both sit at their veracity layer) has no Fictional rate.
            row("m2", "synthetic_tf", Some(0.1), None),
            row("m2", "fictional", None, None),
            row("m2", "noise", Some(0.3), None),
        ];
        let conditions: Vec<String> = ["synthetic_tf", "fictional", "noise"]
            .map(String::from)
            .to_vec();
        let veracity = |model: &str, _: &str| Some(if model == "m1" { 10 } else { 20 });
        let (table, _) = aggregate_across_models(&rows, veracity, &conditions, &[]);
        let rank = |condition: &str| {
            let r = table.iter().find(|r| r.condition == condition).unwrap();
            (r.average_retraction_rank, r.n_models_retraction)
        };
        // m1: all three tie at rank 2; m2: noise 1, synthetic_tf 2.
        assert_eq!(rank("synthetic_tf"), (Some(2.0), 2));
        assert_eq!(rank("noise"), (Some(1.5), 2));
        assert_eq!(rank("fictional"), (Some(2.0), 1));
    }

    /// Contextual rows carry a layer too: each layer forms its own selection by its offset from
    /// the veracity layer, so the offset-0 rows are the contextual stage's main rows and no
    /// layer's rate stands in for another's.
    #[test]
    fn contextual_rows_group_by_layer_offset_and_never_mix_layers() {
        let contextual = |model: &str, layer: usize, r: f64| StabilityRow {
            instantiation: Instantiation::Contextual,
            probe: Probe::MassMean,
            k: Some(100),
            baseline: Some(Baseline::Empty),
            layer: Some(layer),
            ..row(model, "synthetic_tf", Some(r), None)
        };
        // m1's veracity layer is 10, m2's 20; the veracity layer's row comes first in file
        // order, another layer's last.
        let rows = vec![
            contextual("m1", 10, 0.4),
            contextual("m1", 9, 0.1),
            contextual("m1", 11, 0.3),
            contextual("m2", 20, 0.6),
            contextual("m2", 18, 0.2),
            contextual("m2", 19, 0.0),
        ];
        let conditions = vec!["synthetic_tf".to_string()];
        let veracity = |model: &str, _: &str| Some(if model == "m1" { 10 } else { 20 });
        let (table, _) = aggregate_across_models(&rows, veracity, &conditions, &[]);
        let at = |offset: i64| {
            let found: Vec<&AcrossModelRow> = table
                .iter()
                .filter(|r| r.layer_offset == Some(offset))
                .collect();
            assert_eq!(found.len(), 1, "offset {offset}: {table:?}");
            found[0]
        };
        let main = at(0);
        assert_eq!(main.instantiation, Instantiation::Contextual);
        assert_eq!(main.n_models_retraction, 2);
        assert!((main.retraction_rate_mean.unwrap() - 0.5).abs() < 1e-12);
        assert!((at(-1).retraction_rate_mean.unwrap() - 0.05).abs() < 1e-12);
        assert_eq!((at(1).n_models, at(-2).n_models), (1, 1));
        assert_eq!(table.len(), 4);
    }
}
