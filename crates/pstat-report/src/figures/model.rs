//! What a figure shows, independent of how it is drawn: a grid of panels plus one legend.
//! Builders fill these from the run's tables; `draw` turns them into pixels.

/// A grid of panels, filled row by row, and a legend shared by all panels.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub panels: Vec<Panel>,
    pub ncols: usize,
    pub legend: Vec<LegendEntry>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    pub label: String,
    pub swatch: Swatch,
    pub marker: Marker,
}

/// The colour of a legend entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swatch {
    Palette(usize),
    /// The median marker.
    Black,
    /// Points HDBSCAN left unclustered.
    Noise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Dot,
    Line,
    MedianBar,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    /// Description of the value axis.
    pub value_label: String,
    pub body: PanelBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PanelBody {
    /// One row per category (top to bottom); in each row one dot with an interval per series,
    /// offset slightly so series do not hide each other, and an optional median bar.
    Dots {
        categories: Vec<String>,
        series: Vec<DotSeries>,
        medians: Vec<Option<f64>>,
        /// A noise floor behind every row: a line at its value and a band over its interval.
        floor: Option<Dot>,
    },
    /// Curves: log–log (rank–frequency) or linear (a score per layer, with a dot per point).
    Curves {
        x_label: String,
        curves: Vec<Curve>,
        axes: Axes,
    },
    /// 2-D points coloured by group; a group without colour is drawn light grey (noise).
    Scatter { groups: Vec<ScatterGroup> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct DotSeries {
    pub color: usize,
    /// One entry per category; `None` where this series has no value.
    pub dots: Vec<Option<Dot>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dot {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    LogLog,
    Linear,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub color: usize,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScatterGroup {
    pub color: Option<usize>,
    pub points: Vec<(f64, f64)>,
}

impl Panel {
    pub fn has_data(&self) -> bool {
        match &self.body {
            PanelBody::Dots { series, .. } => {
                series.iter().any(|s| s.dots.iter().any(Option::is_some))
            }
            PanelBody::Curves { curves, .. } => curves.iter().any(|c| !c.points.is_empty()),
            PanelBody::Scatter { groups } => groups.iter().any(|g| !g.points.is_empty()),
        }
    }
}
