//! Everything a report is built from: the files of one run output folder. Only
//! `stability.csv` is required; every other input is optional and its absence drops the
//! sections that need it (with a note), so a partial run still gets a report.

use crate::error::ReportError;
use pstat_tables::TableError;
pub use pstat_tables::{
    AcrossModelPairRow, AcrossModelRow, AnswerRow, BigramDistanceRow, BigramRankRow, ClusterRow,
    ComparisonFamilyRow, ComparisonRow, Decisions, DistanceRow, FamiliarityRow, LayerChoice,
    RelabelledRow, ResampleRow, SignTestRow, StabilityRow, Table, ThemeRow,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// The parts of `clusters/<model>/<domain>/result.json` the report shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterResult {
    /// The model, from the result's folder name.
    #[serde(skip)]
    pub model: String,
    /// The domain, from the result's folder name.
    #[serde(skip)]
    pub domain: String,
    /// The selected pipeline configuration, shown as given.
    pub chosen: serde_json::Value,
    /// The chosen configuration's score (Algorithm 1, Appendix I).
    pub score: f64,
    /// HDBSCAN label of each retracted statement; −1 is noise.
    pub labels: Vec<i32>,
    /// The 2-D embedding of each statement, in the order of `labels` (same length).
    pub embedding_2d: Vec<[f64; 2]>,
}

/// The contents of a run folder.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    /// The run folder.
    pub dir: PathBuf,
    /// `stability.csv` (required): ρ_R and ρ_E per unit and condition Θ.
    pub stability: Vec<StabilityRow>,
    /// `layers.json`: the veracity layer chosen per (model, domain); `None` when absent (as for
    /// every optional input below).
    pub layers: Option<Vec<LayerChoice>>,
    /// `familiarity.csv`: mean object-token probability per (model, domain, kind).
    pub familiarity: Option<Vec<FamiliarityRow>>,
    /// `distances.csv`: mean within-kind distance of the representations (Fig. 2d).
    pub distances: Option<Vec<DistanceRow>>,
    /// `bigram_rank_frequency.csv`: character-bigram rank–frequency curves (Fig. 2a–c).
    pub bigram_curves: Option<Vec<BigramRankRow>>,
    /// `bigram_distances.csv`: Jensen–Shannon distances between the kinds' bigram
    /// distributions.
    pub bigram_distances: Option<Vec<BigramDistanceRow>>,
    /// `clusters.csv`: the cluster of each retracted statement (−1 = noise).
    pub cluster_members: Option<Vec<ClusterRow>>,
    /// Every `clusters/<model>/<domain>/result.json`, in sorted path order; empty when there
    /// are none.
    pub cluster_results: Vec<ClusterResult>,
    /// `themes.csv`: a labeler's theme of each cluster.
    pub themes: Option<Vec<ThemeRow>>,
    /// `answers.csv`: how often each option (a, b, c) was chosen, per behavioral unit.
    pub answers: Option<Vec<AnswerRow>>,
    /// `relabelled_bags.csv`: per probe unit and Θ, the training bags of each kind the fit saw
    /// and how many Θ relabelled.
    pub relabelled: Option<Vec<RelabelledRow>>,
    /// `resamples.csv`: the spread of ρ_R over context draws, and the order-shuffle control.
    pub resamples: Option<Vec<ResampleRow>>,
    /// `comparisons.csv`: the paired tests of the compared condition pairs.
    pub comparisons: Option<Vec<ComparisonRow>>,
    /// `comparison_families.csv`: one row per family of `comparisons.csv`.
    pub comparison_families: Option<Vec<ComparisonFamilyRow>>,
    /// `across_models.csv`: the perturbation summary across models.
    pub across_models: Option<Vec<AcrossModelRow>>,
    /// `across_model_pairs.csv`: the Synthetic-vs-Fictional comparisons across models.
    pub across_model_pairs: Option<Vec<AcrossModelPairRow>>,
    /// `sign_tests.csv`: the exact sign test of each comparison across models.
    pub sign_tests: Option<Vec<SignTestRow>>,
    /// `agreement.csv`: per (model, domain, condition), how far the representational and
    /// behavioral instantiations retract the same held-out True statements.
    pub agreement: Option<Vec<pstat_tables::AgreementRow>>,
    /// `manifest.json` (the run's build, settings and seed), as parsed JSON.
    pub manifest: Option<serde_json::Value>,
    /// `decisions.json`: each condition's title and the prompt formats chosen.
    pub decisions: Option<Decisions>,
}

