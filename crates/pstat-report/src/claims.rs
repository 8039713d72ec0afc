//! What the run's statistics say, read from the tables that hold them: the paired tests of
//! `comparisons.csv` (McNemar's exact test, Holm within each claim's family), the across-model
//! tables and sign tests, and, first, what this run can and cannot show: degenerate judges,
//! every Θ effect against the representational noise floor and the behavioral resampling
//! spread, and the cells where nothing can be concluded.

use crate::inputs::{
    AcrossModelPairRow, AcrossModelRow, AnswerRow, ComparisonFamilyRow, ComparisonRow, ResampleRow,
    RunData, SignTestRow,
};
use crate::names::{ConditionTitles, domain_order, domain_title};
use crate::select::{VeracityLayers, behavioral_main, is_perturbation};
use crate::summary::Finding;
use crate::tables::Table;
use pstat_stability::{ALPHA, StabilityRow};
use pstat_tables::{
    BASELINE_REFIT, Baseline, Instantiation, MAIN_VARIANT, POOLED, Probe, VOLUME_MATCHED,
};
use std::collections::{BTreeMap, BTreeSet};

/// A behavioral judge giving one answer to at least this share of the statements of a unit
/// is degenerate there: its retractions and expansions are set by that answer, not by Θ.
pub const DEGENERATE_SHARE: f64 = 0.95;

fn pct(v: f64) -> String {
    format!("{:.0}%", 100.0 * v)
}

fn what(instantiation: Instantiation, probe: Probe) -> String {
    match (instantiation, probe) {
        (Instantiation::Behavioral, _) => "behavioral".into(),
        (Instantiation::Contextual, p) if p.is_representational() => {
            format!("contextual {}", p.title())
        }
        (_, p) => p.title().into(),
    }
}

/// The most common answer of a unit and its share of the answers.
fn top_answer(r: &AnswerRow) -> Option<(char, f64)> {
    let total = r.a + r.b + r.c;
    if total == 0 {
        return None;
    }
    let (letter, n) = [('a', r.a), ('b', r.b), ('c', r.c)]
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .expect("three answers");
    Some((letter, n as f64 / total as f64))
}

/// Per (model, format, K, baseline context): the perturbed (model, domain) units whose judge is
/// degenerate; cells of the main selection where every perturbation's judge is.
struct Degenerate {
    lines: Vec<String>,
    /// (model, domain) whose main behavioral units are all degenerate.
    cells: BTreeSet<(String, String)>,
}

fn degenerate_judges(answers: &[AnswerRow], titles: &ConditionTitles) -> Degenerate {
    let mut lines = Vec::new();
    let mut cells = BTreeSet::new();
    type Group = (String, String, usize, String);
    let mut groups: BTreeMap<Group, Vec<&AnswerRow>> = BTreeMap::new();
    for r in answers.iter().filter(|r| r.draw == "main") {
        groups
            .entry((
                r.model.clone(),
                r.format.to_string(),
                r.k,
                r.baseline.to_string(),
            ))
            .or_default()
            .push(r);
    }
    for ((model, format, k, baseline), rows) in &groups {
        let (context, baselines): (Vec<&&AnswerRow>, Vec<&&AnswerRow>) =
            rows.iter().partition(|r| is_perturbation(&r.condition));
        let degenerate: Vec<(&AnswerRow, char, f64)> = context
            .iter()
            .filter_map(|r| {
                let (letter, share) = top_answer(r)?;
                (share >= DEGENERATE_SHARE).then_some((**r, letter, share))
            })
            .collect();
        if !degenerate.is_empty() {
            let letters: BTreeSet<char> = degenerate.iter().map(|d| d.1).collect();
            let lo = degenerate.iter().map(|d| d.2).fold(1.0, f64::min);
            let hi = degenerate.iter().map(|d| d.2).fold(0.0, f64::max);
            let letters: Vec<String> = letters.iter().map(|l| format!("\"{l}\"")).collect();
            lines.push(format!(
                "Degenerate judge: with a belief context, {model} ({format}, K = {k}, {baseline} baseline) answers {} to {}–{} of the statements in {} of {} (domain, Θ) units, so its retractions and expansions there are set by that answer, not by Θ.",
                letters.join(" or "),
                pct(lo),
                pct(hi),
                degenerate.len(),
                context.len()
            ));
        }
        for r in &baselines {
            if let Some((letter, share)) = top_answer(r).filter(|t| t.1 >= DEGENERATE_SHARE) {
                // Θ0's context: none, or K True statements (the True baseline).
                let context = match r.baseline {
                    Baseline::Empty => format!(
                        "with no belief context ({}, the empty baseline)",
                        titles.title(&r.condition)
                    ),
                    Baseline::True => format!(
                        "with K = {} True statements as its belief context ({}, the True baseline)",
                        r.k,
                        titles.title(&r.condition)
                    ),
                };
                lines.push(format!(
                    "Degenerate judge: {context}, {model} ({format}) answers \"{letter}\" to {} of the {} statements.",
                    pct(share),
                    domain_title(&r.domain)
                ));
            }
        }
        let mut per_domain: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for r in &context {
            let e = per_domain.entry(&r.domain).or_default();
            e.0 += 1;
            e.1 += usize::from(top_answer(r).is_some_and(|t| t.1 >= DEGENERATE_SHARE));
        }
        for (domain, (n, bad)) in per_domain {
            if n > 0 && n == bad {
                cells.insert((model.clone(), domain.to_string()));
            }
        }
    }
    Degenerate { lines, cells }
}

