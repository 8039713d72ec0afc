//! One 2-D scatter per (model, domain) of the retracted statements' clustering (Appendix I),
//! coloured by HDBSCAN cluster, with the labeler's theme in the legend when there is one.

use super::FigureSpec;
use super::model::{Figure, LegendEntry, Marker, Panel, PanelBody, ScatterGroup, Swatch};
use crate::inputs::{ClusterResult, ThemeRow};
use crate::names::domain_title;
use std::collections::BTreeMap;

/// Longest theme label shown in a legend; the full text is in the themes table.
const MAX_LEGEND_LABEL: usize = 48;

/// One 2-D scatter figure per clustering result, in the order of `results`: points coloured
/// by HDBSCAN cluster (noise grey), each cluster named in the legend by its theme from
/// `themes` when there is one.
pub fn cluster_figures(results: &[ClusterResult], themes: &[ThemeRow]) -> Vec<FigureSpec> {
    results.iter().map(|r| cluster_figure(r, themes)).collect()
}

fn cluster_figure(result: &ClusterResult, themes: &[ThemeRow]) -> FigureSpec {
    let mut by_label: BTreeMap<i32, Vec<(f64, f64)>> = BTreeMap::new();
    for (&label, p) in result.labels.iter().zip(&result.embedding_2d) {
        by_label
            .entry(label.max(-1))
            .or_default()
            .push((p[0], p[1]));
    }
    let mut groups = Vec::new();
    let mut legend = Vec::new();
    for (label, points) in by_label {
        let n = points.len();
        if label < 0 {
            groups.push(ScatterGroup {
                color: None,
                points,
            });
            legend.push(LegendEntry {
                label: format!("noise ({n})"),
                swatch: Swatch::Noise,
                marker: Marker::Dot,
            });
            continue;
        }
        let color = label as usize;
        let theme = themes
            .iter()
            .find(|t| t.model == result.model && t.domain == result.domain && t.cluster == label)
            .map(|t| format!(": {}", shorten(&t.cluster_label)))
            .unwrap_or_default();
        groups.push(ScatterGroup {
            color: Some(color),
            points,
        });
        legend.push(LegendEntry {
            label: format!("cluster {label} ({n}){theme}"),
            swatch: Swatch::Palette(color),
            marker: Marker::Dot,
        });
    }
    FigureSpec {
        id: format!(
            "clusters_{}_{}",
            file_safe(&result.model),
            file_safe(&result.domain)
        ),
        title: format!(
            "Retraction clusters — {} · {}",
            result.model,
            domain_title(&result.domain)
        ),
        caption: format!(
            "2-D UMAP embedding of the retracted statements' veracity-layer activations, coloured by the HDBSCAN cluster \
             of the configuration Algorithm 1 selected (score {:.3}); grey points are noise.",
            result.score
        ),
        figure: Figure {
            panels: vec![Panel {
                title: format!("{} · {}", result.model, domain_title(&result.domain)),
                value_label: "UMAP".into(),
                body: PanelBody::Scatter { groups },
            }],
            ncols: 1,
            legend,
        },
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_LEGEND_LABEL {
        s.to_string()
    } else {
        s.chars().take(MAX_LEGEND_LABEL - 1).collect::<String>() + "…"
    }
}

/// Model names may hold `/` or `:`; file names and HTML ids keep only safe characters.
pub fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe_and_legends_short() {
        assert_eq!(file_safe("org/model:q4"), "org_model_q4");
        assert_eq!(shorten(&"x".repeat(100)).chars().count(), MAX_LEGEND_LABEL);
    }
}
