//! The behavioral side tables: how often each option was chosen (`answers.csv`) and how ρ_R
//! varies over context draws (`resamples.csv`), one row per (model, domain, format, K,
//! baseline, condition[, draw]), so studies of other models, domains, formats and K add rows.

use crate::context::Draw;
use crate::error::PromptError;
use crate::scoring::Answer;
use crate::study::{StudySpec, UnitResult};
use pstat_stability::{Bootstrap, MIN_BASELINE_TRUE, RowKey, StabilityRow, compare, stability_row};
pub use pstat_tables::{AnswerRow, ResampleRow};
use pstat_tables::{Instantiation, Probe};

/// Everything a study writes into the shared tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// One row per perturbed unit, against the baseline: ρ_R and ρ_E with their intervals.
    pub stability: Vec<StabilityRow>,
    /// How often each option was chosen, per unit.
    pub answers: Vec<AnswerRow>,
    /// The spread of ρ_R over the context draws.
    pub resamples: Vec<ResampleRow>,
}

/// Stability rows (every perturbed unit against the baseline), answer counts per unit, and the
/// spread of ρ_R over draws.
pub fn summarize(
    spec: &StudySpec,
    units: &[UnitResult],
    bootstrap: Bootstrap,
) -> Result<Summary, PromptError> {
    let (base, rest) = units
        .split_first()
        .ok_or_else(|| PromptError::NoTestStatements {
            domain: spec.domain.to_string(),
        })?;
    let held_out: Vec<String> = base.judgments.iter().map(|j| j.id.clone()).collect();
    let baseline = base.beliefs();
    let mut stability = Vec::new();
    for unit in rest {
        let cmp = compare(&held_out, &baseline, &unit.beliefs())?;
        let key = RowKey {
            model: spec.model.clone(),
            domain: spec.domain.to_string(),
            instantiation: Instantiation::Behavioral,
            probe: Probe::Prompt,
            k: Some(spec.context.k),
            baseline: Some(spec.context.baseline),
            format: Some(spec.format),
            layer: None,
            condition: unit.condition.clone(),
            resample: unit.draw.resample_column(),
        };
        let size = unit.context.ids.len();
        stability.push(StabilityRow {
            context_size: Some(size),
            short_context: Some(size < spec.context.k),
            ..stability_row(key, &cmp, bootstrap)
        });
    }
    let answers = units
        .iter()
        .enumerate()
        .map(|(i, u)| answer_row(spec, u, i == 0))
        .collect();
    let resamples = resample_rows(spec, units, &stability);
    Ok(Summary {
        stability,
        answers,
        resamples,
    })
}

/// The answer distribution of one unit over the held-out True statements. `is_baseline`: this
/// unit is Θ0, whose True judgments form B_true.
pub fn answer_row(spec: &StudySpec, unit: &UnitResult, is_baseline: bool) -> AnswerRow {
    let count = |a: Answer| unit.judgments.iter().filter(|j| j.answer == a).count();
    let n = unit.judgments.len();
    AnswerRow {
        model: spec.model.clone(),
        domain: spec.domain.to_string(),
        format: spec.format,
        k: spec.context.k,
        baseline: spec.context.baseline,
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

/// ρ_R and ρ_E of each perturbed condition that has resamples or a shuffle control, over its
/// main draw and resamples, and the order-shuffle control.
pub fn resample_rows(
    spec: &StudySpec,
    units: &[UnitResult],
    rows: &[StabilityRow],
) -> Vec<ResampleRow> {
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
            format: spec.format,
            k: spec.context.k,
            baseline: spec.context.baseline,
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

fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

fn sd(x: &[f64]) -> Option<f64> {
    let m = mean(x)?;
    (x.len() > 1)
        .then(|| (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt())
}
