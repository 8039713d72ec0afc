//! The tables that summarise a run across its models (the authors' analysis-script tables) and
//! its comparison families.

use crate::Table;
use crate::keys::{Baseline, Instantiation, Probe, PromptFormat};
use serde::{Deserialize, Serialize};

/// One row of `across_models.csv`: one perturbation of one selection (domain, instantiation,
/// probe, K, baseline, format, layer offset, variant) summarised over the run's models as the
/// authors' perturbation summary and average-rank tables do. Rates undefined for a model do
/// not count; ranks are 1 for the largest rate among the model's perturbations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModelRow {
    /// The domain of the selection.
    pub domain: String,
    /// `representational`, `behavioral` or `contextual`.
    pub instantiation: Instantiation,
    /// `sawmil` or `mass_mean` (representational rows), `prompt` (behavioral rows).
    pub probe: Probe,
    /// Behavioral and contextual rows: K, the context size; empty for representational rows.
    pub k: Option<usize>,
    /// Behavioral and contextual rows: Θ0's context, `empty` or `true`; empty for
    /// representational rows.
    pub baseline: Option<Baseline>,
    /// Behavioral rows: the prompt format, `chat` or `plain`; empty for representational rows.
    pub format: Option<PromptFormat>,
    /// Representational and contextual rows: the layer minus the model's veracity layer (0 at
    /// the veracity layer, where the paired tests compare); empty for behavioral rows.
    pub layer_offset: Option<i64>,
    /// `main`, or `volume_matched` (the volume-matched fits); noise-floor refits and
    /// behavioral resamples are left out.
    pub variant: String,
    /// The perturbation Θ.
    pub condition: String,
    /// Models of the selection with a row of this condition.
    pub n_models: usize,
    /// Of those, models where ρ_R is defined (the models the retraction columns average).
    pub n_models_retraction: usize,
    /// Mean ρ_R over those models; empty where there are none.
    pub retraction_rate_mean: Option<f64>,
    /// Median ρ_R over those models; empty where there are none.
    pub retraction_rate_median: Option<f64>,
    /// Models where ρ_E is defined (the models the expansion columns average).
    pub n_models_expansion: usize,
    /// Mean ρ_E over those models; empty where there are none.
    pub expansion_rate_mean: Option<f64>,
    /// Median ρ_E over those models; empty where there are none.
    pub expansion_rate_median: Option<f64>,
    /// Mean over models of the condition's rank by ρ_R among the selection's perturbations
    /// whose ρ_R is defined (1 = largest; equal rates share the average of the ranks they
    /// span), over the models where ρ_R is defined; empty where it is defined in no model.
    pub average_retraction_rank: Option<f64>,
    /// The same rank by ρ_E; empty where ρ_E is defined in no model.
    pub average_expansion_rank: Option<f64>,
    /// Models in which this condition has the largest ρ_R (ties count for every tied one).
    pub n_models_ranked_first_retraction: usize,
    /// Models in which this condition has the largest ρ_E (ties count for every tied one).
    pub n_models_ranked_first_expansion: usize,
}

impl Table for AcrossModelRow {
    const FILE: &'static str = "across_models.csv";
}

/// One row of `across_model_pairs.csv`: in how many of a selection's models one comparison of
/// retraction rates holds (the authors' Synthetic-vs-Fictional comparison table). The
/// comparisons are each `compare_with` pair (`synthetic_tf > fictional`), every compared
/// condition above every condition it is compared with (`all > all`), and at least one above
/// all of them (`any > all`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModelPairRow {
    /// The domain of the selection.
    pub domain: String,
    /// `representational`, `behavioral` or `contextual`.
    pub instantiation: Instantiation,
    /// `sawmil` or `mass_mean` (representational rows), `prompt` (behavioral rows).
    pub probe: Probe,
    /// Behavioral and contextual rows: K, the context size; empty for representational rows.
    pub k: Option<usize>,
    /// Behavioral and contextual rows: Θ0's context, `empty` or `true`; empty for
    /// representational rows.
    pub baseline: Option<Baseline>,
    /// Behavioral rows: the prompt format, `chat` or `plain`; empty for representational rows.
    pub format: Option<PromptFormat>,
    /// Representational and contextual rows: the layer minus the model's veracity layer; empty
    /// for behavioral rows.
    pub layer_offset: Option<i64>,
    /// `main` or `volume_matched`.
    pub variant: String,
    /// What is compared by ρ_R: `<a> > <b>` for a `compare_with` pair; where a side has
    /// several conditions, also `all of <a, …> > all of <b, …>` (the smallest of one side
    /// above the largest of the other) and `any of <a, …> > all of <b, …>` (the largest of
    /// one side above the largest of the other).
    pub comparison: String,
    /// Models of the selection: the denominator of `prop_models`, as the authors'; a model
    /// where a rate is undefined counts as not holding.
    pub n_models: usize,
    /// Models in which the comparison holds.
    pub num_models: usize,
    /// `num_models` / `n_models`, in [0, 1].
    pub prop_models: f64,
}

