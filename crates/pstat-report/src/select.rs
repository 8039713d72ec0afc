//! Which rows of `stability.csv` each figure, table and summary line uses. The main results
//! (Fig. 3, A1, count tables) use, per model and domain: behavioral — the largest K with the
//! empty baseline in the model's prompt format (chat unless its baseline is too small, see
//! `preferred_formats`); representational — the veracity layer. Resample and shuffle rows are
//! controls and never enter these selections.

use crate::figures::model::Dot;
use crate::inputs::RunData;
use crate::names::paper_conditions;
use pstat_stability::belief::percentile;
use pstat_stability::{MIN_BASELINE_TRUE, StabilityRow};
use pstat_tables::{BASELINE_REFIT, Baseline, Instantiation, Probe, PromptFormat};
use std::collections::{BTreeMap, BTreeSet};

pub const BEHAVIORAL: &str = "behavioral";
pub const REPRESENTATIONAL: &str = "representational";

/// Which rate of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Retraction,
    Expansion,
}

impl Measure {
    pub fn dot(self, r: &StabilityRow) -> Option<Dot> {
        let (value, lo, hi) = match self {
            Measure::Retraction => (
                r.retraction_rate,
                r.retraction_rate_lo,
                r.retraction_rate_hi,
            ),
            Measure::Expansion => (r.expansion_rate, r.expansion_rate_lo, r.expansion_rate_hi),
        };
        value.map(|value| Dot { value, lo, hi })
    }

    pub fn noun(self) -> &'static str {
        match self {
            Measure::Retraction => "retraction rate",
            Measure::Expansion => "expansion rate",
        }
    }
}

/// Perturbation rows only: the baseline compared with itself says nothing, and its refit is the
/// noise floor ([`noise_floor`]), not a perturbation.
pub fn is_perturbation(condition: &str) -> bool {
    condition != BASELINE_REFIT
        && paper_conditions()
            .baseline()
            .is_none_or(|b| b.name != condition)
}

/// The noise-floor rows of `probe` (every refit of the baseline with unchanged labels, against
/// the baseline) at each (model, domain)'s veracity layer.
pub fn noise_floor<'a>(
    data: &'a RunData,
    layers: &VeracityLayers,
    probe: Probe,
) -> Vec<&'a StabilityRow> {
    data.stability
        .iter()
        .filter(|r| r.condition == BASELINE_REFIT)
        .filter(|r| r.instantiation == Instantiation::Representational && r.probe == probe)
        .filter(|r| r.layer.is_some() && r.layer == layers.get(&r.model, &r.domain))
        .collect()
}

fn point_rows(data: &RunData) -> impl Iterator<Item = &StabilityRow> {
    data.stability
        .iter()
        .filter(|r| r.resample.is_none() && is_perturbation(&r.condition))
}

/// The veracity layer of each (model, domain): from `layers.json` when present, otherwise the
/// middle of the representational layers the run evaluated (l−2..l+2 has l in the middle).
#[derive(Debug, Clone, Default)]
pub struct VeracityLayers {
    layers: BTreeMap<(String, String), usize>,
    pub guessed: BTreeSet<(String, String)>,
}

impl VeracityLayers {
    pub fn new(data: &RunData) -> Self {
        let mut out = VeracityLayers::default();
        for c in data.layers.iter().flatten() {
            out.layers
                .insert((c.model.clone(), c.domain.clone()), c.veracity_layer);
        }
        let mut present: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
        for r in point_rows(data).filter(|r| r.instantiation == Instantiation::Representational) {
            if let Some(layer) = r.layer {
                present
                    .entry((r.model.clone(), r.domain.clone()))
                    .or_default()
                    .insert(layer);
            }
        }
        for (key, layers) in present {
            if !out.layers.contains_key(&key) {
                let sorted: Vec<usize> = layers.into_iter().collect();
                out.layers
                    .insert(key.clone(), sorted[(sorted.len() - 1) / 2]);
                out.guessed.insert(key);
            }
        }
        out
    }

    pub fn get(&self, model: &str, domain: &str) -> Option<usize> {
        self.layers
            .get(&(model.to_string(), domain.to_string()))
            .copied()
    }
}

