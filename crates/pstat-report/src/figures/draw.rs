//! Drawing a [`Figure`] on any plotters backend, so the SVG and the PNG of a figure come from
//! the same code and look the same.

use super::model::{
    Axes, Curve, Dot, DotSeries, Figure, LegendEntry, Marker, Panel, PanelBody, ScatterGroup,
    Swatch,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Tableau 10: distinguishable, colour-blind friendly enough, and familiar from matplotlib.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const NOISE_GREY: RGBColor = RGBColor(190, 190, 190);
const BAND_GREY: RGBColor = RGBColor(235, 235, 235);
/// The noise-floor band: darker than the alternating row bands, lighter than any dot.
const FLOOR_GREY: RGBColor = RGBColor(215, 215, 215);

const FONT: &str = "sans-serif";
const PANEL_WIDTH: u32 = 470;
const LEGEND_ROW: u32 = 24;
/// Text widths are estimated, not measured, so SVG and PNG lay out identically whatever font
/// the viewer substitutes; DejaVu Sans at 13 px averages about 7.5 px per character.
const CHAR_WIDTH: f64 = 7.5;

fn palette(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn legend_color(entry: &LegendEntry) -> RGBColor {
    match entry.swatch {
        Swatch::Palette(i) => palette(i),
        Swatch::Black => BLACK,
        Swatch::Noise => NOISE_GREY,
    }
}

fn text_width(text: &str) -> u32 {
    (text.chars().count() as f64 * CHAR_WIDTH).ceil() as u32
}

fn panel_height(panel: &Panel) -> u32 {
    match &panel.body {
        PanelBody::Dots {
            categories, series, ..
        } => {
            let band = (10 * series.len() as u32 + 14).max(30);
            100 + categories.len().max(1) as u32 * band
        }
        PanelBody::Curves { .. } => 330,
        PanelBody::Scatter { .. } => 460,
    }
}

fn row_heights(fig: &Figure) -> Vec<u32> {
    fig.panels
        .chunks(fig.ncols.max(1))
        .map(|row| row.iter().map(panel_height).max().unwrap_or(0))
        .collect()
}

/// Legend items laid out left to right, wrapping at the figure width: (entry, x, row).
fn legend_layout(fig: &Figure, width: u32) -> Vec<(&LegendEntry, u32, u32)> {
    let (mut x, mut row) = (12, 0);
    let mut out = Vec::new();
    for entry in &fig.legend {
        let w = 34 + text_width(&entry.label);
        if x + w > width && x > 12 {
            x = 12;
            row += 1;
        }
        out.push((entry, x, row));
        x += w;
    }
    out
}

/// Pixel size of the figure.
pub fn size(fig: &Figure) -> (u32, u32) {
    let panels = fig.ncols.clamp(1, fig.panels.len().max(1)) as u32 * PANEL_WIDTH;
    let widest_legend_item = fig
        .legend
        .iter()
        .map(|e| 58 + text_width(&e.label))
        .max()
        .unwrap_or(0);
    let width = panels.max(widest_legend_item);
    let body: u32 = row_heights(fig).iter().sum();
    (width, body + legend_height(fig, width))
}

fn legend_height(fig: &Figure, width: u32) -> u32 {
    legend_layout(fig, width)
        .last()
        .map_or(0, |(_, _, row)| (row + 1) * LEGEND_ROW + 12)
}

pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let mut top = 0;
    let axes = row_axis_max(fig);
    for ((row, height), x_max) in fig
        .panels
        .chunks(fig.ncols.max(1))
        .zip(row_heights(fig))
        .zip(axes)
    {
        for (col, panel) in row.iter().enumerate() {
            let area = root
                .clone()
                .shrink((col as u32 * PANEL_WIDTH, top), (PANEL_WIDTH, height));
            draw_panel(&area, panel, x_max)?;
        }
        top += height;
    }
    let (width, _) = root.dim_in_pixel();
    for (entry, x, row) in legend_layout(fig, width) {
        let y = (top + 6 + row * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        draw_legend_entry(root, entry, x as i32, y)?;
    }
    Ok(())
}

fn draw_legend_entry<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entry: &LegendEntry,
    x: i32,
    y: i32,
) -> DrawResult<DB> {
    let color = legend_color(entry);
    match entry.marker {
        Marker::Dot => root.draw(&Circle::new((x + 10, y), 5, color.filled()))?,
        Marker::Line => root.draw(&PathElement::new(
            vec![(x, y), (x + 20, y)],
            color.stroke_width(3),
        ))?,
        Marker::MedianBar => root.draw(&PathElement::new(
            vec![(x + 10, y - 8), (x + 10, y + 8)],
            color.stroke_width(3),
        ))?,
    }
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    root.draw(&Text::new(entry.label.clone(), (x + 26, y), style))
}

/// The value axis of each row of dot panels: the largest of its panels' own ends, so panels
/// side by side (one instantiation across domains) are read on the same scale; `None` for a
/// row without dot panels.
pub fn row_axis_max(fig: &Figure) -> Vec<Option<f64>> {
    fig.panels
        .chunks(fig.ncols.max(1))
        .map(|row| {
            row.iter()
                .filter(|p| p.has_data())
                .filter_map(|p| match &p.body {
                    PanelBody::Dots {
                        series,
                        medians,
                        floor,
                        ..
                    } => Some(dots_axis_max(series, medians, *floor)),
                    _ => None,
                })
                .reduce(f64::max)
        })
        .collect()
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_max: Option<f64>,
) -> DrawResult<DB> {
    if !panel.has_data() {
        let (w, h) = area.dim_in_pixel();
        let title = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        area.draw(&Text::new(panel.title.clone(), (w as i32 / 2, 10), title))?;
        let note = (FONT, 13)
            .into_font()
            .color(&NOISE_GREY)
            .pos(Pos::new(HPos::Center, VPos::Center));
        return area.draw(&Text::new("no data", (w as i32 / 2, h as i32 / 2), note));
    }
    match &panel.body {
        PanelBody::Dots {
            categories,
            series,
            medians,
            floor,
        } => draw_dots(
            area,
            panel,
            categories,
            series,
            medians,
            (
                *floor,
                x_max.unwrap_or_else(|| dots_axis_max(series, medians, *floor)),
            ),
        ),
        PanelBody::Curves {
            x_label,
            curves,
            axes: Axes::LogLog,
        } => draw_curves(area, panel, x_label, curves),
        PanelBody::Curves {
            x_label,
            curves,
            axes: Axes::Linear,
        } => draw_lines(area, panel, x_label, curves),
        PanelBody::Scatter { groups } => draw_scatter(area, panel, groups),
    }
}

/// Upper end of a value axis starting at 0: the largest value or interval end plus 8%.
fn dots_axis_max(series: &[DotSeries], medians: &[Option<f64>], floor: Option<Dot>) -> f64 {
    let ends = series
        .iter()
        .flat_map(|s| s.dots.iter().flatten())
        .chain(floor.as_ref())
        .flat_map(|d: &Dot| [Some(d.value), d.lo, d.hi])
        .chain(medians.iter().copied())
        .flatten()
        .filter(|v| v.is_finite());
    let max = ends.fold(0.0f64, f64::max);
    if max > 0.0 { max * 1.08 } else { 1.0 }
}

fn draw_dots<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    categories: &[String],
    series: &[DotSeries],
    medians: &[Option<f64>],
    (floor, x_max): (Option<Dot>, f64),
) -> DrawResult<DB> {
    let n = categories.len();
    let label_width = categories.iter().map(|c| text_width(c)).max().unwrap_or(0) + 14;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15))
        .margin(10)
        .margin_right(22)
        .x_label_area_size(44)
        .y_label_area_size(label_width)
        .build_cartesian_2d(0f64..x_max, -0.5f64..(n as f64 - 0.5))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .y_labels(0)
        .x_labels(6)
        .x_label_formatter(&|v| format_tick(*v))
        .x_desc(panel.value_label.as_str())
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;
    // Category i is drawn top to bottom, at y = n-1-i; bands alternate for readability.
    let y_of = |i: usize| (n - 1 - i) as f64;
    chart.draw_series((0..n).filter(|i| i % 2 == 1).map(|i| {
        Rectangle::new(
            [(0.0, y_of(i) - 0.5), (x_max, y_of(i) + 0.5)],
            BAND_GREY.filled(),
        )
    }))?;
    // The noise floor lies behind the dots: rates inside its band are what refitting alone moves.
    if let Some(floor) = floor {
        let (top, bottom) = (-0.5, n as f64 - 0.5);
        if let (Some(lo), Some(hi)) = (floor.lo, floor.hi) {
            chart.draw_series([Rectangle::new(
                [(lo, top), (hi, bottom)],
                FLOOR_GREY.mix(0.7).filled(),
            )])?;
        }
        chart.draw_series([PathElement::new(
            vec![(floor.value, top), (floor.value, bottom)],
            NOISE_GREY.stroke_width(2),
        )])?;
    }
    let base = area.get_base_pixel();
    let label_style =
        TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    for (i, category) in categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, y_of(i)));
        area.draw(&Text::new(
            category.clone(),
            (px - base.0 - 8, py - base.1),
            label_style.clone(),
        ))?;
    }
    let m = series.len();
    for (j, s) in series.iter().enumerate() {
        let offset = if m > 1 {
            (j as f64 - (m - 1) as f64 / 2.0) * (0.7 / m as f64)
        } else {
            0.0
        };
        let color = palette(s.color);
        for (i, dot) in s.dots.iter().enumerate() {
            let Some(dot) = dot else { continue };
            let y = y_of(i) + offset;
            if let (Some(lo), Some(hi)) = (dot.lo, dot.hi) {
                let cap = 0.04;
                chart.draw_series([
                    PathElement::new(vec![(lo, y), (hi, y)], color.stroke_width(2)),
                    PathElement::new(vec![(lo, y - cap), (lo, y + cap)], color.stroke_width(2)),
                    PathElement::new(vec![(hi, y - cap), (hi, y + cap)], color.stroke_width(2)),
                ])?;
            }
            chart.draw_series([Circle::new((dot.value, y), 4, color.filled())])?;
        }
    }
    chart.draw_series(medians.iter().enumerate().filter_map(|(i, m)| {
        m.map(|v| {
            PathElement::new(
                vec![(v, y_of(i) - 0.42), (v, y_of(i) + 0.42)],
                BLACK.stroke_width(3),
            )
        })
    }))?;
    Ok(())
}

