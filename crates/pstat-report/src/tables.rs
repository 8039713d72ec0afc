//! The report's tables, as plain rows of text the template lays out: counts (Tables A4/A5),
//! familiarity (Tables A6–A8), distances, bigram distances, veracity layers, answer
//! distributions, clusters and themes.

use crate::inputs::{
    AnswerRow, BigramDistanceRow, ClusterResult, ClusterRow, DistanceRow, FamiliarityRow,
    LayerChoice, RelabelledRow, ThemeRow,
};
use crate::names::{
    ConditionTitles, condition_order, domain_order, domain_title, kind_order, kind_title,
    sorted_unique,
};
use crate::select::is_perturbation;
use pstat_stability::StabilityRow;
use pstat_tables::Baseline;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// HTML anchor.
    pub id: String,
    /// Short name for the table of contents.
    pub title: String,
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Columns from this index on hold numbers and are right-aligned.
    pub numeric_from: usize,
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        format!("{part} (–)")
    } else {
        format!("{part} ({:.1}%)", 100.0 * part as f64 / whole as f64)
    }
}

fn interval(value: f64, lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{value:.3} [{lo:.3}, {hi:.3}]"),
        _ => format!("{value:.3}"),
    }
}

/// Tables A4 (behavioral) / A5 (representational) style: per domain and condition, the
/// beliefs of B_true(Θ0) that stay stable or are retracted (R), and the beliefs of
/// B_not-true(Θ0) that are expanded (E), per model and, with several models, summed over them.
pub fn counts_table(
    id: &str,
    title: &str,
    caption: String,
    rows: &[&StabilityRow],
    titles: &ConditionTitles,
) -> Table {
    let conditions = sorted_unique(rows.iter().map(|r| r.condition.as_str()), condition_order);
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    let header = [
        "Domain",
        "Condition",
        "Model",
        "|B_true(Θ0)|",
        "Stable",
        "Retracted R",
        "|B_not-true(Θ0)|",
        "Expanded E",
    ]
    .map(String::from)
    .to_vec();
    let line =
        |domain: &str, condition: &str, label: String, members: &[&StabilityRow]| -> Vec<String> {
            let sum =
                |get: fn(&StabilityRow) -> usize| members.iter().map(|r| get(r)).sum::<usize>();
            let (n_true, n_not) = (sum(|r| r.n_baseline_true), sum(|r| r.n_baseline_not_true));
            let retracted = sum(|r| r.retractions);
            vec![
                domain_title(domain),
                titles.title(condition),
                label,
                n_true.to_string(),
                pct(n_true.saturating_sub(retracted), n_true),
                pct(retracted, n_true),
                n_not.to_string(),
                pct(sum(|r| r.expansions), n_not),
            ]
        };
    let mut body = Vec::new();
    for domain in &domains {
        for condition in &conditions {
            let members: Vec<&StabilityRow> = rows
                .iter()
                .copied()
                .filter(|r| &r.domain == domain && &r.condition == condition)
                .collect();
            if members.is_empty() {
                continue;
            }
            for r in &members {
                body.push(line(
                    domain,
                    condition,
                    r.model.clone(),
                    std::slice::from_ref(r),
                ));
            }
            if members.len() > 1 {
                body.push(line(domain, condition, "all models".into(), &members));
            }
        }
    }
    Table {
        id: id.into(),
        title: title.into(),
        caption,
        header,
        rows: body,
        numeric_from: 3,
    }
}

