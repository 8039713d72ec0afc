#![warn(missing_docs)]
//! The report of a pstat run: figures (SVG + PNG) and one self-contained HTML page, built
//! purely from the files of a run output folder, so it can be rebuilt (`pstat report --run
//! DIR`) and tested without any model.
//!
//! Inputs (only `stability.csv` is required; a missing one drops its sections with a note):
//! `stability.csv`, `layers.json`, `familiarity.csv`, `distances.csv`,
//! `bigram_rank_frequency.csv`, `bigram_distances.csv`, `clusters.csv`,
//! `clusters/<model>/<domain>/result.json`, `themes.csv`, `answers.csv`, `relabelled_bags.csv`,
//! `resamples.csv`, `comparisons.csv`, `comparison_families.csv`, `across_models.csv`,
//! `across_model_pairs.csv`, `sign_tests.csv`, `manifest.json`.
//! Outputs: `figures/<id>.svg`, `figures/<id>.png` and `report.html`, each written atomically.

mod claims;
mod error;
pub mod figures;
mod html;
pub mod inputs;
mod names;
mod select;
mod summary;
mod tables;

pub use error::ReportError;
pub use inputs::RunData;

use figures::{FigureSpec, RenderedFigure, StabilityFigure, render_and_write, stability_figure};
use html::Section;
use pstat_tables::Probe;
use select::{BEHAVIORAL, REPRESENTATIONAL, VeracityLayers, behavioral_main, representational};
use std::path::{Path, PathBuf};
use tables::{KindCell, kind_tables};
use tables::{distance_cell, familiarity_cell};

/// What `build_report` wrote.
#[derive(Debug, Clone)]
pub struct Report {
    /// `report.html` in the run folder.
    pub html: PathBuf,
    /// `figures/<id>.svg` and `.png` of every figure, in report order.
    pub figures: Vec<PathBuf>,
    /// One line per input the run did not have, naming what was left out.
    pub notes: Vec<String>,
}

/// Read the run folder `run_dir`, write its figures under `run_dir/figures/` and
/// `run_dir/report.html`.
pub fn build_report(run_dir: &Path) -> Result<Report, ReportError> {
    let data = RunData::load(run_dir)?;
    let inputs = Inputs {
        layers: VeracityLayers::new(&data),
        titles: names::ConditionTitles::new(data.decisions.as_ref()),
        data: &data,
    };
    let mut out = Figures {
        run_dir,
        written: Vec::new(),
    };
    let sections = [
        limits_section(&inputs),
        summary_section(&inputs),
        familiarity_section(&inputs, &mut out)?,
        stability_section(&inputs, &mut out)?,
        robustness_section(&inputs, &mut out)?,
        layers_section(&inputs, &mut out)?,
        answers_section(&inputs),
        clusters_section(&inputs, &mut out)?,
    ];
    let html = write_page(run_dir, &data, &sections)?;
    Ok(Report {
        html,
        figures: out.written,
        notes: sections
            .iter()
            .flat_map(|s| s.notes.iter().cloned())
            .collect(),
    })
}

/// What every section reads: the run's tables, its veracity layers and its conditions' titles.
struct Inputs<'a> {
    data: &'a RunData,
    layers: VeracityLayers,
    titles: names::ConditionTitles,
}

/// Writes figures under `<run>/figures/` and keeps their paths, in report order.
struct Figures<'a> {
    run_dir: &'a Path,
    written: Vec<PathBuf>,
}

impl Figures<'_> {
    /// Renders `spec`, if there is one, and adds it to `section`.
    fn render(
        &mut self,
        spec: Option<FigureSpec>,
        section: &mut Section,
    ) -> Result<(), ReportError> {
        if let Some(spec) = spec {
            let figure: RenderedFigure = render_and_write(self.run_dir, spec)?;
            for ext in ["svg", "png"] {
                self.written.push(
                    self.run_dir
                        .join("figures")
                        .join(format!("{}.{ext}", figure.id)),
                );
            }
            section.figures.push(figure);
        }
        Ok(())
    }
}

