//! "What this run shows": sentences computed from the run's numbers, so the report states
//! what this run found (including where it disagrees with the paper), never the paper's
//! conclusions.

use crate::inputs::{BigramDistanceRow, DistanceRow, FamiliarityRow, RelabelledRow, RunData};
use crate::names::{
    ConditionTitles, KindFamily, domain_order, domain_title, kind_family, kind_title, sorted_unique,
};
use crate::select::{Measure, Selection, median};
use crate::tables::Table;
use pstat_stability::{MIN_BASELINE_TRUE, StabilityRow};
use pstat_tables::{Baseline, Instantiation, Probe, PromptFormat};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub heading: String,
    pub lines: Vec<String>,
}

/// The comparisons the paper's claim rests on: an unfamiliar (Synthetic) condition against a
/// familiar (Fictional) one.
pub const PAIRS: [(&str, &str); 4] = [
    ("synthetic_tf", "fictional"),
    ("synthetic_fi", "fictional"),
    ("synthetic_tf", "fictional_t"),
    ("synthetic_fi", "fictional_t"),
];

/// Rows that differ only in their condition form a cell (model, domain, configuration).
type CellKey = (
    String,
    String,
    Instantiation,
    Probe,
    Option<usize>,
    Option<Baseline>,
    Option<PromptFormat>,
    Option<usize>,
);

fn cells<'a>(rows: &[&'a StabilityRow]) -> BTreeMap<CellKey, BTreeMap<&'a str, &'a StabilityRow>> {
    let mut out: BTreeMap<CellKey, BTreeMap<&str, &StabilityRow>> = BTreeMap::new();
    for r in rows {
        let key = (
            r.model.clone(),
            r.domain.clone(),
            r.instantiation,
            r.probe,
            r.k,
            r.baseline,
            r.format,
            r.layer,
        );
        out.entry(key).or_default().insert(r.condition.as_str(), r);
    }
    out
}

/// How often condition `a` has a larger rate than `b` over the cells where both are defined.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PairCount {
    pub cells: usize,
    pub larger: usize,
    /// a's interval lies wholly above b's.
    pub clearly_larger: usize,
}

pub fn compare_pair(
    rows: &[&StabilityRow],
    a: &str,
    b: &str,
    measure: Measure,
) -> (PairCount, Vec<f64>, Vec<f64>) {
    let mut count = PairCount::default();
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    for by_condition in cells(rows).values() {
        let (Some(ra), Some(rb)) = (by_condition.get(a), by_condition.get(b)) else {
            continue;
        };
        let (Some(da), Some(db)) = (measure.dot(ra), measure.dot(rb)) else {
            continue;
        };
        count.cells += 1;
        count.larger += usize::from(da.value > db.value);
        count.clearly_larger +=
            usize::from(matches!((da.lo, db.hi), (Some(lo), Some(hi)) if lo > hi));
        va.push(da.value);
        vb.push(db.value);
    }
    (count, va, vb)
}

/// Training bags relabelled relative to Θ0 under `a` and under `b`, summed over the probe units
/// of the cells where [`compare_pair`] compares them; `None` when `relabelled` has none of them.
fn relabelled_pair(
    rows: &[&StabilityRow],
    a: &str,
    b: &str,
    relabelled: &[RelabelledRow],
) -> Option<(usize, usize)> {
    let mut totals: BTreeMap<(&str, &str, Probe, usize, &str), usize> = BTreeMap::new();
    for r in relabelled {
        *totals
            .entry((&r.model, &r.domain, r.probe, r.layer, &r.condition))
            .or_default() += r.relabelled;
    }
    let (mut ta, mut tb, mut found) = (0, 0, false);
    for by_condition in cells(rows).values() {
        let (Some(ra), Some(rb)) = (by_condition.get(a), by_condition.get(b)) else {
            continue;
        };
        let measure = Measure::Retraction;
        let (Some(_), Some(_), Some(layer)) = (measure.dot(ra), measure.dot(rb), ra.layer) else {
            continue;
        };
        let of = |c: &str| {
            totals
                .get(&(ra.model.as_str(), ra.domain.as_str(), ra.probe, layer, c))
                .copied()
        };
        if let (Some(na), Some(nb)) = (of(a), of(b)) {
            (ta, tb, found) = (ta + na, tb + nb, true);
        }
    }
    found.then_some((ta, tb))
}

