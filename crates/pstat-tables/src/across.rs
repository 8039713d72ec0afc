//! The tables that summarise a run across its models (the authors' analysis-script tables) and
//! its comparison families.

use crate::keys::{Baseline, Instantiation, Probe, PromptFormat};
use crate::{Table, key_of, rows::opt};
use serde::{Deserialize, Serialize};

/// One row of `across_models.csv`: one perturbation of one selection (domain, instantiation,
/// probe, K, baseline, format, layer offset, variant) summarised over the run's models as the
/// authors' perturbation summary and average-rank tables do. Rates undefined for a model do
/// not count; ranks are 1 for the largest rate among the model's perturbations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModelRow {
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    /// Representational rows: the layer minus the model's veracity layer.
    pub layer_offset: Option<i64>,
    /// `main` or `volume_matched`.
    pub variant: String,
    pub condition: String,
    /// Models with a row of this selection.
    pub n_models: usize,
    pub n_models_retraction: usize,
    pub retraction_rate_mean: Option<f64>,
    pub retraction_rate_median: Option<f64>,
    pub n_models_expansion: usize,
    pub expansion_rate_mean: Option<f64>,
    pub expansion_rate_median: Option<f64>,
    /// Mean over models of the condition's rank by ρ_R among the selection's perturbations.
    pub average_retraction_rank: Option<f64>,
    pub average_expansion_rank: Option<f64>,
    /// Models in which this condition has the largest ρ_R (ties count for every tied one).
    pub n_models_ranked_first_retraction: usize,
    pub n_models_ranked_first_expansion: usize,
}

impl Table for AcrossModelRow {
    const FILE: &'static str = "across_models.csv";
    fn key(&self) -> String {
        key_of(&[
            &self.domain,
            self.instantiation.as_str(),
            self.probe.as_str(),
            &opt(&self.k),
            &opt(&self.baseline),
            &opt(&self.format),
            &opt(&self.layer_offset),
            &self.variant,
            &self.condition,
        ])
    }
}

/// One row of `across_model_pairs.csv`: in how many of a selection's models one comparison of
/// retraction rates holds (the authors' Synthetic-vs-Fictional comparison table). The
/// comparisons are each `compare_with` pair (`synthetic_tf > fictional`), every compared
/// condition above every condition it is compared with (`all > all`), and at least one above
/// all of them (`any > all`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModelPairRow {
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    pub layer_offset: Option<i64>,
    pub variant: String,
    pub comparison: String,
    /// Models of the selection: the denominator of `prop_models`, as the authors'; a model
    /// where a rate is undefined counts as not holding.
    pub n_models: usize,
    pub num_models: usize,
    pub prop_models: f64,
}

impl Table for AcrossModelPairRow {
    const FILE: &'static str = "across_model_pairs.csv";
    fn key(&self) -> String {
        key_of(&[
            &self.domain,
            self.instantiation.as_str(),
            self.probe.as_str(),
            &opt(&self.k),
            &opt(&self.baseline),
            &opt(&self.format),
            &opt(&self.layer_offset),
            &self.variant,
            &self.comparison,
        ])
    }
}

/// The `domain` of a sign test over every domain: one difference per model, its mean over
/// the model's domains, so that models are the independent units.
pub const POOLED: &str = "pooled";

/// One row of `sign_tests.csv`: the exact sign test of one comparison of `comparisons.csv`
/// across models, in one domain or pooled over domains ([`POOLED`]). Holm's correction runs
/// within `family`: the per-domain tests of a claim form one family, its pooled test another.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignTestRow {
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub variant: String,
    pub condition_a: String,
    pub condition_b: String,
    pub domain: String,
    /// Models with this comparison in `domain`.
    pub n_models: usize,
    /// Models whose difference ρ_R(Θa) − ρ_R(Θb) is positive, negative, zero.
    pub positive: usize,
    pub negative: usize,
    pub ties: usize,
    /// Two-sided exact binomial(n, ½) p-value over the non-zero differences.
    pub p_value: f64,
    pub family: String,
    pub family_size: usize,
    pub p_holm: f64,
    pub significant: bool,
}

impl Table for SignTestRow {
    const FILE: &'static str = "sign_tests.csv";
    fn key(&self) -> String {
        key_of(&[
            self.instantiation.as_str(),
            self.probe.as_str(),
            &self.variant,
            &self.condition_a,
            &self.condition_b,
            &self.domain,
        ])
    }
}

/// One row of `comparison_families.csv`: a multiple-comparison family of `comparisons.csv`,
/// its size, and the smallest Holm-adjusted p-value its rows could reach at all (every
/// baseline-True statement of its largest row retracted under one Θ only): a family whose
/// smallest attainable p is not below the level can never report a significant difference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparisonFamilyRow {
    pub family: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub condition_a: String,
    pub condition_b: String,
    pub variant: String,
    pub test: String,
    pub family_size: usize,
    pub n_significant: usize,
    pub smallest_attainable_p_holm: f64,
}

impl Table for ComparisonFamilyRow {
    const FILE: &'static str = "comparison_families.csv";
    fn key(&self) -> String {
        self.family.clone()
    }
}

/// `across_models.json`: the three across-model tables in one file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModels {
    pub perturbations: Vec<AcrossModelRow>,
    pub pairs: Vec<AcrossModelPairRow>,
    pub sign_tests: Vec<SignTestRow>,
}

pub const ACROSS_MODELS_JSON: &str = "across_models.json";