/// What this run can and cannot show: read first.
fn limits_section(inputs: &Inputs) -> Section {
    let mut limits = Section::new(
        "limits",
        "What this run can and cannot show",
        "Read this first: which judges answer the same whatever the context, every perturbation's effect against the noise floor \
         (refits with unchanged labels) and the behavioral resampling spread, and the cells where nothing can be concluded.",
    );
    limits
        .findings
        .push(claims::limits(inputs.data, &inputs.layers, &inputs.titles));
    limits
}

/// The paired tests, the sign tests across models, the familiarity findings and the
/// across-model tables.
fn summary_section(inputs: &Inputs) -> Section {
    let Inputs { data, titles, .. } = inputs;
    let mut summary = Section::new(
        "summary",
        "What this run shows",
        "Computed from this run's paired tests (comparisons.csv) and across-model tables; the paper's claims are tested here, not repeated.",
    );
    match &data.comparisons {
        Some(rows) if !rows.is_empty() => {
            let families = data.comparison_families.as_deref().unwrap_or_default();
            summary
                .findings
                .extend(claims::paired_findings(&data.stability, rows, families, titles));
            summary.tables.push(claims::paired_table(rows, titles));
        }
        Some(_) => summary.notes.push(
            "Paired comparisons: no cell had two compared conditions with a baseline belief set to compare them on.".into(),
        ),
        None => summary.missing("Paired comparisons", "comparisons.csv"),
    }
    match &data.sign_tests {
        Some(rows) => summary
            .findings
            .push(claims::across_model_finding(rows, titles)),
        None => summary.missing("Sign tests across models", "sign_tests.csv"),
    }
    if let Some(rows) = &data.familiarity {
        summary.findings.push(summary::familiarity_finding(rows));
    }
    if let Some(rows) = &data.distances {
        summary.findings.push(summary::distance_finding(rows));
    }
    if let Some(rows) = &data.bigram_distances {
        summary.findings.push(summary::bigram_finding(rows));
    }
    summary.findings.push(summary::flagged_baselines(data));
    match &data.across_models {
        Some(rows) => summary
            .tables
            .push(claims::across_models_table(rows, titles)),
        None => summary.missing("Across-model table", "across_models.csv"),
    }
    match &data.across_model_pairs {
        Some(rows) => summary.tables.push(claims::across_model_pairs_table(rows)),
        None => summary.missing(
            "Synthetic vs Fictional across models",
            "across_model_pairs.csv",
        ),
    }
    summary
}

/// Fig. 2 and Tables A6–A8: bigram curves and distances, within-group distances and
/// familiarity.
fn familiarity_section(inputs: &Inputs, out: &mut Figures) -> Result<Section, ReportError> {
    let data = inputs.data;
    let mut familiarity = Section::new(
        "familiarity",
        "Familiarity and lexical controls",
        "Whether the statement types differ in familiarity (object-token probability) while Synthetic statements \
         keep the surface statistics and representational spread of the types they were built from (paper Section 5.1).",
    );
    match &data.bigram_curves {
        Some(rows) => out.render(figures::fig2_curves(rows), &mut familiarity)?,
        None => familiarity.missing("Fig. 2 (a–c) bigram curves", "bigram_rank_frequency.csv"),
    }
    match &data.bigram_distances {
        Some(rows) => familiarity
            .tables
            .extend(tables::bigram_distance_tables(rows)),
        None => familiarity.missing("Bigram Jensen–Shannon distances", "bigram_distances.csv"),
    }
    match &data.distances {
        Some(rows) => {
            let cells: Vec<KindCell> = rows.iter().map(distance_cell).collect();
            out.render(figures::fig2_distances(&cells), &mut familiarity)?;
            familiarity.tables.extend(kind_tables(
                "table_distances",
                "Within-group distances",
                |d| format!("Mean within-group Euclidean distance, {d} [interval]."),
                &cells,
            ));
        }
        None => familiarity.missing("Fig. 2 (d) within-group distances", "distances.csv"),
    }
    match &data.familiarity {
        Some(rows) => {
            let cells: Vec<KindCell> = rows.iter().map(familiarity_cell).collect();
            out.render(figures::familiarity_figure(&cells), &mut familiarity)?;
            familiarity.tables.extend(kind_tables(
                "table_familiarity",
                "Familiarity (Tables A6–A8)",
                |d| format!("Tables A6–A8 layout — mean object-token probability, {d}, with its bootstrap interval (higher = more familiar)."),
                &cells,
            ));
        }
        None => familiarity.missing(
            "Fig. 2 (e) and Tables A6–A8 (familiarity)",
            "familiarity.csv",
        ),
    }
    Ok(familiarity)
}