/// The refits' ρ_R of each (model, domain, probe) at the veracity layer.
fn floors<'a>(
    data: &'a RunData,
    layers: &VeracityLayers,
) -> BTreeMap<(String, String, Probe), Vec<&'a StabilityRow>> {
    let mut out: BTreeMap<(String, String, Probe), Vec<&StabilityRow>> = BTreeMap::new();
    for r in data.stability.iter().filter(|r| {
        r.condition == BASELINE_REFIT
            && r.instantiation == Instantiation::Representational
            && r.layer.is_some()
            && r.layer == layers.get(&r.model, &r.domain)
    }) {
        out.entry((r.model.clone(), r.domain.clone(), r.probe))
            .or_default()
            .push(r);
    }
    out
}

/// "What this run can and cannot show": the first finding of the report.
pub fn limits(data: &RunData, layers: &VeracityLayers, titles: &ConditionTitles) -> Finding {
    let mut lines = Vec::new();
    let degenerate = degenerate_judges(data.answers.as_deref().unwrap_or_default(), titles);
    lines.extend(degenerate.lines.iter().cloned());
    let mut nothing: Vec<String> = Vec::new();
    noise_floor_limits(data, layers, titles, &mut lines, &mut nothing);
    lines.extend(unconverged_limits(data, layers));
    resampling_limits(data, &degenerate, &mut lines, &mut nothing);
    if nothing.is_empty() {
        nothing.push("Every cell has at least one perturbation beyond its noise floor and a judge that answers more than one way.".into());
    }
    lines.extend(nothing);
    Finding {
        heading: "What this run can and cannot show".into(),
        lines,
    }
}

/// Per representational cell: its noise floor against every Θ (`lines`), and the cells where
/// no Θ exceeds it (`nothing`).
fn noise_floor_limits(
    data: &RunData,
    layers: &VeracityLayers,
    titles: &ConditionTitles,
    lines: &mut Vec<String>,
    nothing: &mut Vec<String>,
) {
    let floors = floors(data, layers);
    let main_rows = |model: &str, domain: &str, probe: Probe| -> Vec<&StabilityRow> {
        data.stability
            .iter()
            .filter(|r| {
                r.instantiation == Instantiation::Representational
                    && r.probe == probe
                    && r.model == model
                    && r.domain == domain
                    && r.resample.is_none()
                    && is_perturbation(&r.condition)
                    && r.layer.is_some()
                    && r.layer == layers.get(model, domain)
            })
            .collect()
    };
    // Every cell refits `noise_floor_refits` times, numbered from 1; a refit whose fit was
    // degenerate is skipped, so the largest number in the run is the configured count.
    let configured = data
        .stability
        .iter()
        .filter(|r| r.condition == BASELINE_REFIT)
        .filter_map(|r| refit_number(r.resample.as_deref()?))
        .max()
        .unwrap_or(0);
    let mut probes_with_rows: BTreeSet<(String, String, Probe)> = BTreeSet::new();
    for r in data
        .stability
        .iter()
        .filter(|r| r.instantiation == Instantiation::Representational && r.resample.is_none())
    {
        probes_with_rows.insert((r.model.clone(), r.domain.clone(), r.probe));
    }
    for (model, domain, probe) in &probes_with_rows {
        let rows = main_rows(model, domain, *probe);
        if rows.is_empty() {
            continue;
        }
        let cell = format!(
            "{} · {model} · {}",
            what(Instantiation::Representational, *probe),
            domain_title(domain)
        );
        let Some(refits) = floors.get(&(model.clone(), domain.clone(), *probe)) else {
            lines.push(format!(
                "{cell}: no noise floor in this run (representational.noise_floor_refits = 0): its Θ effects cannot be told apart from refitting alone."
            ));
            continue;
        };
        let rates: Vec<f64> = refits.iter().filter_map(|r| r.retraction_rate).collect();
        let (lo, hi) = (
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        );
        let above: Vec<String> = rows
            .iter()
            .filter(|r| r.exceeds_floor == Some(true))
            .map(|r| {
                format!(
                    "{} {}",
                    titles.title(&r.condition),
                    pct(r.retraction_rate.unwrap_or(0.0))
                )
            })
            .collect();
        let present: BTreeSet<usize> = refits
            .iter()
            .filter_map(|r| refit_number(r.resample.as_deref()?))
            .collect();
        let skipped: Vec<String> = (1..=configured)
            .filter(|i| !present.contains(i))
            .map(|i| format!("refit{i}"))
            .collect();
        let refitted = "refits of the baseline probe with unchanged labels";
        let count = match skipped.as_slice() {
            [] => format!("{} {refitted}", rates.len()),
            [one] => format!(
                "{} of the {configured} {refitted} ({one} was skipped: its fit was degenerate)",
                rates.len()
            ),
            many => format!(
                "{} of the {configured} {refitted} ({} were skipped: their fits were degenerate)",
                rates.len(),
                many.join(", ")
            ),
        };
        lines.push(format!(
            "{cell}: {count} retract {}–{} of its beliefs (the noise floor); {} of {} perturbations retract more than every refit{}.",
            pct(lo),
            pct(hi),
            above.len(),
            rows.len(),
            if above.is_empty() { String::new() } else { format!(" ({})", above.join(", ")) }
        ));
        if above.is_empty() {
            nothing.push(format!(
                "{cell}: nothing can be concluded — every perturbation retracts no more than refitting with unchanged labels does."
            ));
        }
    }
}