impl RunData {
    /// Read every input of `dir`. A malformed file is an error naming its line; a missing
    /// optional file is `None`.
    pub fn load(dir: &Path) -> Result<RunData, ReportError> {
        let stability_path = dir.join("stability.csv");
        if !stability_path.is_file() {
            return Err(ReportError::input(
                &stability_path,
                "missing: a run folder needs at least stability.csv",
            ));
        }
        Ok(RunData {
            dir: dir.to_path_buf(),
            stability: pstat_tables::read_table(dir).map_err(input)?,
            layers: read_json_opt(&dir.join(pstat_tables::LAYERS_FILE))?,
            familiarity: read_table_opt(dir)?,
            distances: read_table_opt(dir)?,
            bigram_curves: read_table_opt(dir)?,
            bigram_distances: read_table_opt(dir)?,
            cluster_members: read_table_opt(dir)?,
            cluster_results: read_cluster_results(&dir.join("clusters"))?,
            themes: read_table_opt(dir)?,
            answers: read_table_opt(dir)?,
            relabelled: read_table_opt(dir)?,
            resamples: read_table_opt(dir)?,
            comparisons: read_table_opt(dir)?,
            comparison_families: read_table_opt(dir)?,
            across_models: read_table_opt(dir)?,
            across_model_pairs: read_table_opt(dir)?,
            sign_tests: read_table_opt(dir)?,
            agreement: read_table_opt(dir)?,
            manifest: read_json_opt(&dir.join("manifest.json"))?,
            decisions: read_json_opt(&dir.join(pstat_tables::DECISIONS_FILE))?,
        })
    }
}

fn input(e: TableError) -> ReportError {
    match e {
        TableError::Io { path, source } => ReportError::io(path, source),
        TableError::Format {
            path,
            line,
            message,
        } => ReportError::input(
            path,
            match line {
                Some(line) => format!("line {line}: {message}"),
                None => message,
            },
        ),
    }
}

fn read_table_opt<T: Table>(dir: &Path) -> Result<Option<Vec<T>>, ReportError> {
    pstat_tables::read_table_opt(dir).map_err(input)
}

fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, ReportError> {
    if !path.is_file() {
        return Ok(None);
    }
    pstat_tables::read_json(path).map(Some).map_err(input)
}

/// A `result.json` as the run writes it, a record with its content hash (checked when the run
/// reads it back), or the bare result of folders written before the hash.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredCluster {
    Record { record: ClusterResult },
    Bare(ClusterResult),
}

impl StoredCluster {
    fn result(self) -> ClusterResult {
        match self {
            StoredCluster::Record { record } | StoredCluster::Bare(record) => record,
        }
    }
}

/// `clusters/<model>/<domain>/result.json`, in sorted path order so reports are reproducible.
fn read_cluster_results(root: &Path) -> Result<Vec<ClusterResult>, ReportError> {
    let mut out = Vec::new();
    for model_dir in sorted_subdirs(root)? {
        for domain_dir in sorted_subdirs(&model_dir)? {
            let path = domain_dir.join("result.json");
            if let Some(mut result) =
                read_json_opt::<StoredCluster>(&path)?.map(StoredCluster::result)
            {
                if result.labels.len() != result.embedding_2d.len() {
                    return Err(ReportError::input(
                        &path,
                        format!(
                            "{} labels but {} embedded points",
                            result.labels.len(),
                            result.embedding_2d.len()
                        ),
                    ));
                }
                result.model = file_name(&model_dir);
                result.domain = file_name(&domain_dir);
                out.push(result);
            }
        }
    }
    Ok(out)
}

fn sorted_subdirs(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