/// Rows of one instantiation, with a sentence saying which configuration they are.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    pub rows: Vec<&'a StabilityRow>,
    pub description: String,
}

/// A (model, domain) pair, borrowed from the run's rows.
type Cell<'a> = (&'a str, &'a str);

/// The prompt format of each (model, domain)'s main behavioral results: the one the run chose
/// (`decisions.json`) where it prompted in one format only, else by the run's `auto` rule: chat (the paper prompts chat models in chat) unless its empty-context baseline holds
/// fewer than [`MIN_BASELINE_TRUE`] True beliefs and the plain format was run. A small chat
/// model can answer "c" to every chat-formatted question (SmolLM2-135M: B_true = 0), and rates
/// against an empty belief set say nothing. Returns the choice and the cells where a too-small
/// chat baseline was passed over (seen in `stability.csv`, or in `answers.csv` when `auto`
/// ran only the chat baseline).
fn preferred_formats(
    data: &RunData,
) -> (BTreeMap<Cell<'_>, Option<PromptFormat>>, BTreeSet<Cell<'_>>) {
    let mut present: BTreeMap<Cell, BTreeSet<Option<PromptFormat>>> = BTreeMap::new();
    let mut small_chat: BTreeSet<Cell> = BTreeSet::new();
    for r in point_rows(data).filter(|r| r.instantiation == Instantiation::Behavioral) {
        let cell = (r.model.as_str(), r.domain.as_str());
        if r.format == Some(PromptFormat::Chat)
            && is_empty_baseline(r)
            && PromptFormat::auto(r.n_baseline_true) == PromptFormat::Plain
        {
            small_chat.insert(cell);
        }
        present.entry(cell).or_default().insert(r.format);
    }
    for a in data.answers.iter().flatten() {
        if a.format == PromptFormat::Chat
            && a.baseline != Baseline::True
            && a.flag.as_deref() == Some("small_baseline")
        {
            small_chat.insert((a.model.as_str(), a.domain.as_str()));
        }
    }
    // The run's own choice, where it made one (`auto`), wins over the rule below.
    let decided: BTreeMap<Cell, PromptFormat> = data
        .decisions
        .iter()
        .flat_map(|d| &d.formats)
        .filter_map(|d| match d.formats.as_slice() {
            [only] => Some(((d.model.as_str(), d.domain.as_str()), *only)),
            _ => None,
        })
        .collect();
    let chat = Some(PromptFormat::Chat);
    let plain = Some(PromptFormat::Plain);
    let mut passed_over = BTreeSet::new();
    let preferred = present
        .into_iter()
        .map(|(cell, formats)| {
            let format = if let Some(&format) = decided.get(&cell) {
                if format == PromptFormat::Plain && small_chat.contains(&cell) {
                    passed_over.insert(cell);
                }
                Some(format)
            } else if small_chat.contains(&cell) && formats.contains(&plain) {
                passed_over.insert(cell);
                plain
            } else if formats.contains(&chat) {
                chat
            } else {
                formats.into_iter().next().flatten()
            };
            (cell, format)
        })
        .collect();
    (preferred, passed_over)
}

fn is_empty_baseline(r: &StabilityRow) -> bool {
    r.baseline.is_none_or(|b| b == Baseline::Empty)
}

/// Behavioral rows in each (model, domain)'s preferred format (every K and baseline).
fn behavioral_rows<'a>(
    data: &'a RunData,
    formats: &BTreeMap<Cell, Option<PromptFormat>>,
) -> Vec<&'a StabilityRow> {
    point_rows(data)
        .filter(|r| r.instantiation == Instantiation::Behavioral)
        .filter(|r| formats.get(&(r.model.as_str(), r.domain.as_str())) == Some(&r.format))
        .collect()
}