/// The number of a noise-floor refit's resample name, `refit<i>`.
fn refit_number(resample: &str) -> Option<usize> {
    resample.strip_prefix("refit")?.parse().ok()
}

/// Whether a representational row's fit (the baseline's or the perturbed probe's QP) stopped
/// at the solver's caps before converging.
fn unconverged(r: &StabilityRow) -> bool {
    r.instantiation == Instantiation::Representational && r.converged == Some(false)
}

/// Per representational (model, domain, probe): the layers whose sAwMIL fits did not converge,
/// so their rates, and at the veracity layer their paired comparisons, rest on approximate
/// probes.
fn unconverged_limits(data: &RunData, layers: &VeracityLayers) -> Vec<String> {
    type Cell = (String, String, Probe);
    // Per layer: (rows with an unconverged fit, rows with a convergence record).
    let mut cells: BTreeMap<Cell, BTreeMap<usize, (usize, usize)>> = BTreeMap::new();
    for r in data
        .stability
        .iter()
        .filter(|r| r.instantiation == Instantiation::Representational && r.converged.is_some())
    {
        let Some(layer) = r.layer else { continue };
        let counts = cells
            .entry((r.model.clone(), r.domain.clone(), r.probe))
            .or_default()
            .entry(layer)
            .or_default();
        counts.0 += usize::from(unconverged(r));
        counts.1 += 1;
    }
    let mut lines = Vec::new();
    for ((model, domain, probe), by_layer) in cells {
        let veracity = layers.get(&model, &domain);
        let at: Vec<String> = by_layer
            .iter()
            .filter(|(_, (bad, _))| *bad > 0)
            .map(|(&layer, (bad, n))| {
                let which = if Some(layer) == veracity {
                    ", the veracity layer"
                } else {
                    ""
                };
                format!("layer {layer}{which} ({bad} of {n} rows)")
            })
            .collect();
        let Some((last, rest)) = at.split_last() else {
            continue;
        };
        let at = if rest.is_empty() {
            last.clone()
        } else {
            format!("{} and {last}", rest.join(", "))
        };
        let compared = if veracity.is_some_and(|v| by_layer.get(&v).is_some_and(|c| c.0 > 0)) {
            ", and so do the cell's paired comparisons at the veracity layer"
        } else {
            ""
        };
        lines.push(format!(
            "{} · {model} · {}: fits (the QP of the baseline or of the perturbed probe) did not converge before the solver's caps at {at}: the rates of those rows rest on approximate probes{compared}.",
            what(Instantiation::Representational, probe),
            domain_title(&domain)
        ));
    }
    lines
}

/// Whether a representational comparison's two rates rest on a fit that did not converge.
fn on_approximate_probe(stability: &[StabilityRow], c: &ComparisonRow) -> bool {
    let resample = (c.variant != MAIN_VARIANT).then_some(c.variant.as_str());
    c.instantiation == Instantiation::Representational
        && stability.iter().any(|r| {
            unconverged(r)
                && r.model == c.model
                && r.domain == c.domain
                && r.probe == c.probe
                && r.layer == c.layer
                && r.resample.as_deref() == resample
                && (r.condition == c.condition_a || r.condition == c.condition_b)
        })
}