/// Beside Table A5: per domain, condition and model, the training bags the probe of the A5
/// rows (same probe and layer) saw under Θ, how many Θ relabelled relative to Θ0, and of
/// which kinds.
pub fn relabelled_table(
    relabelled: &[RelabelledRow],
    shown: &[&StabilityRow],
    titles: &ConditionTitles,
) -> Table {
    // The (model, domain, probe, layer) units whose rows Table A5 shows.
    let units: std::collections::BTreeSet<_> = shown
        .iter()
        .filter_map(|r| Some((r.model.as_str(), r.domain.as_str(), r.probe, r.layer?)))
        .collect();
    let rows: Vec<&RelabelledRow> = relabelled
        .iter()
        .filter(|r| units.contains(&(r.model.as_str(), r.domain.as_str(), r.probe, r.layer)))
        .collect();
    let conditions = sorted_unique(rows.iter().map(|r| r.condition.as_str()), condition_order);
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    let models = sorted_unique(rows.iter().map(|r| r.model.as_str()), str::cmp);
    let mut body = Vec::new();
    for domain in &domains {
        for condition in &conditions {
            for model in &models {
                let of: Vec<&RelabelledRow> = rows
                    .iter()
                    .copied()
                    .filter(|r| {
                        &r.domain == domain && &r.condition == condition && &r.model == model
                    })
                    .collect();
                if of.is_empty() {
                    continue;
                }
                let bags: usize = of.iter().map(|r| r.bags).sum();
                let moved: usize = of.iter().map(|r| r.relabelled).sum();
                let mut kinds: Vec<&RelabelledRow> =
                    of.iter().copied().filter(|r| r.relabelled > 0).collect();
                kinds.sort_by(|a, b| kind_order(&a.kind, &b.kind));
                let which = kinds
                    .iter()
                    .map(|r| format!("{} {}", kind_title(&r.kind), r.relabelled))
                    .collect::<Vec<_>>()
                    .join(", ");
                body.push(vec![
                    domain_title(domain),
                    titles.title(condition),
                    model.to_string(),
                    bags.to_string(),
                    pct(moved, bags),
                    if which.is_empty() {
                        "–".into()
                    } else {
                        which
                    },
                ]);
            }
        }
    }
    Table {
        id: "table_relabelled".into(),
        title: "Relabelled training bags".into(),
        caption: "Training bags the sAwMIL probe of Table A5 saw under each condition, and how many of them the condition                   labelled differently from the baseline (of the bags seen), by statement kind (relabelled_bags.csv)."
            .into(),
        header: [
            "Domain",
            "Condition",
            "Model",
            "Bags seen",
            "Relabelled vs Θ0",
            "Relabelled kinds",
        ]
        .map(String::from)
        .to_vec(),
        rows: body,
        numeric_from: 3,
    }
}

/// Beyond the paper: whether the instantiations of one Θ retract the same statements
/// (`agreement.csv`), per domain, condition and model.
pub fn agreement_table(rows: &[pstat_tables::AgreementRow], titles: &ConditionTitles) -> Table {
    let mut rows: Vec<&pstat_tables::AgreementRow> = rows.iter().collect();
    rows.sort_by(|a, b| {
        domain_order(&a.domain, &b.domain)
            .then_with(|| condition_order(&a.condition, &b.condition))
            .then_with(|| a.model.cmp(&b.model))
    });
    let statistic =
        |value: Option<f64>, lo, hi| value.map_or("–".into(), |v| interval(v, lo, hi));
    let body = rows
        .iter()
        .map(|r| {
            vec![
                domain_title(&r.domain),
                titles.title(&r.condition),
                r.model.clone(),
                format!("{} · {}", r.a, r.b),
                r.n.to_string(),
                r.retracted_a.to_string(),
                r.retracted_b.to_string(),
                r.retracted_both.to_string(),
                statistic(r.jaccard, r.jaccard_lo, r.jaccard_hi),
                statistic(r.kappa, r.kappa_lo, r.kappa_hi),
            ]
        })
        .collect();
    Table {
        id: "table_agreement".into(),
        title: "Agreement between instantiations".into(),
        caption: "Beyond the paper: of the held-out True statements, how many each instantiation retracts (representational: \
                  sAwMIL retrained at the veracity layer; behavioral: the prompt at the main K against the empty baseline; \
                  contextual: the baseline sAwMIL probe at the veracity layer after the main K's context, against no context) \
                  and how many both do, with the Jaccard overlap of the two retraction sets and Cohen's κ of the two \
                  \"retracted\" indicators, each with a 95% bootstrap interval (agreement.csv, which lists the statements both \
                  retract). κ near 0: the two instantiations retract different statements, whatever their rates."
            .into(),
        header: [
            "Domain",
            "Condition",
            "Model",
            "Instantiations",
            "Statements",
            "R (a)",
            "R (b)",
            "R (both)",
            "Jaccard",
            "Cohen's κ",
        ]
        .map(String::from)
        .to_vec(),
        rows: body,
        numeric_from: 4,
    }
}

