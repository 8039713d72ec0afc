//! Aggregation across models: the paper plots one point per model plus the median.

use crate::belief::percentile;
use crate::table::StabilityRow;
use pstat_tables::{Baseline, Instantiation, Probe, PromptFormat};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AggregateRow {
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    pub condition: String,
    pub n_models: usize,
    pub retraction_rate_median: Option<f64>,
    pub retraction_rate_q1: Option<f64>,
    pub retraction_rate_q3: Option<f64>,
    pub expansion_rate_median: Option<f64>,
    pub expansion_rate_q1: Option<f64>,
    pub expansion_rate_q3: Option<f64>,
}

/// Median and quartiles of each rate across models, per (domain, instantiation, probe, k,
/// baseline, format, condition). Rows of resample/shuffle controls are left out; a model
/// whose rate is undefined does not count towards that rate.
pub fn aggregate_across_models(rows: &[StabilityRow]) -> Vec<AggregateRow> {
    type Key = (
        String,
        Instantiation,
        Probe,
        Option<usize>,
        Option<Baseline>,
        Option<PromptFormat>,
        String,
    );
    let mut groups: BTreeMap<Key, Vec<&StabilityRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.resample.is_none()) {
        let key = (
            r.domain.clone(),
            r.instantiation,
            r.probe,
            r.k,
            r.baseline,
            r.format,
            r.condition.clone(),
        );
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(
            |((domain, instantiation, probe, k, baseline, format, condition), members)| {
                let quartiles = |get: fn(&StabilityRow) -> Option<f64>| {
                    let mut v: Vec<f64> = members.iter().filter_map(|r| get(r)).collect();
                    v.sort_by(f64::total_cmp);
                    if v.is_empty() {
                        (None, None, None)
                    } else {
                        (
                            Some(percentile(&v, 0.5)),
                            Some(percentile(&v, 0.25)),
                            Some(percentile(&v, 0.75)),
                        )
                    }
                };
                let (rm, rq1, rq3) = quartiles(|r| r.retraction_rate);
                let (em, eq1, eq3) = quartiles(|r| r.expansion_rate);
                AggregateRow {
                    domain,
                    instantiation,
                    probe,
                    k,
                    baseline,
                    format,
                    condition,
                    n_models: members
                        .iter()
                        .map(|r| &r.model)
                        .collect::<std::collections::BTreeSet<_>>()
                        .len(),
                    retraction_rate_median: rm,
                    retraction_rate_q1: rq1,
                    retraction_rate_q3: rq3,
                    expansion_rate_median: em,
                    expansion_rate_q1: eq1,
                    expansion_rate_q3: eq3,
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quartiles_skip_undefined_rates() {
        let base = StabilityRow {
            domain: "d".into(),
            instantiation: Instantiation::Behavioral,
            probe: Probe::Prompt,
            k: Some(100),
            baseline: Some(Baseline::Empty),
            format: Some(PromptFormat::Chat),
            condition: "noise".into(),
            n_baseline_true: 10,
            ..StabilityRow::default()
        };
        let rows: Vec<StabilityRow> = [Some(0.1), Some(0.3), Some(0.2), None]
            .iter()
            .enumerate()
            .map(|(i, r)| StabilityRow {
                model: format!("m{i}"),
                retraction_rate: *r,
                ..base.clone()
            })
            .collect();
        let agg = aggregate_across_models(&rows);
        assert_eq!(agg.len(), 1);
        assert_eq!(agg[0].n_models, 4);
        assert!((agg[0].retraction_rate_median.unwrap() - 0.2).abs() < 1e-12);
        assert!((agg[0].retraction_rate_q1.unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(agg[0].expansion_rate_median, None);
    }
}
