//! Fig. A0: the veracity-layer selection curve, the score of every candidate layer per model
//! and domain, so a reader sees how clearly the chosen layer stands out.

use super::FigureSpec;
use super::model::{Axes, Curve, Figure, LegendEntry, Marker, Panel, PanelBody, Swatch};
use crate::names::{domain_order, domain_title, sorted_unique};
use pstat_tables::LayerChoice;

/// One panel per domain, one curve per model (average precision against layer); `None` when
/// no (model, domain) selected its layer from a curve (fixed or paper layers).
pub fn layer_curve(layers: &[LayerChoice]) -> Option<FigureSpec> {
    let curves: Vec<&LayerChoice> = layers
        .iter()
        .filter(|c| c.scores.iter().any(|s| s.average_precision.is_some()))
        .collect();
    if curves.is_empty() {
        return None;
    }
    let domains = sorted_unique(curves.iter().map(|c| c.domain.as_str()), domain_order);
    let models = sorted_unique(curves.iter().map(|c| c.model.as_str()), str::cmp);
    let panels = domains
        .iter()
        .map(|domain| Panel {
            title: domain_title(domain),
            value_label: "average precision".into(),
            body: PanelBody::Curves {
                x_label: "layer".into(),
                axes: Axes::Linear,
                curves: models
                    .iter()
                    .enumerate()
                    .filter_map(|(color, model)| {
                        let choice = curves
                            .iter()
                            .find(|c| &c.domain == domain && &c.model == model)?;
                        Some(Curve {
                            color,
                            points: choice
                                .scores
                                .iter()
                                .filter_map(|s| Some((s.layer as f64, s.average_precision?)))
                                .collect(),
                        })
                    })
                    .collect(),
            },
        })
        .collect();
    Some(FigureSpec {
        id: "figA0_layers".into(),
        title: "Fig. A0 — Veracity-layer selection".into(),
        caption: "Average precision (True against Not True) on the calibration split of a baseline sAwMIL probe \
                  fit at each candidate layer; the veracity layer is the lowest layer whose five-layer window has a mean within \
                  0.01 of the best (Table \"Veracity layers\"). Models whose layer is the paper's (Table A3) or fixed in the config \
                  have no curve."
            .into(),
        figure: Figure {
            panels,
            ncols: domains.len(),
            legend: models
                .iter()
                .enumerate()
                .map(|(i, m)| LegendEntry {
                    label: m.clone(),
                    swatch: Swatch::Palette(i),
                    marker: Marker::Line,
                })
                .collect(),
        },
    })
}