/// Beyond the paper: the statements every instantiation retracts under one Θ (the
/// intersection of `agreement.csv`'s pairs), per domain, condition and model; `None` when no
/// (model, domain, Θ) has all three instantiations.
pub fn retracted_by_all_table(
    rows: &[pstat_tables::AgreementRow],
    titles: &ConditionTitles,
) -> Option<Table> {
    use pstat_tables::Instantiation::{Behavioral, Contextual, Representational};
    type Cell<'a> = (&'a str, &'a str, &'a str);
    let mut pairs: BTreeMap<Cell, Vec<&pstat_tables::AgreementRow>> = BTreeMap::new();
    for r in rows {
        pairs
            .entry((r.domain.as_str(), r.condition.as_str(), r.model.as_str()))
            .or_default()
            .push(r);
    }
    let mut cells: Vec<(Cell, Vec<String>)> = Vec::new();
    for (cell, found) in pairs {
        let both = |a, b| {
            found.iter().find(|r| r.a == a && r.b == b).map(|r| {
                r.retracted_by_both
                    .split(';')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
            })
        };
        let (Some(rb), Some(rc)) = (
            both(Representational, Behavioral),
            both(Representational, Contextual),
        ) else {
            continue;
        };
        let all: Vec<String> = rb
            .iter()
            .filter(|id| rc.contains(id))
            .map(|id| id.to_string())
            .collect();
        cells.push((cell, all));
    }
    if cells.is_empty() {
        return None;
    }
    cells.sort_by(|(a, _), (b, _)| {
        domain_order(a.0, b.0)
            .then_with(|| condition_order(a.1, b.1))
            .then_with(|| a.2.cmp(b.2))
    });
    const SHOWN: usize = 8;
    let body = cells
        .into_iter()
        .map(|((domain, condition, model), all)| {
            let mut listed = all
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if all.len() > SHOWN {
                listed.push_str(&format!(", … ({} more)", all.len() - SHOWN));
            }
            vec![
                domain_title(domain),
                titles.title(condition),
                model.to_string(),
                all.len().to_string(),
                if listed.is_empty() {
                    "–".into()
                } else {
                    listed
                },
            ]
        })
        .collect();
    Some(Table {
        id: "table_retracted_by_all".into(),
        title: "Retracted by all three instantiations".into(),
        caption: "Beyond the paper: the held-out True statements that the representational, behavioral and contextual \
                  instantiations of one Θ all retract (their main configurations, as in the agreement table), by statement id \
                  (the first few listed; agreement.csv lists every pair's)."
            .into(),
        header: ["Domain", "Condition", "Model", "Statements", "Ids"]
            .map(String::from)
            .to_vec(),
        rows: body,
        numeric_from: 3,
    })
}

/// A value per (model, domain, kind) with its interval.
pub struct KindCell<'a> {
    pub model: &'a str,
    pub domain: &'a str,
    pub kind: &'a str,
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

/// A (model, domain, kind) value with its interval, from `familiarity.csv` (Tables A6–A8).
pub fn familiarity_cell(r: &FamiliarityRow) -> KindCell<'_> {
    KindCell {
        model: &r.model,
        domain: &r.domain,
        kind: &r.kind,
        value: r.mean_object_token_prob,
        lo: Some(r.lo),
        hi: Some(r.hi),
    }
}