/// Short tick labels: 0.25, 12, 1e-4.
fn format_tick(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.abs() < 1e-3 || v.abs() >= 1e5 {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Log-axis labels only at 1, 2 and 5 times a power of ten, so they never crowd.
fn log_tick(v: f64) -> String {
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6)
    {
        format_tick(v)
    } else {
        String::new()
    }
}

fn draw_curves<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_label: &str,
    curves: &[Curve],
) -> DrawResult<DB> {
    let points = || {
        curves
            .iter()
            .flat_map(|c| c.points.iter())
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
    };
    let x_max = points().map(|p| p.0).fold(1.0f64, f64::max) * 1.2;
    let y_min = points().map(|p| p.1).fold(f64::INFINITY, f64::min) / 1.5;
    let y_max = points().map(|p| p.1).fold(0.0f64, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15))
        .margin(10)
        .margin_right(22)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((1f64..x_max).log_scale(), (y_min..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| log_tick(*v))
        .y_label_formatter(&|v| log_tick(*v))
        .x_desc(x_label)
        .y_desc(panel.value_label.as_str())
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for curve in curves {
        let pts = curve
            .points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0);
        chart.draw_series(LineSeries::new(pts, palette(curve.color).stroke_width(2)))?;
    }
    Ok(())
}

/// Linear axes fitted to the points (padded by 5%), a line and a dot per point.
fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_label: &str,
    curves: &[Curve],
) -> DrawResult<DB> {
    let finite = || {
        curves
            .iter()
            .flat_map(|c| c.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    let span = |get: fn(&(f64, f64)) -> f64| {
        let (lo, hi) = finite()
            .map(get)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let pad = ((hi - lo) * 0.05).max(1e-3);
        (lo - pad)..(hi + pad)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15))
        .margin(10)
        .margin_right(22)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(span(|p| p.0), span(|p| p.1))?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format_tick(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .x_desc(x_label)
        .y_desc(panel.value_label.as_str())
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for curve in curves {
        let pts: Vec<(f64, f64)> = curve
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let style = palette(curve.color);
        chart.draw_series(LineSeries::new(pts.clone(), style.stroke_width(2)))?;
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, style.filled())))?;
    }
    Ok(())
}

