//! The HTML page: one self-contained file (inline CSS, inline SVG, no script, no network)
//! rendered with minijinja, which escapes every value unless it is an SVG we drew.

use crate::error::ReportError;
use crate::figures::RenderedFigure;
use crate::summary::Finding;
use crate::tables::Table;
use minijinja::value::Serde;
use minijinja::{Environment, Value, context};
use serde::Serialize;

const TEMPLATE: &str = include_str!("../templates/report.html.j2");

/// One numbered section of the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Section {
    pub id: String,
    pub title: String,
    pub intro: String,
    /// Inputs this run did not produce, and what was left out because of it.
    pub notes: Vec<String>,
    pub findings: Vec<Finding>,
    pub figures: Vec<RenderedFigure>,
    pub tables: Vec<Table>,
}

impl Section {
    pub fn new(id: &str, title: &str, intro: &str) -> Self {
        Section {
            id: id.into(),
            title: title.into(),
            intro: intro.into(),
            ..Section::default()
        }
    }

    pub fn missing(&mut self, what: &str, file: &str) {
        self.notes
            .push(format!("{what}: not computed in this run (no {file})."));
    }
}

/// `manifest.json` as (field, value) rows; nested values are flattened to readable text.
pub fn manifest_rows(manifest: &serde_json::Value) -> Vec<(String, String)> {
    match manifest {
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), plain(v))).collect(),
        other => vec![("manifest".into(), plain(other))],
    }
}

fn plain(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join("; "),
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}: {}", plain(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

pub fn render(
    run_name: &str,
    sections: &[Section],
    provenance: &[(String, String)],
) -> Result<String, ReportError> {
    let mut env = Environment::new();
    // The `.html` name turns on HTML auto-escaping.
    env.add_template("report.html", TEMPLATE)?;
    let html = env.get_template("report.html")?.render(context! {
        run_name,
        sections => Value::from(Serde(sections)),
        provenance => Value::from(Serde(provenance)),
        pstat_version => env!("CARGO_PKG_VERSION"),
    })?;
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_manifest_flattened() {
        let mut s = Section::new("s", "<b>Title</b>", "intro & more");
        s.missing("Fig. 2", "familiarity.csv");
        let html = render(
            "run<1>",
            &[s],
            &manifest_rows(
                &serde_json::json!({"seed": 42, "models": [{"name": "m", "sha256": "ab"}]}),
            ),
        )
        .unwrap();
        assert!(
            html.contains("&lt;b&gt;Title&lt;&#x2f;b&gt;")
                || html.contains("&lt;b&gt;Title&lt;/b&gt;")
        );
        assert!(!html.contains("<b>Title"));
        assert!(html.contains("not computed in this run (no familiarity.csv)"));
        assert!(html.contains("name: m, sha256: ab"));
        assert!(
            !html.contains("<script") && !html.contains("http://") && !html.contains("https://")
        );
    }
}