/// A (model, domain, kind) value with its interval, from `distances.csv` (Fig. 2d).
pub fn distance_cell(r: &DistanceRow) -> KindCell<'_> {
    KindCell {
        model: &r.model,
        domain: &r.domain,
        kind: &r.kind,
        value: r.mean_distance,
        lo: Some(r.lo),
        hi: Some(r.hi),
    }
}

/// Tables A6–A8 layout: one table per domain, models as rows, statement kinds as columns.
pub fn kind_tables(
    id_prefix: &str,
    title: &str,
    caption: impl Fn(&str) -> String,
    cells: &[KindCell],
) -> Vec<Table> {
    let domains = sorted_unique(cells.iter().map(|c| c.domain), domain_order);
    domains
        .iter()
        .map(|domain| {
            let here: Vec<&KindCell> = cells.iter().filter(|c| c.domain == domain).collect();
            let kinds = sorted_unique(here.iter().map(|c| c.kind), kind_order);
            let models = sorted_unique(here.iter().map(|c| c.model), str::cmp);
            let mut header = vec!["Model".to_string()];
            header.extend(kinds.iter().map(|k| kind_title(k)));
            let rows = models
                .iter()
                .map(|model| {
                    let mut row = vec![model.clone()];
                    row.extend(kinds.iter().map(|kind| {
                        here.iter()
                            .find(|c| c.model == model && c.kind == kind)
                            .map_or("–".into(), |c| interval(c.value, c.lo, c.hi))
                    }));
                    row
                })
                .collect();
            Table {
                id: format!("{id_prefix}_{domain}"),
                title: format!("{title} — {}", domain_title(domain)),
                caption: caption(&domain_title(domain)),
                header,
                rows,
                numeric_from: 1,
            }
        })
        .collect()
}

/// Jensen–Shannon distances as one symmetric kind × kind matrix per domain.
pub fn bigram_distance_tables(rows: &[BigramDistanceRow]) -> Vec<Table> {
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    domains
        .iter()
        .map(|domain| {
            let here: Vec<&BigramDistanceRow> = rows.iter().filter(|r| &r.domain == domain).collect();
            let kinds = sorted_unique(here.iter().flat_map(|r| [r.kind_a.as_str(), r.kind_b.as_str()]), kind_order);
            let distance = |a: &str, b: &str| {
                if a == b {
                    return "0".to_string();
                }
                here.iter()
                    .find(|r| (r.kind_a == a && r.kind_b == b) || (r.kind_a == b && r.kind_b == a))
                    .map_or("–".into(), |r| format!("{:.3}", r.js_distance))
            };
            let mut header = vec!["Kind".to_string()];
            header.extend(kinds.iter().map(|k| kind_title(k)));
            Table {
                id: format!("table_bigram_distances_{domain}"),
                title: format!("Bigram Jensen–Shannon distances — {}", domain_title(domain)),
                caption: "Distance between the character-bigram distributions of two statement kinds (0 = identical, 1 = disjoint).".into(),
                header,
                rows: kinds
                    .iter()
                    .map(|a| {
                        let mut row = vec![kind_title(a)];
                        row.extend(kinds.iter().map(|b| distance(a, b)));
                        row
                    })
                    .collect(),
                numeric_from: 1,
            }
        })
        .collect()
}