pub fn behavioral_main(data: &RunData) -> Selection<'_> {
    let (preferred, passed_over) = preferred_formats(data);
    let rows = behavioral_rows(data, &preferred);
    let main_k = pstat_tables::main_k(
        rows.iter()
            .filter(|r| is_empty_baseline(r))
            .filter_map(|r| r.k),
    );
    let rows: Vec<&StabilityRow> = rows
        .into_iter()
        .filter(|r| is_empty_baseline(r) && r.k == main_k)
        .collect();
    let formats: BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.format.map(PromptFormat::as_str))
        .collect();
    let mut description = format!(
        "prompting with a belief context of K = {} statements against the empty-context baseline ({} format)",
        main_k.map_or("?".to_string(), |k| k.to_string()),
        if formats.is_empty() {
            "unspecified".to_string()
        } else {
            formats.into_iter().collect::<Vec<_>>().join(" / ")
        }
    );
    if !passed_over.is_empty() {
        let mut by_model: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for &(model, domain) in &passed_over {
            by_model.entry(model).or_default().push(domain);
        }
        let cells: Vec<String> = by_model
            .into_iter()
            .map(|(model, domains)| format!("{model} ({})", domains.join(", ")))
            .collect();
        description.push_str(&format!(
            "; plain format where a chat model's chat-format baseline holds fewer than {MIN_BASELINE_TRUE} True beliefs: {}",
            cells.join(", ")
        ));
    }
    Selection { rows, description }
}

/// Representational rows of `probe` at each (model, domain)'s veracity layer.
pub fn representational<'a>(
    data: &'a RunData,
    layers: &VeracityLayers,
    probe: Probe,
) -> Selection<'a> {
    let rows: Vec<&StabilityRow> = point_rows(data)
        .filter(|r| r.instantiation == Instantiation::Representational && r.probe == probe)
        .filter(|r| r.layer.is_some() && r.layer == layers.get(&r.model, &r.domain))
        .collect();
    let mut description = format!(
        "the {} probe retrained under each condition at the veracity layer",
        probe.title()
    );
    if !layers.guessed.is_empty() {
        description
            .push_str(" (no layers.json: taken as the middle of the layers this run evaluated)");
    }
    Selection { rows, description }
}

/// Contextual rows of `probe` (beyond the paper): the baseline probe at each (model,
/// domain)'s veracity layer reading the statements after the main K's contexts, against the
/// empty-context baseline.
pub fn contextual<'a>(data: &'a RunData, layers: &VeracityLayers, probe: Probe) -> Selection<'a> {
    let rows: Vec<&StabilityRow> = point_rows(data)
        .filter(|r| r.instantiation == Instantiation::Contextual && r.probe == probe)
        .filter(|r| is_empty_baseline(r))
        .filter(|r| r.layer.is_some() && r.layer == layers.get(&r.model, &r.domain))
        .collect();
    let main_k = pstat_tables::main_k(rows.iter().filter_map(|r| r.k));
    let rows: Vec<&StabilityRow> = rows.into_iter().filter(|r| r.k == main_k).collect();
    let description = format!(
        "the baseline {} probe at the veracity layer reading each statement after the belief context of K = {} statements, against the statement without context",
        probe.title(),
        main_k.map_or("?".to_string(), |k| k.to_string())
    );
    Selection { rows, description }
}

/// Behavioral rows per (K, baseline) variant, labelled for Fig. A5.
pub fn behavioral_variants(data: &RunData) -> Vec<(String, &StabilityRow)> {
    let mut out: Vec<((usize, bool), String, &StabilityRow)> =
        behavioral_rows(data, &preferred_formats(data).0)
            .into_iter()
            .map(|r| {
                let k = r.k.unwrap_or(0);
                let baseline = r.baseline.unwrap_or(Baseline::Empty);
                let label = format!("K = {k}, {baseline} baseline");
                ((k, baseline != Baseline::Empty), label, r)
            })
            .collect();
    out.sort_by_key(|(key, _, _)| *key);
    out.into_iter().map(|(_, label, r)| (label, r)).collect()
}

/// The primary probe's (sAwMIL's) rows labelled by their offset from the veracity layer
/// (Fig. A4).
pub fn primary_layer_offsets<'a>(
    data: &'a RunData,
    layers: &VeracityLayers,
) -> Vec<(i64, &'a StabilityRow)> {
    let mut out: Vec<(i64, &StabilityRow)> = point_rows(data)
        .filter(|r| r.instantiation == Instantiation::Representational && r.probe == Probe::PRIMARY)
        .filter_map(|r| {
            let l = layers.get(&r.model, &r.domain)?;
            Some((r.layer? as i64 - l as i64, r))
        })
        .collect();
    out.sort_by_key(|(offset, _)| *offset);
    out
}

