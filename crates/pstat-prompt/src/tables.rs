//! The behavioral side tables: how often each option was chosen (`answers.csv`) and how ρ_R
//! varies over context draws (`resamples.csv`). Both are upserted by key, like
//! `stability.csv`, so studies of other models, domains, formats and K add rows.

use crate::context::Draw;
use crate::error::PromptError;
use crate::scoring::Answer;
use crate::study::{StudySpec, UnitResult};
use pstat_data::artifact::write_atomic;
use pstat_stability::{MIN_BASELINE_TRUE, StabilityRow};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Answer distribution of one unit over the held-out True statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRow {
    pub model: String,
    pub domain: String,
    pub format: String,
    pub k: usize,
    pub baseline: String,
    pub condition: String,
    pub draw: String,
    pub n: usize,
    pub a: usize,
    pub b: usize,
    pub c: usize,
    pub mean_leftover: f64,
    /// `small_baseline` on the baseline row when fewer than [`MIN_BASELINE_TRUE`] statements
    /// are judged True: retraction rates against it mean little.
    pub flag: Option<String>,
}

impl AnswerRow {
    /// `is_baseline`: this unit is Θ0, whose True judgments form B_true.
    pub fn new(spec: &StudySpec, unit: &UnitResult, is_baseline: bool) -> Self {
        let count = |a: Answer| unit.judgments.iter().filter(|j| j.answer == a).count();
        let n = unit.judgments.len();
        AnswerRow {
            model: spec.model.clone(),
            domain: spec.domain.to_string(),
            format: spec.format.to_string(),
            k: spec.context.k,
            baseline: spec.context.baseline.as_str().into(),
            condition: unit.condition.clone(),
            draw: unit.draw.name(),
            n,
            a: count(Answer::A),
            b: count(Answer::B),
            c: count(Answer::C),
            mean_leftover: unit.judgments.iter().map(|j| j.leftover).sum::<f64>() / n.max(1) as f64,
            flag: (is_baseline && count(Answer::A) < MIN_BASELINE_TRUE)
                .then(|| "small_baseline".into()),
        }
    }

    fn key(&self) -> String {
        [
            &self.model,
            &self.domain,
            &self.format,
            &self.k.to_string(),
            &self.baseline,
            &self.condition,
            &self.draw,
        ]
        .map(String::as_str)
        .join("\u{1f}")
    }
}

/// ρ_R and ρ_E of a condition over its main draw and resamples, and the order-shuffle control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResampleRow {
    pub model: String,
    pub domain: String,
    pub format: String,
    pub k: usize,
    pub baseline: String,
    pub condition: String,
    /// Draws summarised: the main one and every resample.
    pub n_draws: usize,
    pub retraction_rate_mean: Option<f64>,
    /// Sample standard deviation over draws (n − 1 denominator).
    pub retraction_rate_sd: Option<f64>,
    pub retraction_rate_min: Option<f64>,
    pub retraction_rate_max: Option<f64>,
    pub expansion_rate_mean: Option<f64>,
    pub expansion_rate_sd: Option<f64>,
    /// ρ_R with the main draw's statements in a permuted order.
    pub shuffle_retraction_rate: Option<f64>,
    /// Share of held-out statements whose judgment differs between the main draw and its
    /// shuffled order: the noise floor of the judgment itself.
    pub shuffle_flip_rate: Option<f64>,
}