/// Per behavioral cell of the main selection: how far ρ_R moves over context draws
/// (`lines`), and the cells whose judge or baseline leaves nothing to conclude (`nothing`).
fn resampling_limits(
    data: &RunData,
    degenerate: &Degenerate,
    lines: &mut Vec<String>,
    nothing: &mut Vec<String>,
) {
    let behavioral = behavioral_main(data);
    let resamples = data.resamples.as_deref().unwrap_or_default();
    let mut spread: BTreeMap<(&str, &str), Vec<&ResampleRow>> = BTreeMap::new();
    for r in resamples.iter().filter(|r| r.n_draws > 1) {
        let main = behavioral.rows.iter().any(|b| {
            b.model == r.model
                && b.domain == r.domain
                && b.format == Some(r.format)
                && b.k == Some(r.k)
                && b.baseline == Some(r.baseline)
        });
        if main {
            spread.entry((&r.model, &r.domain)).or_default().push(r);
        }
    }
    let behavioral_cells: BTreeSet<(&str, &str)> = behavioral
        .rows
        .iter()
        .map(|r| (r.model.as_str(), r.domain.as_str()))
        .collect();
    for (model, domain) in &behavioral_cells {
        let cell = format!("behavioral · {model} · {}", domain_title(domain));
        match spread.get(&(*model, *domain)) {
            Some(rows) => {
                let sd = rows
                    .iter()
                    .filter_map(|r| r.retraction_rate_sd)
                    .fold(0.0, f64::max);
                let range = rows
                    .iter()
                    .filter_map(|r| Some(r.retraction_rate_max? - r.retraction_rate_min?))
                    .fold(0.0, f64::max);
                lines.push(format!(
                    "{cell}: over {} draws of each belief context, ρ_R moves by up to {} (largest standard deviation {:.3}): a difference between two Θ smaller than that can come from which statements were drawn.",
                    rows[0].n_draws,
                    pct(range),
                    sd
                ));
            }
            None => lines.push(format!(
                "{cell}: the resampling spread of the belief contexts was not measured (behavioral.resamples = 0), so a difference between two Θ cannot be told apart from the draw of their contexts."
            )),
        }
        if degenerate
            .cells
            .contains(&(model.to_string(), domain.to_string()))
        {
            nothing.push(format!(
                "{cell}: nothing can be concluded — the judge gives the same answer whatever the context."
            ));
        } else if behavioral.rows.iter().any(|r| {
            r.model == *model && r.domain == *domain && r.flag.as_deref() == Some("small_baseline")
        }) {
            nothing.push(format!(
                "{cell}: nothing can be concluded — its baseline believes too few held-out True statements."
            ));
        }
    }
}

