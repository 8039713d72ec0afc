//! Fig. 3 (retractions), A1 (expansions), A4 (layer robustness), A5 (K and baseline
//! robustness) and A7 (each probe other than the primary one: Mass-Mean in the paper): rates by
//! condition Θ, one panel per domain.

use super::FigureSpec;
use super::model::{Dot, DotSeries, Figure, LegendEntry, Marker, Panel, PanelBody, Swatch};
use crate::inputs::RunData;
use crate::names::{ConditionTitles, condition_order, domain_order, domain_title, sorted_unique};
use crate::select::{
    BEHAVIORAL, Measure, REPRESENTATIONAL, VeracityLayers, across_models, behavioral_main,
    behavioral_variants, contextual, floor_dot, median, noise_floor, offset_label,
    primary_layer_offsets, representational,
};
use pstat_stability::StabilityRow;
use pstat_tables::Probe;

/// Which figure of rates by condition Θ to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StabilityFigure {
    /// Fig. 3: retraction rates, behavioral and representational (the primary probe, sAwMIL).
    Retractions,
    /// Fig. A1: the same for expansion rates.
    Expansions,
    /// Fig. A4: the primary probe's retraction rates at the veracity layer l and l±1, l±2.
    Layers,
    /// Fig. A5: behavioral retraction rates per K and baseline.
    ContextSize,
    /// Fig. A7: the retraction rates of a representational probe other than the primary one
    /// (Mass-Mean in the paper).
    OtherProbe(Probe),
    /// Beyond the paper: the baseline probes' retraction rates after the belief contexts.
    Contextual,
}

/// Rows tagged with the group (legend entry) they belong to.
type Labelled<'a> = Vec<(String, &'a StabilityRow)>;

struct PanelRow<'a> {
    name: String,
    rows: Labelled<'a>,
    /// The noise-floor rows drawn behind the dots (representational rows; empty elsewhere).
    floor: Vec<&'a StabilityRow>,
}

fn by_model(rows: Vec<&StabilityRow>) -> Labelled<'_> {
    rows.into_iter().map(|r| (r.model.clone(), r)).collect()
}

/// What one stability figure draws: its rows per panel row and how they are read.
struct Layout<'a> {
    id: String,
    title: String,
    measure: Measure,
    /// One dot per model with the median across models (else per layer offset or K variant).
    per_model: bool,
    panel_rows: Vec<PanelRow<'a>>,
    caption: String,
}

/// Build the figure, or `None` when the run has no rows for it.
pub fn stability_figure(
    data: &RunData,
    layers: &VeracityLayers,
    which: StabilityFigure,
) -> Option<FigureSpec> {
    let layout = match which {
        StabilityFigure::Retractions => rates_layout(data, layers, Measure::Retraction),
        StabilityFigure::Expansions => rates_layout(data, layers, Measure::Expansion),
        StabilityFigure::OtherProbe(probe) => probe_layout(data, layers, probe),
        StabilityFigure::Layers => layers_layout(data, layers),
        StabilityFigure::ContextSize => context_size_layout(data),
        StabilityFigure::Contextual => contextual_layout(data, layers),
    };
    draw(data, layout)
}

/// Fig. 3 and A1: behavioral and representational (the primary probe's) rates, one dot per
/// model.
fn rates_layout<'a>(data: &'a RunData, layers: &VeracityLayers, measure: Measure) -> Layout<'a> {
    let behavioral = behavioral_main(data);
    let primary = representational(data, layers, Probe::PRIMARY);
    let (id, title) = if measure == Measure::Retraction {
        (
            "fig3_retractions",
            "Fig. 3 — Retraction rates by perturbation Θ",
        )
    } else {
        (
            "figA1_expansions",
            "Fig. A1 — Expansion rates by perturbation Θ",
        )
    };
    let floor = noise_floor(data, layers, Probe::PRIMARY);
    let caption = format!(
        "{} per condition; one dot per model with its 95% bootstrap interval, the black bar is the median across models; \
         panels of one row share their axis. Behavioral: {}. Representational: {}.{}",
        capitalise(measure.noun()),
        behavioral.description,
        primary.description,
        floor_note(&floor)
    );
    let panel_rows = vec![
        PanelRow {
            name: "behavioral".into(),
            rows: by_model(behavioral.rows),
            floor: Vec::new(),
        },
        PanelRow {
            name: "representational".into(),
            rows: by_model(primary.rows),
            floor,
        },
    ];
    Layout {
        id: id.into(),
        title: title.into(),
        measure,
        per_model: true,
        panel_rows,
        caption,
    }
}