impl ResampleRow {
    /// One row per perturbed condition that has resamples or a shuffle control.
    pub fn from_units(spec: &StudySpec, units: &[UnitResult], rows: &[StabilityRow]) -> Vec<Self> {
        let mut out = Vec::new();
        let mut conditions: Vec<&str> = Vec::new();
        for u in units.iter().filter(|u| u.draw != Draw::Main) {
            if !conditions.contains(&u.condition.as_str()) {
                conditions.push(&u.condition);
            }
        }
        for condition in conditions {
            let of = |r: &&StabilityRow| r.condition == condition;
            let draws: Vec<&StabilityRow> = rows
                .iter()
                .filter(of)
                .filter(|r| r.resample.as_deref() != Some("shuffle"))
                .collect();
            let shuffle = rows
                .iter()
                .filter(of)
                .find(|r| r.resample.as_deref() == Some("shuffle"));
            let retraction: Vec<f64> = draws.iter().filter_map(|r| r.retraction_rate).collect();
            let expansion: Vec<f64> = draws.iter().filter_map(|r| r.expansion_rate).collect();
            let judged = |draw: Draw| {
                units
                    .iter()
                    .find(|u| u.condition == condition && u.draw == draw)
                    .map(|u| {
                        u.judgments
                            .iter()
                            .map(|j| j.judged_true)
                            .collect::<Vec<_>>()
                    })
            };
            let flip = match (judged(Draw::Main), judged(Draw::Shuffle)) {
                (Some(a), Some(b)) if !a.is_empty() => {
                    Some(a.iter().zip(&b).filter(|(x, y)| x != y).count() as f64 / a.len() as f64)
                }
                _ => None,
            };
            out.push(ResampleRow {
                model: spec.model.clone(),
                domain: spec.domain.to_string(),
                format: spec.format.to_string(),
                k: spec.context.k,
                baseline: spec.context.baseline.as_str().into(),
                condition: condition.to_string(),
                n_draws: draws.len(),
                retraction_rate_mean: mean(&retraction),
                retraction_rate_sd: sd(&retraction),
                retraction_rate_min: retraction.iter().copied().reduce(f64::min),
                retraction_rate_max: retraction.iter().copied().reduce(f64::max),
                expansion_rate_mean: mean(&expansion),
                expansion_rate_sd: sd(&expansion),
                shuffle_retraction_rate: shuffle.and_then(|r| r.retraction_rate),
                shuffle_flip_rate: flip,
            });
        }
        out
    }

    fn key(&self) -> String {
        [
            &self.model,
            &self.domain,
            &self.format,
            &self.k.to_string(),
            &self.baseline,
            &self.condition,
        ]
        .map(String::as_str)
        .join("\u{1f}")
    }
}

fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

fn sd(x: &[f64]) -> Option<f64> {
    let m = mean(x)?;
    (x.len() > 1)
        .then(|| (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt())
}

/// Adds `rows` to the CSV at `path`, replacing rows with the same key in place.
fn upsert_csv<T: Serialize + DeserializeOwned + Clone>(
    path: &Path,
    rows: &[T],
    key: impl Fn(&T) -> String,
) -> Result<(), PromptError> {
    let file_err = |message: String| PromptError::File {
        path: path.to_path_buf(),
        message,
    };
    let mut table: Vec<T> = if path.is_file() {
        let mut reader = csv::Reader::from_path(path).map_err(|e| file_err(e.to_string()))?;
        reader
            .deserialize()
            .enumerate()
            .map(|(i, r)| r.map_err(|e| file_err(format!("line {}: {e}", i + 2))))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    for row in rows {
        let k = key(row);
        match table.iter().position(|r| key(r) == k) {
            Some(i) => table[i] = row.clone(),
            None => table.push(row.clone()),
        }
    }
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in &table {
        writer.serialize(row).map_err(|e| file_err(e.to_string()))?;
    }
    let bytes = writer.into_inner().map_err(|e| file_err(e.to_string()))?;
    write_atomic(path, &bytes).map_err(|e| PromptError::io(path, e))
}

pub fn upsert_answers(path: &Path, rows: &[AnswerRow]) -> Result<(), PromptError> {
    upsert_csv(path, rows, AnswerRow::key)
}

pub fn upsert_resamples(path: &Path, rows: &[ResampleRow]) -> Result<(), PromptError> {
    upsert_csv(path, rows, ResampleRow::key)
}