fn signed(v: f64) -> String {
    format!("{v:+.3}")
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// One finding per (instantiation, probe): each family's paired tests, in words.
pub fn paired_findings(
    stability: &[StabilityRow],
    comparisons: &[ComparisonRow],
    families: &[ComparisonFamilyRow],
    titles: &ConditionTitles,
) -> Vec<Finding> {
    let mut by_probe: BTreeMap<(Instantiation, Probe), BTreeMap<&str, Vec<&ComparisonRow>>> =
        BTreeMap::new();
    for r in comparisons {
        by_probe
            .entry((r.instantiation, r.probe))
            .or_default()
            .entry(&r.family)
            .or_default()
            .push(r);
    }
    by_probe
        .into_iter()
        .map(|((instantiation, probe), fams)| {
            let mut lines = Vec::new();
            let mut ordered: Vec<(&str, Vec<&ComparisonRow>)> = fams.into_iter().collect();
            // Main claims first, then their volume-matched controls.
            ordered.sort_by_key(|(_, rows)| rows[0].variant != MAIN_VARIANT);
            let main_rows: Vec<&ComparisonRow> = ordered
                .iter()
                .flat_map(|(_, rows)| rows.iter().copied())
                .filter(|r| r.variant == MAIN_VARIANT)
                .collect();
            for (family, mut rows) in ordered {
                rows.sort_by(|a, b| domain_order(&a.domain, &b.domain).then(a.model.cmp(&b.model)));
                let first = rows[0];
                let (title_a, title_b) = (titles.title(&first.condition_a), titles.title(&first.condition_b));
                let significant = rows.iter().filter(|r| r.significant).count();
                let approximate = rows
                    .iter()
                    .filter(|r| r.significant && on_approximate_probe(stability, r))
                    .count();
                let approximate = if approximate > 0 {
                    format!(" ({approximate} on an approximate probe)")
                } else {
                    String::new()
                };
                // A count of significant cells says nothing of the claim until it says which
                // way they go.
                let direction = if significant > 0 {
                    let larger = rows.iter().filter(|r| r.significant && r.difference > 0.0).count();
                    format!(": {title_a} > {title_b} in {larger}, < in {}", significant - larger)
                } else {
                    String::new()
                };
                let reversed: Vec<String> = rows
                    .iter()
                    .filter(|r| r.variant != MAIN_VARIANT && r.significant)
                    .filter(|r| {
                        main_rows.iter().any(|m| {
                            m.significant
                                && (m.model.as_str(), m.domain.as_str(), m.condition_a.as_str(), m.condition_b.as_str())
                                    == (r.model.as_str(), r.domain.as_str(), r.condition_a.as_str(), r.condition_b.as_str())
                                && m.difference * r.difference < 0.0
                        })
                    })
                    .map(|r| format!("{} · {}", r.model, domain_title(&r.domain)))
                    .collect();
                let reversed = if reversed.is_empty() {
                    String::new()
                } else {
                    format!(
                        " Relabelling the same number of training bags reverses the direction of the main rows in {} (significant both times).",
                        reversed.join(", ")
                    )
                };
                let smallest = families
                    .iter()
                    .find(|f| f.family == family)
                    .map(|f| format!("; the smallest adjusted p it could reach is {}", p_text(f.smallest_attainable_p_holm)))
                    .unwrap_or_default();
                let cells: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        let floor = match (r.exceeds_floor, r.floor_difference) {
                            (Some(false), Some(s)) => format!(", within the noise floor's spread {s:.3}"),
                            // Beyond the floor says nothing without a significant test.
                            (Some(true), Some(s)) if r.significant => format!(", beyond the noise floor's spread {s:.3}"),
                            (Some(true), Some(s)) => format!(", beyond the noise floor's spread {s:.3} but not significant"),
                            _ => String::new(),
                        };
                        format!(
                            "{} · {} Δρ_R {} [{}, {}] over {} statements ({} vs {} retracted by one only), p_holm {}{}{}",
                            r.model,
                            domain_title(&r.domain),
                            signed(r.difference),
                            signed(r.difference_lo),
                            signed(r.difference_hi),
                            r.n_baseline_true,
                            r.a_only,
                            r.b_only,
                            p_text(r.p_holm),
                            match (r.significant, on_approximate_probe(stability, r)) {
                                (true, true) => " (significant; approximate probe: a sAwMIL fit did not converge)",
                                (true, false) => " (significant)",
                                (false, true) => " (approximate probe: a sAwMIL fit did not converge)",
                                (false, false) => "",
                            },
                            floor
                        )
                    })
                    .collect();
                lines.push(format!(
                    "{title_a} − {title_b}{}: significant in {significant} of {} cells{approximate}{direction} (exact McNemar test, Holm within this family of {}{smallest}).{reversed} {}.",
                    if first.variant == VOLUME_MATCHED { ", every Θ relabelling the same number of training bags" } else { "" },
                    rows.len(),
                    first.family_size,
                    cells.join("; ")
                ));
            }
            Finding {
                heading: match instantiation {
                    Instantiation::Behavioral => "Behavioral: paired comparisons".to_string(),
                    _ => format!("{}: paired comparisons", what(instantiation, probe)),
                },
                lines,
            }
        })
        .collect()
}

/// The sign tests across models, in words: per claim, pooled over domains and per domain, and
/// what the number of models allows.
pub fn across_model_finding(signs: &[SignTestRow], titles: &ConditionTitles) -> Finding {
    let mut claims: BTreeMap<(Instantiation, Probe, &str, &str), Vec<&SignTestRow>> =
        BTreeMap::new();
    for s in signs.iter().filter(|s| s.variant == MAIN_VARIANT) {
        claims
            .entry((s.instantiation, s.probe, &s.condition_a, &s.condition_b))
            .or_default()
            .push(s);
    }
    let mut lines = Vec::new();
    let mut most = 0;
    for ((instantiation, probe, a, b), rows) in &claims {
        let Some(pooled) = rows.iter().find(|s| s.domain == POOLED) else {
            continue;
        };
        most = most.max(pooled.positive + pooled.negative);
        let mut domains: Vec<&&SignTestRow> = rows.iter().filter(|s| s.domain != POOLED).collect();
        domains.sort_by(|x, y| domain_order(&x.domain, &y.domain));
        let per_domain: Vec<String> = domains
            .iter()
            .map(|s| {
                format!(
                    "{} {} of {} (p_holm {})",
                    domain_title(&s.domain),
                    s.positive,
                    s.n_models,
                    p_text(s.p_holm)
                )
            })
            .collect();
        lines.push(format!(
            "{} · {} > {}: larger in {} of {} models pooled over domains, smaller in {} (exact sign test p = {}{}); per domain: {}.",
            what(*instantiation, *probe),
            titles.title(a),
            titles.title(b),
            pooled.positive,
            pooled.n_models,
            pooled.negative,
            p_text(pooled.p_value),
            if pooled.significant { ", significant" } else { "" },
            per_domain.join("; ")
        ));
    }
    if lines.is_empty() {
        lines.push("No paired comparison was made, so there is no sign test across models.".into());
    } else if most < 6 {
        lines.push(format!(
            "With at most {most} model(s) showing a direction, no sign test can reach 0.05 (the smallest two-sided p over n models is 2^(1−n) = {}): the paper's claims across models need at least 6 models with a direction.",
            p_text(2f64.powi(1 - most as i32).min(1.0))
        ));
    }
    Finding {
        heading: "Across models".into(),
        lines,
    }
}