pub fn offset_label(offset: i64) -> String {
    match offset {
        0 => "l (veracity layer)".to_string(),
        o if o > 0 => format!("l+{o}"),
        o => format!("l−{}", -o),
    }
}

/// One value per model → a summary dot: with one model its own value and bootstrap interval;
/// with several, the median and the interquartile range across models.
pub fn across_models(dots: &[Dot]) -> Option<Dot> {
    match dots {
        [] => None,
        [one] => Some(*one),
        many => {
            let mut v: Vec<f64> = many.iter().map(|d| d.value).collect();
            v.sort_by(f64::total_cmp);
            Some(Dot {
                value: percentile(&v, 0.5),
                lo: Some(percentile(&v, 0.25)),
                hi: Some(percentile(&v, 0.75)),
            })
        }
    }
}

/// The noise floor of a panel as one dot: the median of its refits' rates (over every model),
/// with the band from the smallest to the largest.
pub fn floor_dot(values: &[f64]) -> Option<Dot> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let (lo, hi) = (*v.first()?, *v.last()?);
    Some(Dot {
        value: percentile(&v, 0.5),
        lo: Some(lo),
        hi: Some(hi),
    })
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| percentile(&v, 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: Vec<StabilityRow>) -> RunData {
        RunData {
            dir: "run".into(),
            stability: rows,
            ..RunData::default()
        }
    }

    fn behavioral(domain: &str, format: &str, n_baseline_true: usize) -> StabilityRow {
        StabilityRow {
            model: "m".into(),
            domain: domain.into(),
            instantiation: Instantiation::Behavioral,
            probe: Probe::Prompt,
            k: Some(100),
            baseline: Some(Baseline::Empty),
            format: Some(format.parse().unwrap()),
            condition: "synthetic_tf".into(),
            n_baseline_true,
            n_baseline_not_true: 100 - n_baseline_true,
            ..StabilityRow::default()
        }
    }

    #[test]
    fn chat_is_preferred_unless_its_baseline_is_too_small() {
        let usable = run(vec![
            behavioral("city", "chat", 40),
            behavioral("city", "plain", 90),
        ]);
        let cell = |d: &'static str| ("m", d);
        assert_eq!(
            preferred_formats(&usable).0[&cell("city")],
            Some(PromptFormat::Chat)
        );
        assert!(!behavioral_main(&usable).description.contains("plain"));

        // The chat model that answers "c" to everything: no True beliefs to retract.
        let empty_chat = run(vec![
            behavioral("city", "chat", 0),
            behavioral("city", "plain", 90),
            behavioral("word", "chat", 3),
            behavioral("word", "plain", 10),
        ]);
        let (formats, passed_over) = preferred_formats(&empty_chat);
        assert_eq!(formats[&cell("word")], Some(PromptFormat::Plain));
        assert_eq!(passed_over.len(), 2);
        let main = behavioral_main(&empty_chat);
        assert!(
            main.rows
                .iter()
                .all(|r| r.format == Some(PromptFormat::Plain))
        );
        assert!(
            main.description.contains("True beliefs: m (city, word)"),
            "{}",
            main.description
        );

        // `auto` ran only the chat baseline in city (answers.csv), and chat in word.
        let mut auto = run(vec![
            behavioral("city", "plain", 90),
            behavioral("word", "chat", 50),
        ]);
        auto.answers = Some(vec![crate::inputs::AnswerRow {
            model: "m".into(),
            domain: "city".into(),
            format: PromptFormat::Chat,
            k: 100,
            baseline: Baseline::Empty,
            condition: "baseline".into(),
            draw: "main".into(),
            n: 100,
            a: 0,
            b: 0,
            c: 100,
            mean_leftover: 0.0,
            flag: Some("small_baseline".into()),
        }]);
        let (formats, passed_over) = preferred_formats(&auto);
        assert_eq!(formats[&cell("city")], Some(PromptFormat::Plain));
        assert_eq!(formats[&cell("word")], Some(PromptFormat::Chat));
        assert_eq!(passed_over.into_iter().collect::<Vec<_>>(), [cell("city")]);
        assert_eq!(behavioral_main(&auto).rows.len(), 2);
    }
}
