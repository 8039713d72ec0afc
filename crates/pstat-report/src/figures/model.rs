//! What a figure shows, independent of how it is drawn: a grid of panels plus one legend.
//! Builders fill these from the run's tables; `draw` turns them into pixels.

/// A grid of panels, filled row by row, and a legend shared by all panels.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The panels, in reading order.
    pub panels: Vec<Panel>,
    /// Panels per row (0 is read as 1).
    pub ncols: usize,
    /// Legend entries, in display order.
    pub legend: Vec<LegendEntry>,
}

/// One entry of a figure's legend.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    /// The text shown.
    pub label: String,
    /// Its colour.
    pub swatch: Swatch,
    /// The mark drawn beside the text.
    pub marker: Marker,
}

/// The colour of a legend entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swatch {
    /// Colour i of the figures' palette (cycled past its end), as in [`DotSeries::color`].
    Palette(usize),
    /// The median marker.
    Black,
    /// Points HDBSCAN left unclustered.
    Noise,
}

/// The mark a legend entry shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A filled dot (a dot series or a scatter group).
    Dot,
    /// A line segment (a curve, or the noise floor behind a row of dots).
    Line,
    /// A vertical bar (the median of a row of dots).
    MedianBar,
}

/// One panel of a figure: a title, a value-axis description and what it plots. A panel
/// without data is drawn as "no data".
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Shown above the panel (e.g. the domain).
    pub title: String,
    /// Description of the value axis.
    pub value_label: String,
    /// What the panel plots.
    pub body: PanelBody,
}

/// The kind of plot of a [`Panel`], with its data.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelBody {
    /// One row per category (top to bottom); in each row one dot with an interval per series,
    /// offset slightly so series do not hide each other, and an optional median bar.
    Dots {
        /// Row labels, top to bottom.
        categories: Vec<String>,
        /// The series, each with one optional dot per category.
        series: Vec<DotSeries>,
        /// Per category, the median bar's value; `None` draws none.
        medians: Vec<Option<f64>>,
        /// A noise floor behind every row: a line at its value and a band over its interval.
        floor: Option<Dot>,
    },
    /// Curves: log–log (rank–frequency) or linear (a score per layer, with a dot per point).
    Curves {
        /// Description of the x axis.
        x_label: String,
        /// The curves.
        curves: Vec<Curve>,
        /// The axis scales.
        axes: Axes,
    },
    /// 2-D points coloured by group; a group without colour is drawn light grey (noise).
    Scatter {
        /// The groups of points.
        groups: Vec<ScatterGroup>,
    },
}

/// One series of a dot panel (e.g. one model), drawn in one colour.
#[derive(Debug, Clone, PartialEq)]
pub struct DotSeries {
    /// Palette index of the series' colour (cycled past the palette's end).
    pub color: usize,
    /// One entry per category; `None` where this series has no value.
    pub dots: Vec<Option<Dot>>,
}

/// A value with an optional interval (e.g. a rate and its confidence bounds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dot {
    /// The value, on the panel's value axis.
    pub value: f64,
    /// Lower bound of the interval; the interval is drawn only when both bounds are present.
    pub lo: Option<f64>,
    /// Upper bound of the interval; the interval is drawn only when both bounds are present.
    pub hi: Option<f64>,
}

/// Scales of a curve panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    /// Both axes logarithmic (rank–frequency).
    LogLog,
    /// Both axes linear, a dot at every point (a score per layer).
    Linear,
}

/// One curve of a curve panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Palette index of its colour.
    pub color: usize,
    /// Its (x, y) points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// One group of scatter points, drawn in one colour.
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterGroup {
    /// Palette index of its colour; `None`: light grey (noise).
    pub color: Option<usize>,
    /// Its (x, y) points.
    pub points: Vec<(f64, f64)>,
}

impl Panel {
    /// Whether there is anything to plot: a dot, or a curve or scatter group with a point.
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