/// `comparisons.csv` as a table.
pub fn paired_table(rows: &[ComparisonRow], titles: &ConditionTitles) -> Table {
    let opt = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
    Table {
        id: "table_paired".into(),
        title: "Paired comparisons".into(),
        caption: format!(
            "comparisons.csv: per cell, ρ_R(Θa) − ρ_R(Θb) on the same baseline-True statements with its 95% bootstrap interval; \
             a only / b only: statements retracted under one of the two; exact McNemar test, Holm-adjusted within the family \
             (one comparison of one instantiation and probe across cells); significant at {ALPHA}. Floor: the largest minus the smallest ρ_R \
             of the noise floor's refits (representational)."
        ),
        header: [
            "Family",
            "Model",
            "Domain",
            "Θa",
            "Θb",
            "n",
            "Δρ_R [95% CI]",
            "a only",
            "b only",
            "p",
            "p_holm",
            "significant",
            "floor spread",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.family.clone(),
                    r.model.clone(),
                    domain_title(&r.domain),
                    titles.title(&r.condition_a),
                    titles.title(&r.condition_b),
                    r.n_baseline_true.to_string(),
                    format!(
                        "{} [{}, {}]",
                        signed(r.difference),
                        signed(r.difference_lo),
                        signed(r.difference_hi)
                    ),
                    r.a_only.to_string(),
                    r.b_only.to_string(),
                    p_text(r.p_value),
                    p_text(r.p_holm),
                    if r.significant {
                        "yes".into()
                    } else {
                        "no".into()
                    },
                    opt(r.floor_difference),
                ]
            })
            .collect(),
        numeric_from: 5,
    }
}

fn selection(
    instantiation: Instantiation,
    probe: Probe,
    k: Option<usize>,
    baseline: Option<pstat_tables::Baseline>,
    format: Option<pstat_tables::PromptFormat>,
    layer_offset: Option<i64>,
    variant: &str,
) -> String {
    let mut parts = vec![what(instantiation, probe)];
    parts.extend(k.map(|k| format!("K = {k}")));
    parts.extend(baseline.map(|b| format!("{b} baseline")));
    parts.extend(format.map(|f| f.to_string()));
    parts.extend(layer_offset.map(|o| {
        if o == 0 {
            "layer l".to_string()
        } else {
            format!("layer l{o:+}")
        }
    }));
    if variant != MAIN_VARIANT {
        parts.push(variant.replace('_', "-"));
    }
    parts.join(", ")
}

/// `across_models.csv` as a table.
pub fn across_models_table(rows: &[AcrossModelRow], titles: &ConditionTitles) -> Table {
    let opt = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
    Table {
        id: "table_across_models".into(),
        title: "Across models".into(),
        caption: "across_models.csv, the authors' perturbation summary: per selection and perturbation, the mean and median rates over the models \
                  where they are defined (with ρ_R: how many models have a ρ_R), the average rank of the perturbation by ρ_R among the selection's \
                  perturbations over those models (1 = largest; equal rates share the average of the ranks they span) and in how many models it ranks first."
            .into(),
        header: [
            "Selection", "Domain", "Θ", "models", "with ρ_R", "mean ρ_R", "median ρ_R", "mean ρ_E", "median ρ_E", "avg rank (ρ_R)", "first (ρ_R)",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    selection(r.instantiation, r.probe, r.k, r.baseline, r.format, r.layer_offset, &r.variant),
                    domain_title(&r.domain),
                    titles.title(&r.condition),
                    r.n_models.to_string(),
                    r.n_models_retraction.to_string(),
                    opt(r.retraction_rate_mean),
                    opt(r.retraction_rate_median),
                    opt(r.expansion_rate_mean),
                    opt(r.expansion_rate_median),
                    r.average_retraction_rank.map_or("–".into(), |v| format!("{v:.2}")),
                    r.n_models_ranked_first_retraction.to_string(),
                ]
            })
            .collect(),
        numeric_from: 3,
    }
}