/// Fig. 3 (retractions and expansions) and the count tables A4/A5 with the relabelled bags.
fn stability_section(inputs: &Inputs, out: &mut Figures) -> Result<Section, ReportError> {
    let Inputs {
        data,
        layers,
        titles,
    } = inputs;
    let behavioral = behavioral_main(data);
    let primary = representational(data, layers, Probe::PRIMARY);
    let mut stability = Section::new(
        "stability",
        "Epistemic stability under perturbations",
        "Retraction rate ρ_R = |R| / |B_true(Θ0)|: the share of held-out True statements judged True at baseline that are \
         no longer judged True under Θ; expansion rate ρ_E = |E| / |B_not-true(Θ0)| (paper Section 3.3).",
    );
    out.render(
        stability_figure(data, layers, StabilityFigure::Retractions),
        &mut stability,
    )?;
    out.render(
        stability_figure(data, layers, StabilityFigure::Expansions),
        &mut stability,
    )?;
    out.render(
        stability_figure(data, layers, StabilityFigure::Contextual),
        &mut stability,
    )?;
    for (id, name, selection, instantiation) in [
        (
            "table_counts_behavioral",
            "Table A4 style — behavioral",
            &behavioral,
            BEHAVIORAL,
        ),
        (
            "table_counts_representational",
            "Table A5 style — representational (sAwMIL)",
            &primary,
            REPRESENTATIONAL,
        ),
    ] {
        if selection.rows.is_empty() {
            stability.notes.push(format!("{instantiation} results: not computed in this run (no {instantiation} rows in stability.csv)."));
            continue;
        }
        let caption = format!(
            "Counts (percentages) of baseline beliefs that stay stable or are retracted (of |B_true(Θ0)|) and expanded (of |B_not-true(Θ0)|) per condition; {}.",
            selection.description
        );
        stability.tables.push(tables::counts_table(
            id,
            name,
            caption,
            &selection.rows,
            titles,
        ));
        if instantiation == REPRESENTATIONAL {
            match &data.relabelled {
                Some(rows) => {
                    stability
                        .tables
                        .push(tables::relabelled_table(rows, &selection.rows, titles))
                }
                None => stability.missing("Relabelled training bags", "relabelled_bags.csv"),
            }
        }
    }
    if let Some(rows) = data.agreement.as_ref().filter(|rows| !rows.is_empty()) {
        stability.tables.push(tables::agreement_table(rows, titles));
        stability
            .tables
            .extend(tables::retracted_by_all_table(rows, titles));
    }
    Ok(stability)
}

