//! Everything a report is built from: the files of one run output folder. Only
//! `stability.csv` is required; every other input is optional and its absence drops the
//! sections that need it (with a note), so a partial run still gets a report.

use crate::error::ReportError;
use crate::tables::KindCell;
use pstat_stability::StabilityRow;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// `familiarity.csv`: mean object-token probability per (model, domain, kind) (Tables A6–A8).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FamiliarityRow {
    pub model: String,
    pub domain: String,
    pub kind: String,
    pub n: usize,
    pub mean_object_token_prob: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

/// `distances.csv`: mean within-group Euclidean distance per (model, domain, kind) (Fig. 2d).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DistanceRow {
    pub model: String,
    pub domain: String,
    pub kind: String,
    pub n_pairs: usize,
    pub mean_distance: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl FamiliarityRow {
    pub fn cell(&self) -> KindCell<'_> {
        KindCell {
            model: &self.model,
            domain: &self.domain,
            kind: &self.kind,
            value: self.mean_object_token_prob,
            lo: self.lo,
            hi: self.hi,
        }
    }
}

impl DistanceRow {
    pub fn cell(&self) -> KindCell<'_> {
        KindCell {
            model: &self.model,
            domain: &self.domain,
            kind: &self.kind,
            value: self.mean_distance,
            lo: self.lo,
            hi: self.hi,
        }
    }
}

/// `bigram_rank_frequency.csv` (written by `pstat data bigrams`): one point of a curve.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BigramRankRow {
    pub domain: String,
    pub kind: String,
    pub rank: usize,
    pub frequency: f64,
}

/// `bigram_distances.csv`: Jensen–Shannon distance between two kinds' bigram distributions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BigramDistanceRow {
    pub domain: String,
    pub kind_a: String,
    pub kind_b: String,
    pub js_distance: f64,
}

/// `clusters.csv`: the cluster of each retracted statement (−1 = noise).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterMember {
    pub model: String,
    pub domain: String,
    pub statement_id: String,
    pub cluster: i32,
}

/// The parts of `clusters/<model>/<domain>/result.json` the report shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterResult {
    #[serde(skip)]
    pub model: String,
    #[serde(skip)]
    pub domain: String,
    /// The selected pipeline configuration, shown as given.
    pub chosen: serde_json::Value,
    pub score: f64,
    pub labels: Vec<i32>,
    pub embedding_2d: Vec<[f64; 2]>,
}

/// `themes.csv`: the labeler's answer per cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ThemeRow {
    pub model: String,
    pub domain: String,
    pub cluster: i32,
    pub cluster_label: String,
    pub shared_cluster_pattern: String,
    pub retraction_hypothesis: String,
}

/// `answers.csv`: how often each option was chosen (counts or fractions; the report shows shares).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AnswerRow {
    pub model: String,
    pub domain: String,
    pub condition: String,
    pub format: Option<String>,
    pub k: Option<usize>,
    pub n: usize,
    pub a: f64,
    pub b: f64,
    pub c: f64,
    /// `empty` or `true` (absent in older runs).
    #[serde(default)]
    pub baseline: Option<String>,
    /// `small_baseline` on a baseline unit with too few True beliefs.
    #[serde(default)]
    pub flag: Option<String>,
}

/// One entry of `layers.json`: the veracity layer chosen for a (model, domain).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LayerChoice {
    pub model: String,
    pub domain: String,
    pub veracity_layer: usize,
    pub criterion: String,
    #[serde(default)]
    pub scores: Vec<LayerScore>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LayerScore {
    pub layer: usize,
    pub auc: f64,
}

/// The contents of a run folder.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    pub dir: PathBuf,
    pub stability: Vec<StabilityRow>,
    pub layers: Option<Vec<LayerChoice>>,
    pub familiarity: Option<Vec<FamiliarityRow>>,
    pub distances: Option<Vec<DistanceRow>>,
    pub bigram_curves: Option<Vec<BigramRankRow>>,
    pub bigram_distances: Option<Vec<BigramDistanceRow>>,
    pub cluster_members: Option<Vec<ClusterMember>>,
    pub cluster_results: Vec<ClusterResult>,
    pub themes: Option<Vec<ThemeRow>>,
    pub answers: Option<Vec<AnswerRow>>,
    pub manifest: Option<serde_json::Value>,
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
        let stability = pstat_stability::read_csv(&stability_path)
            .map_err(|message| ReportError::input(&stability_path, message))?;
        Ok(RunData {
            dir: dir.to_path_buf(),
            stability,
            layers: read_json_opt(&dir.join("layers.json"))?,
            familiarity: read_csv_opt(&dir.join("familiarity.csv"))?,
            distances: read_csv_opt(&dir.join("distances.csv"))?,
            bigram_curves: read_csv_opt(&dir.join("bigram_rank_frequency.csv"))?,
            bigram_distances: read_csv_opt(&dir.join("bigram_distances.csv"))?,
            cluster_members: read_csv_opt(&dir.join("clusters.csv"))?,
            cluster_results: read_cluster_results(&dir.join("clusters"))?,
            themes: read_csv_opt(&dir.join("themes.csv"))?,
            answers: read_csv_opt(&dir.join("answers.csv"))?,
            manifest: read_json_opt(&dir.join("manifest.json"))?,
        })
    }
}

fn read_csv_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<Vec<T>>, ReportError> {
    if !path.is_file() {
        return Ok(None);
    }
    let mut reader = csv::Reader::from_path(path).map_err(|e| ReportError::input(path, e))?;
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e| ReportError::input(path, format!("line {}: {e}", i + 2))))
        .collect::<Result<Vec<T>, _>>()
        .map(Some)
}

fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, ReportError> {
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(path).map_err(|e| ReportError::io(path, e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ReportError::input(path, e))
}

/// `clusters/<model>/<domain>/result.json`, in sorted path order so reports are reproducible.
fn read_cluster_results(root: &Path) -> Result<Vec<ClusterResult>, ReportError> {
    let mut out = Vec::new();
    for model_dir in sorted_subdirs(root)? {
        for domain_dir in sorted_subdirs(&model_dir)? {
            let path = domain_dir.join("result.json");
            if let Some(mut result) = read_json_opt::<ClusterResult>(&path)? {
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