/// Fig. A7: the retraction rates of `probe`, a representational probe other than the primary
/// one (Mass-Mean in the paper), one dot per model.
fn probe_layout<'a>(data: &'a RunData, layers: &VeracityLayers, probe: Probe) -> Layout<'a> {
    let selection = representational(data, layers, probe);
    let floor = noise_floor(data, layers, probe);
    let caption = format!(
        "Retraction rate per condition for {}; one dot per model with its 95% bootstrap interval, the black bar is the median across models.{}",
        selection.description,
        floor_note(&floor)
    );
    Layout {
        id: format!("figA7_{probe}"),
        title: format!("Fig. A7 — {} probe retraction rates", probe.title()),
        measure: Measure::Retraction,
        per_model: true,
        panel_rows: vec![PanelRow {
            name: probe.title().into(),
            rows: by_model(selection.rows),
            floor,
        }],
        caption,
    }
}

/// Beyond the paper, beside Fig. 3: the contextual instantiation's retraction rates, one
/// panel row per representational probe, one dot per model.
fn contextual_layout<'a>(data: &'a RunData, layers: &VeracityLayers) -> Layout<'a> {
    let primary = contextual(data, layers, Probe::PRIMARY);
    let others: Vec<&str> = Probe::secondary().map(Probe::title).collect();
    let caption = format!(
        "Beyond the paper: retraction rate per condition when {} (and the same for {}); one dot per model with its 95% bootstrap \
         interval, the black bar is the median across models; panels of one row share their axis. The probes are not retrained: \
         a retraction here is a statement whose hidden states moved across the baseline probe's boundary because Θ's belief \
         context was in the input.",
        primary.description,
        others.join(", ")
    );
    let panel_rows = Probe::REPRESENTATIONAL
        .iter()
        .map(|&probe| PanelRow {
            name: format!("contextual ({})", probe.title()),
            rows: by_model(contextual(data, layers, probe).rows),
            floor: Vec::new(),
        })
        .collect();
    Layout {
        id: "fig3c_contextual".into(),
        title: "Beside Fig. 3 — Retraction rates with the belief context in the input (contextual)"
            .into(),
        measure: Measure::Retraction,
        per_model: true,
        panel_rows,
        caption,
    }
}

/// Fig. A4: the primary probe's (sAwMIL's) retraction rates per layer offset.
fn layers_layout<'a>(data: &'a RunData, layers: &VeracityLayers) -> Layout<'a> {
    let rows = primary_layer_offsets(data, layers)
        .into_iter()
        .map(|(offset, r)| (offset_label(offset), r))
        .collect();
    Layout {
        id: "figA4_layers".into(),
        title: "Fig. A4 — Layer robustness (sAwMIL)".into(),
        measure: Measure::Retraction,
        per_model: false,
        panel_rows: vec![PanelRow {
            name: REPRESENTATIONAL.into(),
            rows,
            floor: Vec::new(),
        }],
        caption: format!(
            "sAwMIL retraction rate per condition at the veracity layer l and its neighbours. {}",
            AGGREGATE_NOTE
        ),
    }
}

/// Fig. A5: behavioral retraction rates per K and baseline.
fn context_size_layout(data: &RunData) -> Layout<'_> {
    Layout {
        id: "figA5_k_baseline".into(),
        title: "Fig. A5 — Belief-context size and baseline robustness".into(),
        measure: Measure::Retraction,
        per_model: false,
        panel_rows: vec![PanelRow {
            name: BEHAVIORAL.into(),
            rows: behavioral_variants(data),
            floor: Vec::new(),
        }],
        caption: format!(
            "Behavioral retraction rate per condition for each belief-context size K and baseline \
             (empty context, or K True training statements). {}",
            AGGREGATE_NOTE
        ),
    }
}

/// The figure of `layout`: one panel per (panel row, domain), or `None` without rows.
fn draw(data: &RunData, layout: Layout) -> Option<FigureSpec> {
    let all: Vec<&StabilityRow> = layout
        .panel_rows
        .iter()
        .flat_map(|p| p.rows.iter().map(|(_, r)| *r))
        .collect();
    if all.is_empty() {
        return None;
    }
    let domains = sorted_unique(all.iter().map(|r| r.domain.as_str()), domain_order);
    let conditions = sorted_unique(all.iter().map(|r| r.condition.as_str()), condition_order);
    let titles = ConditionTitles::new(data.decisions.as_ref());
    let groups = groups(&layout);
    let mut panels = Vec::new();
    for panel_row in layout.panel_rows.iter().filter(|p| !p.rows.is_empty()) {
        for domain in &domains {
            panels.push(panel(
                &layout,
                panel_row,
                domain,
                &groups,
                &conditions,
                &titles,
            ));
        }
    }
    Some(FigureSpec {
        id: layout.id.clone(),
        title: layout.title.clone(),
        caption: layout.caption.clone(),
        figure: Figure {
            panels,
            ncols: domains.len(),
            legend: legend(&layout, &groups),
        },
    })
}