/// Sentences for the main selections: each Synthetic-vs-Fictional pair, with medians. Where the
/// two conditions relabelled more than twice as many training bags one as the other
/// (`relabelled`, representational rows), the line says so: a larger ρ_R may then come from
/// moving more training data rather than from the statements' familiarity.
pub fn stability_finding(
    name: &str,
    selection: &Selection,
    relabelled: &[RelabelledRow],
    titles: &ConditionTitles,
) -> Finding {
    let mut lines = Vec::new();
    for (a, b) in PAIRS {
        let (count, va, vb) = compare_pair(&selection.rows, a, b, Measure::Retraction);
        if count.cells == 0 {
            continue;
        }
        let mut line = format!(
            "{} retracts more than {} in {} of {} (model, domain) cells (its interval lies wholly above in {}); median ρ_R {} vs {}.",
            titles.title(a),
            titles.title(b),
            count.larger,
            count.cells,
            count.clearly_larger,
            fmt_opt(median(&va)),
            fmt_opt(median(&vb)),
        );
        if let Some((na, nb)) = relabelled_pair(&selection.rows, a, b, relabelled)
            && (na > 2 * nb || nb > 2 * na)
        {
            line.push_str(&format!(
                " Their training data differ by more than 2× in what was relabelled relative to Θ0 ({na} vs {nb} bags): part of the gap may come from how much was relabelled."
            ));
        }
        lines.push(line);
    }
    let all: Vec<f64> = selection
        .rows
        .iter()
        .filter_map(|r| r.retraction_rate)
        .collect();
    if lines.is_empty() {
        lines.push("No (model, domain) cell has both a Synthetic and a Fictional condition, so the comparison cannot be made.".into());
    }
    lines.push(format!(
        "Median ρ_R over all {} perturbed (model, domain, condition) rows: {}.",
        all.len(),
        fmt_opt(median(&all))
    ));
    Finding {
        heading: format!("{name}: {}", selection.description),
        lines,
    }
}

/// The pair comparison over several selections (main and robustness) as one table.
pub fn comparison_table(
    selections: &[(&str, Vec<&StabilityRow>)],
    titles: &ConditionTitles,
) -> Table {
    let mut header = vec!["Comparison (ρ_R)".to_string()];
    header.extend(selections.iter().map(|(name, _)| name.to_string()));
    let rows = PAIRS
        .iter()
        .map(|(a, b)| {
            let mut row = vec![format!("{} > {}", titles.title(a), titles.title(b))];
            row.extend(selections.iter().map(|(_, rows)| {
                let (c, _, _) = compare_pair(rows, a, b, Measure::Retraction);
                if c.cells == 0 {
                    "–".to_string()
                } else {
                    format!("{} / {} ({})", c.larger, c.cells, c.clearly_larger)
                }
            }));
            row
        })
        .collect();
    Table {
        id: "table_comparisons".into(),
        title: "Synthetic vs Fictional, every selection".into(),
        caption: "In how many cells (model × domain × configuration) the first condition's retraction rate exceeds the second's: \
                  larger / cells with both (interval wholly above)."
            .into(),
        header,
        rows,
        numeric_from: 1,
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.3}"))
}

/// Per (model, domain) values of each kind family; `None` when a family is absent.
struct Families {
    true_: Option<(String, f64)>,
    false_: Option<(String, f64)>,
    fictional: Vec<(String, f64)>,
    synthetic: Vec<(String, f64)>,
}