impl Table for AcrossModelPairRow {
    const FILE: &'static str = "across_model_pairs.csv";
}

/// The `domain` of a sign test over every domain: one difference per model, its mean over
/// the model's domains, so that models are the independent units.
pub const POOLED: &str = "pooled";

/// One row of `sign_tests.csv`: the exact sign test of one comparison of `comparisons.csv`
/// across models, in one domain or pooled over domains ([`POOLED`]). Holm's correction runs
/// within `family`: the per-domain tests of a claim form one family, its pooled test another.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignTestRow {
    /// `representational`, `behavioral` or `contextual`.
    pub instantiation: Instantiation,
    /// `sawmil` or `mass_mean` (representational rows), `prompt` (behavioral rows).
    pub probe: Probe,
    /// `main` or `volume_matched`, as in `comparisons.csv`.
    pub variant: String,
    /// Θa of the comparison.
    pub condition_a: String,
    /// Θb of the comparison.
    pub condition_b: String,
    /// The domain tested, or [`POOLED`] for the test over all domains.
    pub domain: String,
    /// Models with this comparison in `domain` (any domain for [`POOLED`]): one difference
    /// each, the mean of the model's rows.
    pub n_models: usize,
    /// Models whose difference ρ_R(Θa) − ρ_R(Θb) is positive.
    pub positive: usize,
    /// Models whose difference is negative.
    pub negative: usize,
    /// Models whose difference is exactly 0 (left out of the test).
    pub ties: usize,
    /// Two-sided exact binomial(n, ½) p-value over the n = `positive` + `negative` non-zero
    /// differences (uncorrected; 1 when there are none).
    pub p_value: f64,
    /// The multiple-comparison family:
    /// `<instantiation>/<probe>/<condition_a>-vs-<condition_b>/<variant>/per_domain` for the
    /// per-domain tests of a claim, `…/pooled` for its pooled test.
    pub family: String,
    /// Rows in `family`: the claim's domains, or 1 for the pooled test.
    pub family_size: usize,
    /// `p_value` Holm-adjusted within `family` (capped at 1).
    pub p_holm: f64,
    /// `p_holm` below 0.05.
    pub significant: bool,
}

impl Table for SignTestRow {
    const FILE: &'static str = "sign_tests.csv";
}

/// One row of `comparison_families.csv`: a multiple-comparison family of `comparisons.csv`,
/// its size, and the smallest Holm-adjusted p-value its rows could reach at all (every
/// baseline-True statement of its largest row retracted under one Θ only): a family whose
/// smallest attainable p is not below the level can never report a significant difference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparisonFamilyRow {
    /// The family, as in [`ComparisonRow::family`](crate::ComparisonRow::family).
    pub family: String,
    /// `representational`, `behavioral` or `contextual`.
    pub instantiation: Instantiation,
    /// `sawmil` or `mass_mean` (representational rows), `prompt` (behavioral rows).
    pub probe: Probe,
    /// Θa of the family's comparison.
    pub condition_a: String,
    /// Θb of the family's comparison.
    pub condition_b: String,
    /// `main` or `volume_matched`.
    pub variant: String,
    /// The test of its rows: `mcnemar_exact`.
    pub test: String,
    /// Rows of `comparisons.csv` in the family.
    pub family_size: usize,
    /// Of those, rows with `significant` true.
    pub n_significant: usize,
    /// The smallest Holm-adjusted p any of its rows could reach: min(1, `family_size` ×
    /// 2^(1−n)) for n the largest `n_baseline_true` among its rows.
    pub smallest_attainable_p_holm: f64,
}

impl Table for ComparisonFamilyRow {
    const FILE: &'static str = "comparison_families.csv";
}

/// `across_models.json`: the three across-model tables in one file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcrossModels {
    /// The rows of `across_models.csv`.
    pub perturbations: Vec<AcrossModelRow>,
    /// The rows of `across_model_pairs.csv`.
    pub pairs: Vec<AcrossModelPairRow>,
    /// The rows of `sign_tests.csv`.
    pub sign_tests: Vec<SignTestRow>,
}

/// `across_models.json`: the file [`AcrossModels`] is written to.
pub const ACROSS_MODELS_JSON: &str = "across_models.json";
