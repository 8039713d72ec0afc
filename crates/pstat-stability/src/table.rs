//! `stability.csv`: one row per (model, domain, instantiation, probe, k, baseline, format,
//! layer, condition, resample). Columns that do not apply, and undefined rates, are empty
//! cells, which pandas reads as NaN.

use crate::belief::{BeliefComparison, Bootstrap, Rate};
use pstat_data::artifact::{write_atomic, write_json_atomic};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Baselines smaller than this make a retraction rate too noisy to mean anything; such rows
/// are flagged in the table and the report.
pub const MIN_BASELINE_TRUE: usize = 20;

/// One row of `stability.csv`. `Default` is an empty row (no rates) for building rows field by
/// field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    pub model: String,
    pub domain: String,
    /// `behavioral` | `representational`
    pub instantiation: String,
    /// `sawmil` | `mass_mean` | `prompt`
    pub probe: String,
    pub k: Option<usize>,
    /// Behavioral baseline context: `empty` | `true`.
    pub baseline: Option<String>,
    /// Prompt format: `chat` | `plain`.
    pub format: Option<String>,
    pub layer: Option<usize>,
    pub condition: String,
    /// Index of the context draw (behavioral resamples), or `shuffle` controls; empty otherwise.
    pub resample: Option<String>,
    pub n_baseline_true: usize,
    pub n_baseline_not_true: usize,
    pub retractions: usize,
    pub expansions: usize,
    pub retraction_rate: Option<f64>,
    pub retraction_rate_lo: Option<f64>,
    pub retraction_rate_hi: Option<f64>,
    pub expansion_rate: Option<f64>,
    pub expansion_rate_lo: Option<f64>,
    pub expansion_rate_hi: Option<f64>,
    /// `small_baseline` when n_baseline_true < MIN_BASELINE_TRUE; empty otherwise.
    pub flag: Option<String>,
}

/// The identifying columns of a row, apart from the measured values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RowKey {
    pub model: String,
    pub domain: String,
    pub instantiation: String,
    pub probe: String,
    pub k: Option<usize>,
    pub baseline: Option<String>,
    pub format: Option<String>,
    pub layer: Option<usize>,
    pub condition: String,
    pub resample: Option<String>,
}

impl StabilityRow {
    pub fn new(key: RowKey, cmp: &BeliefComparison, bootstrap: Bootstrap) -> Self {
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
        }
    }

    pub fn key(&self) -> RowKey {
        RowKey {
            model: self.model.clone(),
            domain: self.domain.clone(),
            instantiation: self.instantiation.clone(),
            probe: self.probe.clone(),
            k: self.k,
            baseline: self.baseline.clone(),
            format: self.format.clone(),
            layer: self.layer,
            condition: self.condition.clone(),
            resample: self.resample.clone(),
        }
    }
}

/// Replace rows with the same key and append new ones, keeping the table's order stable
/// so a stage that is rerun rewrites its rows in place.
pub fn upsert(rows: &mut Vec<StabilityRow>, new: impl IntoIterator<Item = StabilityRow>) {
    for row in new {
        let key = row.key();
        match rows.iter_mut().find(|r| r.key() == key) {
            Some(slot) => *slot = row,
            None => rows.push(row),
        }
    }
}

pub fn write_csv(path: &Path, rows: &[StabilityRow]) -> std::io::Result<()> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    if rows.is_empty() {
        // Header only, so readers still see the columns.
        writer.write_record(COLUMNS)?;
    }
    for row in rows {
        writer.serialize(row).map_err(std::io::Error::other)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    write_atomic(path, &bytes)
}

pub fn write_json(path: &Path, rows: &[StabilityRow]) -> std::io::Result<()> {
    write_json_atomic(path, rows)
}

pub fn read_csv(path: &Path) -> Result<Vec<StabilityRow>, String> {
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    reader
        .deserialize()
        .enumerate()
        .map(|(i, r)| r.map_err(|e| format!("{}, line {}: {e}", path.display(), i + 2)))
        .collect()
}

pub const COLUMNS: [&str; 21] = [
    "model",
    "domain",
    "instantiation",
    "probe",
    "k",
    "baseline",
    "format",
    "layer",
    "condition",
    "resample",
    "n_baseline_true",
    "n_baseline_not_true",
    "retractions",
    "expansions",
    "retraction_rate",
    "retraction_rate_lo",
    "retraction_rate_hi",
    "expansion_rate",
    "expansion_rate_lo",
    "expansion_rate_hi",
    "flag",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::belief::compare;

    fn row(condition: &str, baseline: &[bool], perturbed: &[bool]) -> StabilityRow {
        let ids: Vec<String> = (0..baseline.len()).map(|i| format!("s{i}")).collect();
        let j = |v: &[bool]| ids.iter().cloned().zip(v.iter().copied()).collect();
        let cmp = compare(&ids, &j(baseline), &j(perturbed)).unwrap();
        let key = RowKey {
            model: "m".into(),
            domain: "city_locations".into(),
            instantiation: "representational".into(),
            probe: "sawmil".into(),
            layer: Some(15),
            condition: condition.into(),
            ..RowKey::default()
        };
        StabilityRow::new(key, &cmp, Bootstrap::default())
    }

    #[test]
    fn csv_has_paper_columns_empty_cells_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stability.csv");
        let rows = vec![
            row("noise", &[true, true, false], &[false, true, false]),
            row("fictional", &[true, true], &[true, true]),
        ];
        write_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), COLUMNS.join(","));
        // k, baseline, format, resample do not apply; ρ_E is undefined for the second row.
        assert!(
            lines
                .nth(1)
                .unwrap()
                .contains(",0,0,0.0,0.0,0.0,,,,small_baseline"),
            "{text}"
        );
        assert_eq!(read_csv(&path).unwrap(), rows);
    }

    #[test]
    fn upsert_replaces_rows_with_the_same_key() {
        let mut rows = vec![
            row("noise", &[true], &[true]),
            row("fictional", &[true], &[true]),
        ];
        upsert(
            &mut rows,
            [
                row("noise", &[true], &[false]),
                row("synthetic_tf", &[true], &[true]),
            ],
        );
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].retractions, 1);
        assert_eq!(rows[2].condition, "synthetic_tf");
    }
}