fn families<'a>(values: impl Iterator<Item = (&'a str, f64)>) -> Families {
    let mut f = Families {
        true_: None,
        false_: None,
        fictional: vec![],
        synthetic: vec![],
    };
    for (kind, v) in values {
        let named = (kind_title(kind), v);
        match kind_family(kind) {
            KindFamily::True => f.true_ = Some(named),
            KindFamily::False => f.false_ = Some(named),
            KindFamily::Fictional => f.fictional.push(named),
            KindFamily::Synthetic => f.synthetic.push(named),
            KindFamily::Other => {}
        }
    }
    f
}

fn extreme(values: &[(String, f64)], max: bool) -> Option<&(String, f64)> {
    values
        .iter()
        .reduce(|a, b| if (b.1 > a.1) == max { b } else { a })
}

/// The paper's familiarity ordering True ≥ False > Fictional > Synthetic, per (model, domain):
/// `Ok(())` when it holds, otherwise the first link that fails.
fn ordering_verdict(f: &Families) -> Option<Result<(), String>> {
    let (t, fa) = (f.true_.as_ref()?, f.false_.as_ref()?);
    let (fic_max, fic_min) = (extreme(&f.fictional, true)?, extreme(&f.fictional, false)?);
    let syn_max = extreme(&f.synthetic, true)?;
    let fail = |hi: &(String, f64), lo: &(String, f64), op: &str| {
        Err(format!("{} {:.3} {op} {} {:.3}", lo.0, lo.1, hi.0, hi.1))
    };
    Some(if t.1 < fa.1 {
        fail(t, fa, ">")
    } else if fa.1 <= fic_max.1 {
        fail(fa, fic_max, "≥")
    } else if fic_min.1 <= syn_max.1 {
        fail(fic_min, syn_max, "≥")
    } else {
        Ok(())
    })
}

pub fn familiarity_finding(rows: &[FamiliarityRow]) -> Finding {
    let mut groups: BTreeMap<(&str, &str), Vec<(&str, f64)>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((&r.model, &r.domain))
            .or_default()
            .push((&r.kind, r.mean_object_token_prob));
    }
    let (mut holds, mut checked, mut failures) = (0, 0, Vec::new());
    for ((model, domain), values) in &groups {
        match ordering_verdict(&families(values.iter().copied())) {
            Some(Ok(())) => {
                holds += 1;
                checked += 1;
            }
            Some(Err(why)) => {
                checked += 1;
                failures.push(format!("{model} · {}: fails, {why}.", domain_title(domain)));
            }
            None => failures.push(format!(
                "{model} · {}: not all kinds present, not checked.",
                domain_title(domain)
            )),
        }
    }
    let mut lines = vec![format!(
        "The paper's familiarity ordering True ≥ False > Fictional > Synthetic (mean object-token probability) holds in {holds} of {checked} (model, domain) cells."
    )];
    lines.extend(failures);
    Finding {
        heading: "Familiarity ordering".into(),
        lines,
    }
}

pub fn distance_finding(rows: &[DistanceRow]) -> Finding {
    let mut groups: BTreeMap<(&str, &str), Vec<(&str, f64)>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((&r.model, &r.domain))
            .or_default()
            .push((&r.kind, r.mean_distance));
    }
    let (mut holds, mut checked) = (0, 0);
    let mut lines = Vec::new();
    for ((model, domain), values) in &groups {
        let f = families(values.iter().copied());
        let (Some(fic), Some(syn)) = (extreme(&f.fictional, true), extreme(&f.synthetic, false))
        else {
            continue;
        };
        checked += 1;
        if fic.1 <= syn.1 {
            holds += 1;
        } else {
            lines.push(format!(
                "{model} · {}: {} {:.3} > {} {:.3}.",
                domain_title(domain),
                fic.0,
                fic.1,
                syn.0,
                syn.1
            ));
        }
    }
    lines.insert(
        0,
        format!("Fictional statements are no more spread out (within-group distance) than Synthetic ones in {holds} of {checked} (model, domain) cells."),
    );
    Finding {
        heading: "Representational spread (Fig. 2d)".into(),
        lines,
    }
}