/// Figs. A4, A5 and A7: neighbouring layers, context size and baseline, and each probe other
/// than the primary one (Mass-Mean in the paper).
fn robustness_section(inputs: &Inputs, out: &mut Figures) -> Result<Section, ReportError> {
    let Inputs { data, layers, .. } = inputs;
    let mut robustness = Section::new(
        "robustness",
        "Robustness",
        "Whether the ordering of conditions survives a different layer (A4), belief-context size and baseline (A5) and probe (A7).",
    );
    let other_probes = Probe::secondary().map(|p| {
        (
            StabilityFigure::OtherProbe(p),
            format!("Fig. A7 ({} probe)", p.title()),
        )
    });
    let figures = [
        (
            StabilityFigure::Layers,
            "Fig. A4 (sAwMIL at neighbouring layers)".to_string(),
        ),
        (
            StabilityFigure::ContextSize,
            "Fig. A5 (behavioral K and baseline)".to_string(),
        ),
    ];
    for (which, what) in figures.into_iter().chain(other_probes) {
        match stability_figure(data, layers, which) {
            Some(spec) => out.render(Some(spec), &mut robustness)?,
            None => robustness.notes.push(format!(
                "{what}: not computed in this run (no matching rows in stability.csv)."
            )),
        }
    }
    Ok(robustness)
}

/// The veracity layers: their selection curve and table.
fn layers_section(inputs: &Inputs, out: &mut Figures) -> Result<Section, ReportError> {
    let Inputs { data, layers, .. } = inputs;
    let mut veracity = Section::new(
        "layers",
        "Veracity layers",
        "The layer whose representations the probes read, per model and domain.",
    );
    match &data.layers {
        Some(l) => {
            out.render(figures::layer_curve(l), &mut veracity)?;
            veracity.tables.push(tables::layers_table(l));
        }
        None => veracity.missing("Veracity-layer selection", "layers.json"),
    }
    if !layers.guessed.is_empty() {
        veracity.notes.push(
            "Without layers.json the veracity layer of each model and domain is taken as the middle of the layers this run evaluated.".into(),
        );
    }
    Ok(veracity)
}

/// How the model distributed its answers over the three options.
fn answers_section(inputs: &Inputs) -> Section {
    let Inputs { data, titles, .. } = inputs;
    let mut answers = Section::new(
        "answers",
        "Behavioral answers",
        "How the model distributed its answers over the three options.",
    );
    match &data.answers {
        Some(rows) => answers.tables.push(tables::answers_table(rows, titles)),
        None => answers.missing("Answer distribution", "answers.csv"),
    }
    answers
}

/// Appendix I: the retraction clusters, their figures and themes.
fn clusters_section(inputs: &Inputs, out: &mut Figures) -> Result<Section, ReportError> {
    let data = inputs.data;
    let mut clusters = Section::new(
        "clusters",
        "Retraction clusters and themes",
        "Retracted statements clustered in activation space (PCA → UMAP → HDBSCAN, Algorithm 1) and the themes proposed for each cluster (paper Section 4.5, Appendix I).",
    );
    let members = data.cluster_members.as_deref().unwrap_or_default();
    if members.is_empty() && data.cluster_results.is_empty() {
        clusters.missing(
            "Clustering",
            "clusters.csv or clusters/<model>/<domain>/result.json",
        );
    } else {
        clusters
            .tables
            .push(tables::clusters_table(members, &data.cluster_results));
    }
    let themes = data.themes.as_deref().unwrap_or_default();
    for spec in figures::cluster_figures(&data.cluster_results, themes) {
        out.render(Some(spec), &mut clusters)?;
    }
    match &data.themes {
        Some(rows) => clusters.tables.push(tables::themes_table(rows)),
        None => clusters.missing("Cluster themes", "themes.csv"),
    }
    Ok(clusters)
}

/// Writes `report.html` from the sections, with the run's provenance.
fn write_page(
    run_dir: &Path,
    data: &RunData,
    sections: &[Section],
) -> Result<PathBuf, ReportError> {
    let provenance = data
        .manifest
        .as_ref()
        .map(html::manifest_rows)
        .unwrap_or_default();
    let run_name = run_dir
        .canonicalize()
        .unwrap_or_else(|_| run_dir.to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let page = html::render(&run_name, sections, &provenance)?;
    let html_path = run_dir.join("report.html");
    pstat_data::artifact::write_atomic(&html_path, page.as_bytes())
        .map_err(|e| ReportError::io(&html_path, e))?;
    Ok(html_path)
}
