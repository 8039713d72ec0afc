//! Fig. 2: (a–c) character-bigram rank–frequency curves per domain, (d) within-group
//! activation distances and (e) mean object-token probabilities per statement kind.

use super::FigureSpec;
use super::model::{
    Axes, Curve, Dot, DotSeries, Figure, LegendEntry, Marker, Panel, PanelBody, Swatch,
};
use crate::inputs::BigramRankRow;
use crate::names::{domain_order, domain_title, kind_order, kind_title, sorted_unique};
use crate::select::median;
use crate::tables::KindCell;

/// Fig. 2 (a–c): one log–log panel per domain, one curve per statement kind.
pub fn fig2_curves(rows: &[BigramRankRow]) -> Option<FigureSpec> {
    if rows.is_empty() {
        return None;
    }
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    let kinds = sorted_unique(rows.iter().map(|r| r.kind.as_str()), kind_order);
    let panels = domains
        .iter()
        .map(|domain| Panel {
            title: domain_title(domain),
            value_label: "bigram frequency".into(),
            body: PanelBody::Curves {
                x_label: "rank".into(),
                axes: Axes::LogLog,
                curves: kinds
                    .iter()
                    .enumerate()
                    .map(|(color, kind)| {
                        let mut points: Vec<(usize, f64)> = rows
                            .iter()
                            .filter(|r| &r.domain == domain && &r.kind == kind)
                            .map(|r| (r.rank, r.frequency))
                            .collect();
                        points.sort_by_key(|p| p.0);
                        Curve {
                            color,
                            points: points.into_iter().map(|(r, f)| (r as f64, f)).collect(),
                        }
                    })
                    .collect(),
            },
        })
        .collect();
    Some(FigureSpec {
        id: "fig2abc_bigrams".into(),
        title: "Fig. 2 (a–c) — Character-bigram rank–frequency curves".into(),
        caption: "Frequency of each lower-cased character bigram of the statements' subject and object strings \
                  against its rank, per statement kind (log–log). Curves that overlap have similar surface statistics."
            .into(),
        figure: Figure {
            panels,
            ncols: domains.len(),
            legend: kind_legend(&kinds, Marker::Line),
        },
    })
}

fn kind_legend(kinds: &[String], marker: Marker) -> Vec<LegendEntry> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| LegendEntry {
            label: kind_title(k),
            swatch: Swatch::Palette(i),
            marker,
        })
        .collect()
}

/// One panel per domain: statement kinds as rows, one dot per model, median across models.
fn per_kind_figure(values: &[KindCell], value_label: &str) -> Figure {
    let domains = sorted_unique(values.iter().map(|v| v.domain), domain_order);
    let kinds = sorted_unique(values.iter().map(|v| v.kind), kind_order);
    let models = sorted_unique(values.iter().map(|v| v.model), str::cmp);
    let find = |domain: &str, kind: &str, model: &str| {
        values
            .iter()
            .find(|v| v.domain == domain && v.kind == kind && v.model == model)
            .map(|v| Dot {
                value: v.value,
                lo: v.lo,
                hi: v.hi,
            })
    };
    let panels = domains
        .iter()
        .map(|domain| Panel {
            title: domain_title(domain),
            value_label: value_label.to_string(),
            body: PanelBody::Dots {
                categories: kinds.iter().map(|k| kind_title(k)).collect(),
                series: models
                    .iter()
                    .enumerate()
                    .map(|(color, model)| DotSeries {
                        color,
                        dots: kinds.iter().map(|k| find(domain, k, model)).collect(),
                    })
                    .collect(),
                medians: kinds
                    .iter()
                    .map(|k| {
                        let v: Vec<f64> = models
                            .iter()
                            .filter_map(|m| find(domain, k, m))
                            .map(|d| d.value)
                            .collect();
                        median(&v)
                    })
                    .collect(),
                floor: None,
            },
        })
        .collect();
    let mut legend: Vec<LegendEntry> = models
        .iter()
        .enumerate()
        .map(|(i, m)| LegendEntry {
            label: m.clone(),
            swatch: Swatch::Palette(i),
            marker: Marker::Dot,
        })
        .collect();
    legend.push(LegendEntry {
        label: "median across models".into(),
        swatch: Swatch::Black,
        marker: Marker::MedianBar,
    });
    Figure {
        panels,
        ncols: domains.len(),
        legend,
    }
}

/// Fig. 2 (d): mean within-group Euclidean distance of the veracity-layer representations.
pub fn fig2_distances(cells: &[KindCell]) -> Option<FigureSpec> {
    if cells.is_empty() {
        return None;
    }
    Some(FigureSpec {
        id: "fig2d_distances".into(),
        title: "Fig. 2 (d) — Within-group activation distances".into(),
        caption: "Mean pairwise Euclidean distance between the veracity-layer representations of statements of the same kind, \
                  one dot per model with its interval; the black bar is the median across models."
            .into(),
        figure: per_kind_figure(cells, "mean within-group distance"),
    })
}

/// Fig. 2 (e): mean object-token probability (familiarity).
pub fn familiarity_figure(cells: &[KindCell]) -> Option<FigureSpec> {
    if cells.is_empty() {
        return None;
    }
    Some(FigureSpec {
        id: "fig2e_familiarity".into(),
        title: "Fig. 2 (e) — Familiarity: mean object-token probability".into(),
        caption: "Mean next-token probability of the statements' object tokens (higher = more familiar to the model), \
                  one dot per model with its bootstrap interval; the black bar is the median across models."
            .into(),
        figure: per_kind_figure(cells, "mean object-token probability"),
    })
}