/// For each domain, which real or Fictional kind each Synthetic kind is lexically nearest to;
/// the construction intends Synthetic (TF) ≈ True/False and Synthetic (Fi) ≈ Fictional.
pub fn bigram_finding(rows: &[BigramDistanceRow]) -> Finding {
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    let mut lines = Vec::new();
    for domain in &domains {
        for (synthetic, expected) in [
            ("synthetic_tf", [KindFamily::True, KindFamily::False]),
            ("synthetic_fi", [KindFamily::Fictional; 2]),
        ] {
            let nearest = rows
                .iter()
                .filter(|r| &r.domain == domain)
                .filter_map(|r| {
                    let other = if kind_title(&r.kind_a) == kind_title(synthetic) {
                        &r.kind_b
                    } else if kind_title(&r.kind_b) == kind_title(synthetic) {
                        &r.kind_a
                    } else {
                        return None;
                    };
                    (kind_family(other) != KindFamily::Synthetic).then_some((other, r.js_distance))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((other, d)) = nearest {
                let as_intended = expected.contains(&kind_family(other));
                lines.push(format!(
                    "{}: {} is nearest to {} (JS distance {d:.3}){}.",
                    domain_title(domain),
                    kind_title(synthetic),
                    kind_title(other),
                    if as_intended {
                        ", as constructed"
                    } else {
                        ", not the kind it was built to mimic"
                    }
                ));
            }
        }
    }
    Finding {
        heading: "Lexical match (Fig. 2a–c)".into(),
        lines,
    }
}

/// Baselines with fewer than MIN_BASELINE_TRUE True beliefs make their rates noisy.
pub fn flagged_baselines(data: &RunData) -> Finding {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in data
        .stability
        .iter()
        .filter(|r| r.flag.as_deref() == Some("small_baseline"))
    {
        let mut what = vec![r.instantiation.to_string(), r.probe.to_string()];
        what.extend(r.k.map(|k| format!("K = {k}")));
        what.extend(r.baseline.map(|b| format!("{b} baseline")));
        what.extend(r.format.map(|f| f.to_string()));
        what.extend(r.layer.map(|l| format!("layer {l}")));
        seen.insert(
            format!(
                "{} · {} · {}",
                r.model,
                domain_title(&r.domain),
                what.join(", ")
            ),
            r.n_baseline_true,
        );
    }
    let mut lines: Vec<String> = seen
        .iter()
        .map(|(what, n)| format!("{what}: |B_true(Θ0)| = {n}."))
        .collect();
    lines.insert(
        0,
        if seen.is_empty() {
            format!("No baseline has fewer than {MIN_BASELINE_TRUE} held-out True statements judged True.")
        } else {
            format!(
                "{} baseline(s) have fewer than {MIN_BASELINE_TRUE} held-out True statements judged True; their rates are noisy:",
                seen.len()
            )
        },
    );
    Finding {
        heading: "Small baselines".into(),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fam(kind: &str, v: f64) -> (&str, f64) {
        (kind, v)
    }

    #[test]
    fn familiarity_ordering_names_the_failing_link() {
        let ok = families(
            [
                fam("true", 0.3),
                fam("false", 0.2),
                fam("fictional_t", 0.1),
                fam("synthetic_tf", 0.01),
            ]
            .into_iter(),
        );
        assert_eq!(ordering_verdict(&ok), Some(Ok(())));
        let bad = families(
            [
                fam("true", 0.2),
                fam("false", 0.25),
                fam("fictional_t", 0.1),
                fam("synthetic_fi", 0.01),
            ]
            .into_iter(),
        );
        assert_eq!(
            ordering_verdict(&bad),
            Some(Err("False 0.250 > True 0.200".into()))
        );
        let syn_high = families(
            [
                fam("true", 0.3),
                fam("false", 0.2),
                fam("fictional", 0.05),
                fam("synthetic_fi", 0.06),
            ]
            .into_iter(),
        );
        assert_eq!(
            ordering_verdict(&syn_high),
            Some(Err("Synthetic (Fi) 0.060 ≥ Fictional 0.050".into()))
        );
        let partial = families([fam("true", 0.3)].into_iter());
        assert_eq!(ordering_verdict(&partial), None);
    }
}