/// `across_model_pairs.csv` as a table.
pub fn across_model_pairs_table(rows: &[AcrossModelPairRow]) -> Table {
    Table {
        id: "table_across_pairs".into(),
        title: "Synthetic vs Fictional across models".into(),
        caption: "across_model_pairs.csv, the authors' comparison table: in how many of a selection's models each comparison of retraction \
                  rates holds (a model where a rate is undefined counts as not holding), for every selection: the main ones and the robustness ones \
                  (layers l±1, l±2, other K and baselines, Mass-Mean, volume-matched)."
            .into(),
        header: ["Selection", "Domain", "Comparison", "models", "holds in", "share"]
            .map(String::from)
            .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    selection(r.instantiation, r.probe, r.k, r.baseline, r.format, r.layer_offset, &r.variant),
                    domain_title(&r.domain),
                    r.comparison.clone(),
                    r.n_models.to_string(),
                    r.num_models.to_string(),
                    format!("{:.2}", r.prop_models),
                ]
            })
            .collect(),
        numeric_from: 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CITY: &str = "city_locations";

    /// A representational sAwMIL row of model `m`.
    fn rep(domain: &str, layer: usize, condition: &str, converged: bool) -> StabilityRow {
        StabilityRow {
            model: "m".into(),
            domain: domain.into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(layer),
            condition: condition.into(),
            retraction_rate: Some(0.2),
            converged: Some(converged),
            ..StabilityRow::default()
        }
    }

    fn refit(domain: &str, layer: usize, i: usize) -> StabilityRow {
        StabilityRow {
            resample: Some(format!("refit{i}")),
            retraction_rate: Some(0.1),
            ..rep(domain, layer, BASELINE_REFIT, true)
        }
    }

    fn comparison(a_only: usize, b_only: usize, significant: bool) -> ComparisonRow {
        ComparisonRow {
            model: "m".into(),
            domain: CITY.into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(10),
            condition_a: "synthetic_tf".into(),
            condition_b: "fictional".into(),
            variant: MAIN_VARIANT.into(),
            n_baseline_true: 100,
            a_only,
            b_only,
            difference: (a_only as f64 - b_only as f64) / 100.0,
            family: "representational/sawmil/synthetic_tf-vs-fictional/main".into(),
            family_size: 1,
            p_holm: if significant { 0.001 } else { 0.5 },
            significant,
            ..ComparisonRow::default()
        }
    }

    fn run(stability: Vec<StabilityRow>) -> (RunData, VeracityLayers) {
        let data = RunData {
            stability,
            ..RunData::default()
        };
        let layers = VeracityLayers::new(&data);
        (data, layers)
    }

    fn titles() -> ConditionTitles {
        ConditionTitles::new(None)
    }

    /// City's fits at layers 9 and 10 (its veracity layer, the middle of 9..=11) stopped at the
    /// solver's caps: the limits name them, and the comparison at layer 10 says it rests on an
    /// approximate probe.
    #[test]
    fn unconverged_fits_are_named_and_their_comparisons_marked_approximate() {
        let mut rows = Vec::new();
        for (layer, converged) in [(9, false), (10, false), (11, true)] {
            for condition in ["synthetic_tf", "fictional"] {
                rows.push(rep(CITY, layer, condition, converged));
            }
        }
        rows.extend((1..=2).map(|i| refit(CITY, 10, i)));
        let (data, layers) = run(rows);
        let limits = limits(&data, &layers, &titles()).lines.join("\n");
        assert!(
            limits.contains(
                "sAwMIL · m · City Locations: fits (the QP of the baseline or of the perturbed probe) did not converge before the solver's caps at layer 9 (2 of 2 rows) and layer 10, the veracity layer (2 of 4 rows)"
            ),
            "{limits}"
        );
        assert!(
            limits.contains("rest on approximate probes, and so do the cell's paired comparisons"),
            "{limits}"
        );
        assert!(!limits.contains("layer 11"), "{limits}");
        let findings = paired_findings(&data.stability, &[comparison(30, 5, true)], &[], &titles());
        let text = findings[0].lines.join("\n");
        assert!(
            text.contains("significant in 1 of 1 cells (1 on an approximate probe): Synthetic (TF) > Fictional in 1, < in 0"),
            "{text}"
        );
        assert!(
            text.contains("(significant; approximate probe: a sAwMIL fit did not converge)"),
            "{text}"
        );
    }

    /// The count of significant cells says which way each goes, and a volume-matched row that is
    /// significant the other way from its cell's significant main row is named as a reversal.
    #[test]
    fn significant_cells_are_counted_by_direction_and_volume_matched_reversals_named() {
        let med = |c: ComparisonRow| ComparisonRow {
            domain: "med_indications".into(),
            ..c
        };
        let matched = |c: ComparisonRow| ComparisonRow {
            variant: VOLUME_MATCHED.into(),
            family: "representational/sawmil/synthetic_tf-vs-fictional/volume_matched".into(),
            ..c
        };
        let rows = vec![
            comparison(30, 5, true),
            med(comparison(5, 30, true)),
            matched(comparison(4, 25, true)),
            med(matched(comparison(3, 20, true))),
        ];
        let findings = paired_findings(&[], &rows, &[], &titles());
        let text = findings[0].lines.join("\n");
        assert!(
            text.contains(
                "Synthetic (TF) − Fictional: significant in 2 of 2 cells: Synthetic (TF) > Fictional in 1, < in 1 (exact McNemar test"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "reverses the direction of the main rows in m · City Locations (significant both times)"
            ),
            "{text}"
        );
        assert!(
            !text.contains("Medical Indications (significant both"),
            "{text}"
        );
    }

    /// A judge answering one way with no context is named for the empty baseline; one answering
    /// one way with K True statements in context, for the True baseline.
    #[test]
    fn a_degenerate_baseline_judge_names_its_baseline() {
        let answer = |baseline, b| AnswerRow {
            model: "m".into(),
            domain: "word_definitions".into(),
            format: pstat_tables::PromptFormat::Plain,
            k: 100,
            baseline,
            condition: "baseline".into(),
            draw: "main".into(),
            n: 100,
            a: 100 - b,
            b,
            c: 0,
            mean_leftover: 0.0,
            flag: None,
        };
        let answers = [answer(Baseline::Empty, 90), answer(Baseline::True, 99)];
        let lines = degenerate_judges(&answers, &titles()).lines.join("\n");
        assert!(
            lines.contains(
                "Degenerate judge: with K = 100 True statements as its belief context (Baseline, the True baseline), m (plain) answers \"b\" to 99% of the Word Definitions statements."
            ),
            "{lines}"
        );
        assert!(!lines.contains("no belief context"), "{lines}");
    }

    /// A difference beyond the floor's spread whose test is not significant says both.
    #[test]
    fn a_difference_beyond_the_floor_but_not_significant_says_so() {
        let floor = |c: ComparisonRow, exceeds| ComparisonRow {
            floor_difference: Some(0.1),
            exceeds_floor: Some(exceeds),
            ..c
        };
        let rows = [
            floor(comparison(30, 2, false), true),
            floor(
                ComparisonRow {
                    domain: "med_indications".into(),
                    ..comparison(40, 2, true)
                },
                true,
            ),
        ];
        let findings = paired_findings(&[], &rows, &[], &titles());
        let text = findings[0].lines.join("\n");
        assert!(
            text.contains(
                "p_holm 0.500, beyond the noise floor's spread 0.100 but not significant;"
            ),
            "{text}"
        );
        assert!(
            text.contains("(significant), beyond the noise floor's spread 0.100."),
            "{text}"
        );
    }

    /// The average rank is over the models with a ρ_R, and the table says how many those are.
    #[test]
    fn the_across_model_table_counts_the_models_its_ranks_are_over() {
        let row = AcrossModelRow {
            domain: CITY.into(),
            condition: "fictional".into(),
            variant: MAIN_VARIANT.into(),
            n_models: 2,
            n_models_retraction: 1,
            average_retraction_rank: Some(2.0),
            ..AcrossModelRow::default()
        };
        let table = across_models_table(&[row], &titles());
        let at = |column: &str| table.header.iter().position(|h| h == column).unwrap();
        assert_eq!(table.rows[0][at("models")], "2");
        assert_eq!(table.rows[0][at("with ρ_R")], "1");
        assert!(
            table
                .caption
                .contains("equal rates share the average of the ranks")
        );
    }

    /// Every cell refits the same number of times; a cell with fewer refit rows skipped the
    /// missing ones (their fits were degenerate), and its floor says so.
    #[test]
    fn a_noise_floor_with_a_skipped_refit_says_how_many_it_has_of_those_configured() {
        let mut rows = Vec::new();
        for domain in [CITY, "med_indications"] {
            for layer in 9..=11 {
                rows.push(rep(domain, layer, "synthetic_tf", true));
            }
        }
        rows.extend((1..=3).map(|i| refit("med_indications", 10, i)));
        rows.extend([2, 3].map(|i| refit(CITY, 10, i)));
        let (data, layers) = run(rows);
        let limits = limits(&data, &layers, &titles()).lines.join("\n");
        assert!(
            limits.contains(
                "sAwMIL · m · City Locations: 2 of the 3 refits of the baseline probe with unchanged labels (refit1 was skipped: its fit was degenerate) retract"
            ),
            "{limits}"
        );
        assert!(
            limits.contains("sAwMIL · m · Medical Indications: 3 refits of the baseline probe"),
            "{limits}"
        );
    }
}