pub fn layers_table(layers: &[LayerChoice]) -> Table {
    let mut sorted: Vec<&LayerChoice> = layers.iter().collect();
    sorted.sort_by(|a, b| {
        a.model
            .cmp(&b.model)
            .then(domain_order(&a.domain, &b.domain))
    });
    Table {
        id: "table_layers".into(),
        title: "Veracity layers".into(),
        caption: "Veracity layer per model and domain, the criterion that chose it, and its scores there (Fig. A0 draws the whole curve)."
            .into(),
        header: vec![
            "Model".into(),
            "Domain".into(),
            "Criterion".into(),
            "Veracity layer".into(),
            "AP at that layer".into(),
            "AUC at that layer".into(),
            "Layers scored".into(),
        ],
        rows: sorted
            .iter()
            .map(|c| {
                let at = c.scores.iter().find(|s| s.layer == c.veracity_layer);
                let show = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
                let (ap, auc) = (
                    show(at.and_then(|s| s.average_precision)),
                    show(at.and_then(|s| s.auc)),
                );
                vec![
                    c.model.clone(),
                    domain_title(&c.domain),
                    c.criterion.clone(),
                    c.veracity_layer.to_string(),
                    ap,
                    auc,
                    c.scores.len().to_string(),
                ]
            })
            .collect(),
        numeric_from: 3,
    }
}

/// Shares of options a / b / c of the statements asked.
pub fn answers_table(rows: &[AnswerRow], titles: &ConditionTitles) -> Table {
    let mut sorted: Vec<&AnswerRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        a.model
            .cmp(&b.model)
            .then(domain_order(&a.domain, &b.domain))
            .then(a.baseline.cmp(&b.baseline))
            .then(condition_order(&a.condition, &b.condition))
            .then(a.k.cmp(&b.k))
    });
    let share = |x: usize, total: usize| {
        if total > 0 {
            format!("{:.1}%", 100.0 * x as f64 / total as f64)
        } else {
            "–".into()
        }
    };
    Table {
        id: "table_answers".into(),
        title: "Answer distribution".into(),
        caption: "Behavioral answer distribution: share of test statements answered a (true), b (false) or c (neither). \
                  Baseline: Θ0's context, none (empty) or K True statements (True); the empty baseline's own row has no K."
            .into(),
        header: ["Model", "Domain", "Condition", "Baseline", "Format", "K", "n", "a", "b", "c"].map(String::from).to_vec(),
        rows: sorted
            .iter()
            .map(|r| {
                let total = r.a + r.b + r.c;
                // Θ0 with no context is prompted once for every K, so it has none of its own.
                let k = if r.baseline == Baseline::Empty && !is_perturbation(&r.condition) {
                    "–".to_string()
                } else {
                    r.k.to_string()
                };
                vec![
                    r.model.clone(),
                    domain_title(&r.domain),
                    titles.title(&r.condition),
                    match r.baseline {
                        Baseline::Empty => "empty".into(),
                        Baseline::True => "True".into(),
                    },
                    r.format.to_string(),
                    k,
                    r.n.to_string(),
                    share(r.a, total),
                    share(r.b, total),
                    share(r.c, total),
                ]
            })
            .collect(),
        numeric_from: 5,
    }
}

/// Per (model, domain): statements clustered, clusters, noise points, and the chosen
/// configuration with its Algorithm 1 score.
pub fn clusters_table(members: &[ClusterRow], results: &[ClusterResult]) -> Table {
    let mut keys: Vec<(String, String)> = members
        .iter()
        .map(|m| (m.model.clone(), m.domain.clone()))
        .chain(results.iter().map(|r| (r.model.clone(), r.domain.clone())))
        .collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0).then(domain_order(&a.1, &b.1)));
    keys.dedup();
    let rows = keys
        .iter()
        .map(|(model, domain)| {
            let result = results
                .iter()
                .find(|r| &r.model == model && &r.domain == domain);
            let labels: Vec<i32> = match result {
                Some(r) => r.labels.clone(),
                None => members
                    .iter()
                    .filter(|m| &m.model == model && &m.domain == domain)
                    .map(|m| m.cluster)
                    .collect(),
            };
            let clusters = sorted_unique_i32(&labels);
            vec![
                model.clone(),
                domain_title(domain),
                labels.len().to_string(),
                clusters.iter().filter(|&&c| c >= 0).count().to_string(),
                labels.iter().filter(|&&c| c < 0).count().to_string(),
                result.map_or("–".into(), |r| format!("{:.3}", r.score)),
                result.map_or("–".into(), |r| flatten_config(&r.chosen)),
            ]
        })
        .collect();
    Table {
        id: "table_clusters".into(),
        title: "Clusters per model and domain".into(),
        caption: "Clustering of retracted statements per model and domain (Algorithm 1).".into(),
        header: [
            "Model",
            "Domain",
            "Statements",
            "Clusters",
            "Noise",
            "Score",
            "Chosen configuration",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric_from: 2,
    }
}