fn draw_scatter<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    groups: &[ScatterGroup],
) -> DrawResult<DB> {
    let all = || {
        groups
            .iter()
            .flat_map(|g| g.points.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let range = |get: fn(&(f64, f64)) -> f64| {
        let (lo, hi) = all()
            .map(get)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let pad = ((hi - lo) * 0.05).max(1e-6);
        (lo - pad)..(hi + pad)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15))
        .margin(10)
        .margin_right(22)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(range(|p| p.0), range(|p| p.1))?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format_tick(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .x_desc(format!("{} 1", panel.value_label))
        .y_desc(format!("{} 2", panel.value_label))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(TRANSPARENT)
        .draw()?;
    // Noise first, so clusters are drawn on top of it.
    let mut ordered: Vec<&ScatterGroup> = groups.iter().collect();
    ordered.sort_by_key(|g| g.color.is_some());
    for group in ordered {
        let color = group.color.map_or(NOISE_GREY, palette);
        chart.draw_series(
            group
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, color.filled())),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_tick(0.0), "0");
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(0.1000001), "0.1");
        assert_eq!(format_tick(12.0), "12");
        assert_eq!(format_tick(0.0001), "1e-4");
        assert_eq!(log_tick(20.0), "20");
        assert_eq!(log_tick(0.05), "0.05");
        assert_eq!(log_tick(7.0), "");
    }

    /// A row whose panels hold 0.02 and 0.9 draws both on one axis; the next row keeps its own.
    #[test]
    fn panels_of_one_row_share_their_axis() {
        let panel = |value: f64| Panel {
            title: String::new(),
            value_label: String::new(),
            body: PanelBody::Dots {
                categories: vec!["x".into()],
                series: vec![DotSeries {
                    color: 0,
                    dots: vec![Some(Dot {
                        value,
                        lo: None,
                        hi: None,
                    })],
                }],
                medians: vec![None],
                floor: None,
            },
        };
        let fig = Figure {
            panels: vec![panel(0.02), panel(0.9), panel(0.01), panel(0.03)],
            ncols: 2,
            legend: Vec::new(),
        };
        let axes = row_axis_max(&fig);
        assert!((axes[0].unwrap() - 0.9 * 1.08).abs() < 1e-12, "{axes:?}");
        assert!((axes[1].unwrap() - 0.03 * 1.08).abs() < 1e-12, "{axes:?}");
    }
}