/// The legend's groups: models alphabetically; layer offsets and K variants as the selection
/// sorted them.
fn groups(layout: &Layout) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for (label, _) in layout.panel_rows.iter().flat_map(|p| p.rows.iter()) {
        if !groups.contains(label) {
            groups.push(label.clone());
        }
    }
    if layout.per_model {
        groups.sort();
    }
    groups
}

/// The panel of one panel row in one domain, with its noise floor.
fn panel(
    layout: &Layout,
    panel_row: &PanelRow,
    domain: &str,
    groups: &[String],
    conditions: &[String],
    titles: &ConditionTitles,
) -> Panel {
    let measure = layout.measure;
    let rows: Labelled = panel_row
        .rows
        .iter()
        .filter(|(_, r)| r.domain == domain)
        .cloned()
        .collect();
    let floor: Vec<f64> = panel_row
        .floor
        .iter()
        .filter(|r| r.domain == domain)
        .filter_map(|r| measure.dot(r))
        .map(|d| d.value)
        .collect();
    Panel {
        title: format!("{} · {}", domain_title(domain), panel_row.name),
        value_label: measure.noun().to_string(),
        body: dots_body(
            &rows,
            groups,
            conditions,
            (titles, measure),
            layout.per_model,
            floor_dot(&floor),
        ),
    }
}

/// One entry per group, then the median bar and the noise floor where drawn.
fn legend(layout: &Layout, groups: &[String]) -> Vec<LegendEntry> {
    let mut legend: Vec<LegendEntry> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| LegendEntry {
            label: g.clone(),
            swatch: Swatch::Palette(i),
            marker: Marker::Dot,
        })
        .collect();
    if layout.per_model {
        legend.push(LegendEntry {
            label: "median across models".into(),
            swatch: Swatch::Black,
            marker: Marker::MedianBar,
        });
    }
    if layout.panel_rows.iter().any(|p| !p.floor.is_empty()) {
        legend.push(LegendEntry {
            label: "noise floor (baseline refit)".into(),
            swatch: Swatch::Noise,
            marker: Marker::Line,
        });
    }
    legend
}

const AGGREGATE_NOTE: &str = "With one model, each dot is its rate with the 95% bootstrap interval; \
with several, the median across models with the interquartile range. Panels of one row share their axis.";

/// The caption's sentence on the noise floor, when the run has one.
fn floor_note(floor: &[&StabilityRow]) -> &'static str {
    if floor.is_empty() {
        ""
    } else {
        " Grey line and band: the noise floor, the baseline probe refit with unchanged labels (sAwMIL: other shuffles, caps and Noise draws of its \
         training bags; Mass-Mean: bootstrap resamples of its bags) and compared with the baseline: the median of the refits' rates, the band from \
         the smallest to the largest; a rate inside it is no larger than refitting alone moves."
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().collect::<String>() + c.as_str()
    })
}

/// One series per group; each dot aggregates the group's rows of that condition across models;
/// `floor` is drawn behind them.
fn dots_body(
    rows: &Labelled,
    groups: &[String],
    conditions: &[String],
    (titles, measure): (&ConditionTitles, Measure),
    with_median: bool,
    floor: Option<Dot>,
) -> PanelBody {
    let values = |group: Option<&str>, condition: &str| -> Vec<Dot> {
        rows.iter()
            .filter(|(g, r)| group.is_none_or(|want| g == want) && r.condition == condition)
            .filter_map(|(_, r)| measure.dot(r))
            .collect()
    };
    let series = groups
        .iter()
        .enumerate()
        .map(|(color, group)| DotSeries {
            color,
            dots: conditions
                .iter()
                .map(|c| across_models(&values(Some(group), c)))
                .collect(),
        })
        .collect();
    let medians = conditions
        .iter()
        .map(|c| {
            let v: Vec<f64> = values(None, c).iter().map(|d| d.value).collect();
            if with_median { median(&v) } else { None }
        })
        .collect();
    PanelBody::Dots {
        categories: conditions.iter().map(|c| titles.title(c)).collect(),
        series,
        medians,
        floor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_run_has_no_stability_figures() {
        let data = RunData::default();
        let layers = VeracityLayers::new(&data);
        assert!(stability_figure(&data, &layers, StabilityFigure::Retractions).is_none());
    }
}