/// `{"umap": {"n_neighbors": 15}}` → `umap.n_neighbors = 15`, one setting per comma.
fn flatten_config(value: &serde_json::Value) -> String {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            other => out.push(format!("{prefix} = {other}")),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out.join(", ")
}

fn sorted_unique_i32(labels: &[i32]) -> Vec<i32> {
    let mut v = labels.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

pub fn themes_table(themes: &[ThemeRow]) -> Table {
    let mut sorted: Vec<&ThemeRow> = themes.iter().collect();
    sorted.sort_by(|a, b| {
        a.model
            .cmp(&b.model)
            .then(domain_order(&a.domain, &b.domain))
            .then(a.cluster.cmp(&b.cluster))
    });
    Table {
        id: "table_themes".into(),
        title: "Cluster themes".into(),
        caption: "Candidate semantic themes of the retraction clusters, as the labeler proposed them (to be reviewed by a person).".into(),
        header: ["Model", "Domain", "Cluster", "Label", "Shared pattern", "Retraction hypothesis"].map(String::from).to_vec(),
        rows: sorted
            .iter()
            .map(|t| {
                vec![
                    t.model.clone(),
                    domain_title(&t.domain),
                    t.cluster.to_string(),
                    t.cluster_label.clone(),
                    t.shared_cluster_pattern.clone(),
                    t.retraction_hypothesis.clone(),
                ]
            })
            .collect(),
        numeric_from: 6, // all text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_tables::PromptFormat;

    /// Θ0 with no context, Θ0 with K True statements and a perturbation under the True
    /// baseline: each row says its baseline, and only the empty baseline has no K.
    #[test]
    fn answers_say_their_baseline_and_the_empty_baseline_has_no_k() {
        let row = |condition: &str, baseline| AnswerRow {
            model: "m".into(),
            domain: "city_locations".into(),
            format: PromptFormat::Plain,
            k: 100,
            baseline,
            condition: condition.into(),
            draw: "main".into(),
            n: 10,
            a: 5,
            b: 5,
            c: 0,
            mean_leftover: 0.0,
            flag: None,
        };
        let rows = [
            row("noise", Baseline::True),
            row("baseline", Baseline::True),
            row("baseline", Baseline::Empty),
        ];
        let table = answers_table(&rows, &ConditionTitles::new(None));
        let at = |column: &str| table.header.iter().position(|h| h == column).unwrap();
        let cells: Vec<(&str, &str, &str)> = table
            .rows
            .iter()
            .map(|r| {
                (
                    r[at("Condition")].as_str(),
                    r[at("Baseline")].as_str(),
                    r[at("K")].as_str(),
                )
            })
            .collect();
        assert_eq!(
            cells,
            [
                ("Baseline", "empty", "–"),
                ("Baseline", "True", "100"),
                ("Noise", "True", "100"),
            ]
        );
        assert_eq!(table.numeric_from, at("K"));
    }

    #[test]
    fn percentages_guard_empty_denominators() {
        assert_eq!(pct(3, 12), "3 (25.0%)");
        assert_eq!(pct(0, 0), "0 (–)");
        assert_eq!(
            interval(0.5, Some(0.25), Some(0.75)),
            "0.500 [0.250, 0.750]"
        );
    }
}
