//! The report's figures: built from the run's tables (`familiarity`, `stability`,
//! `clusters`), drawn once as SVG (inlined in the report) and once as PNG (for slides and
//! papers), both written under `figures/`.

mod clusters;
mod draw;
mod familiarity;
mod layers;
pub mod model;
mod stability;

pub use clusters::cluster_figures;
pub use familiarity::{familiarity_figure, fig2_curves, fig2_distances};
pub use layers::layer_curve;
pub use stability::{StabilityFigure, stability_figure};

use crate::error::ReportError;
use model::Figure;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// DejaVu Sans, embedded so PNG text needs no system font (plotters' `ab_glyph` backend
/// knows only registered fonts). Licence: assets/DejaVuSans-LICENSE.txt.
static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TTF (checked by the tests), so this cannot fail at run time.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, DEJAVU_SANS);
    });
}

/// A figure ready for the report: its identity, caption and the SVG to inline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RenderedFigure {
    /// File stem and HTML anchor, e.g. `fig3`.
    pub id: String,
    /// Title shown above the figure.
    pub title: String,
    /// Caption shown below the figure.
    pub caption: String,
    /// The figure as an SVG document, inlined in the HTML.
    pub svg: String,
}

/// A figure to render: what it shows plus how it is named.
#[derive(Debug, Clone)]
pub struct FigureSpec {
    /// File stem and HTML anchor, e.g. `fig3`.
    pub id: String,
    /// Title shown above the figure.
    pub title: String,
    /// Caption shown below the figure.
    pub caption: String,
    /// What the figure shows.
    pub figure: Figure,
}

fn draw_error(id: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Figure {
        figure: id.to_string(),
        message: e.to_string(),
    }
}

/// Draw `fig` as an SVG document (text escaped, so it can be inlined in HTML);
/// [`ReportError::Figure`] naming `id` when drawing fails.
pub fn render_svg(id: &str, fig: &Figure) -> Result<String, ReportError> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, draw::size(fig)).into_drawing_area();
        draw::draw(&root, fig).map_err(|e| draw_error(id, e))?;
        root.present().map_err(|e| draw_error(id, e))?;
    }
    Ok(svg)
}

/// Draw `fig` as an RGB PNG with the embedded font; [`ReportError::Figure`] naming `id` when
/// drawing or encoding fails.
pub fn render_png(id: &str, fig: &Figure) -> Result<Vec<u8>, ReportError> {
    use image::ImageEncoder;
    register_font();
    let (w, h) = draw::size(fig);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw::draw(&root, fig).map_err(|e| draw_error(id, e))?;
        root.present().map_err(|e| draw_error(id, e))?;
    }
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&rgb, w, h, image::ColorType::Rgb8)
        .map_err(|e| draw_error(id, e))?;
    Ok(png)
}

/// Draw `spec` and write `figures/<id>.svg` and `figures/<id>.png` under `run_dir`.
pub fn render_and_write(run_dir: &Path, spec: FigureSpec) -> Result<RenderedFigure, ReportError> {
    let svg = render_svg(&spec.id, &spec.figure)?;
    let png = render_png(&spec.id, &spec.figure)?;
    for (ext, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
        let path = run_dir.join("figures").join(format!("{}.{ext}", spec.id));
        pstat_data::artifact::write_atomic(&path, bytes).map_err(|e| ReportError::io(&path, e))?;
    }
    Ok(RenderedFigure {
        id: spec.id,
        title: spec.title,
        caption: spec.caption,
        svg,
    })
}

#[cfg(test)]
mod tests {
    use super::model::*;
    use super::*;

    fn tiny() -> Figure {
        Figure {
            panels: vec![Panel {
                title: "City Locations".into(),
                value_label: "retraction rate".into(),
                body: PanelBody::Dots {
                    categories: vec!["Synthetic (TF)".into(), "Fictional".into()],
                    series: vec![DotSeries {
                        color: 0,
                        dots: vec![
                            Some(Dot {
                                value: 0.4,
                                lo: Some(0.3),
                                hi: Some(0.5),
                            }),
                            None,
                        ],
                    }],
                    medians: vec![Some(0.4), None],
                    floor: None,
                },
            }],
            ncols: 1,
            legend: vec![LegendEntry {
                label: "<model>".into(),
                swatch: Swatch::Palette(0),
                marker: Marker::Dot,
            }],
        }
    }

    #[test]
    fn svg_and_png_render_with_the_embedded_font() {
        let svg = render_svg("t", &tiny()).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("viewBox"));
        // Text from the data is escaped, so the SVG can be inlined in HTML.
        assert!(svg.contains("&lt;model&gt;") && !svg.contains("<model>"));
        let png = render_png("t", &tiny()).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
