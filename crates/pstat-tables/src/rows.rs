//! One type per table. Columns that do not apply, and undefined values, are empty cells,
//! which pandas reads as NaN.

use crate::Table;
use crate::keys::{Baseline, Instantiation, Probe, PromptFormat};
use serde::{Deserialize, Serialize};

/// One row of `stability.csv`: ρ_R and ρ_E of one perturbation against its baseline, per
/// (model, domain, instantiation, probe, k, baseline, format, layer, condition, resample).
/// `Default` is an empty row (no rates) for building rows field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// `representational` (a probe retrained on hidden states) or `behavioral` (the
    /// model's answer to the prompt).
    pub instantiation: Instantiation,
    /// What judges the statements: `sawmil` or `mass_mean` (representational rows), `prompt`
    /// (behavioral rows).
    pub probe: Probe,
    /// Behavioral rows: K, the number of statements Θ's belief context asks for; empty for
    /// representational rows.
    pub k: Option<usize>,
    /// Behavioral rows: Θ0's context, `empty` (none, the paper's) or `true` (K True training
    /// statements); empty for representational rows.
    pub baseline: Option<Baseline>,
    /// Behavioral rows: the prompt format, `chat` or `plain`; empty for representational rows.
    pub format: Option<PromptFormat>,
    /// Representational rows: the hidden-state layer the probe reads, 1-based (the veracity
    /// layer or one of its window); empty for behavioral rows.
    pub layer: Option<usize>,
    /// The perturbation Θ (a condition's `name`, e.g. `synthetic_tf`), or [`BASELINE_REFIT`]
    /// for a noise-floor refit. Θ0 itself has no row.
    pub condition: String,
    /// Index of the context draw (behavioral resamples), or `shuffle` controls; for
    /// representational rows `refit<i>` (the noise floor's refits) or [`VOLUME_MATCHED`];
    /// empty for the main rows.
    pub resample: Option<String>,
    /// |B_true(Θ0)|: held-out True statements the baseline judges True (the denominator
    /// of ρ_R).
    pub n_baseline_true: usize,
    /// |B_not_true(Θ0)|: held-out True statements the baseline judges Not True (the
    /// denominator of ρ_E).
    pub n_baseline_not_true: usize,
    /// |R| = |B_true(Θ0) \ B_true(Θ)|: held-out True statements judged True under Θ0 and
    /// Not True under Θ.
    pub retractions: usize,
    /// |E| = |B_true(Θ) \ B_true(Θ0)|: held-out True statements judged Not True under Θ0 and
    /// True under Θ.
    pub expansions: usize,
    /// ρ_R = `retractions` / `n_baseline_true`, in [0, 1]; empty when `n_baseline_true` is 0.
    pub retraction_rate: Option<f64>,
    /// Lower end (2.5% percentile) of ρ_R's 95% percentile bootstrap interval over the
    /// held-out statements; empty where ρ_R is.
    pub retraction_rate_lo: Option<f64>,
    /// Upper end (97.5% percentile) of ρ_R's bootstrap interval; empty where ρ_R is.
    pub retraction_rate_hi: Option<f64>,
    /// ρ_E = `expansions` / `n_baseline_not_true`, in [0, 1]; empty when
    /// `n_baseline_not_true` is 0.
    pub expansion_rate: Option<f64>,
    /// Lower end (2.5% percentile) of ρ_E's 95% percentile bootstrap interval over the
    /// held-out statements; empty where ρ_E is.
    pub expansion_rate_lo: Option<f64>,
    /// Upper end (97.5% percentile) of ρ_E's bootstrap interval; empty where ρ_E is.
    pub expansion_rate_hi: Option<f64>,
    /// `small_baseline` when `n_baseline_true` is below
    /// [`MIN_BASELINE_TRUE`](crate::MIN_BASELINE_TRUE) (20), too few True beliefs for a
    /// meaningful rate; empty otherwise.
    pub flag: Option<String>,
    /// sAwMIL's C, the same for every Θ of a (model, domain, layer): chosen by the CV search
    /// on the baseline's labels or fixed in the config. Empty for Mass-Mean and behavioral rows.
    /// Columns after `flag` are appended, so readers of older tables keep working.
    #[serde(default)]
    pub c: Option<f64>,
    /// Statements actually in Θ's belief context (behavioral rows; empty otherwise).
    #[serde(default)]
    pub context_size: Option<usize>,
    /// The context holds fewer than the `k` it was asked for (only with `allow_fewer`): the
    /// rate is not a K-statement rate. Empty where there is no context.
    #[serde(default)]
    pub short_context: Option<bool>,
    /// sAwMIL rows: whether the QPs of both the baseline and the perturbed probe converged
    /// before the solver's caps (`false`: at least one fit is approximate). Empty for Mass-Mean
    /// and behavioral rows.
    #[serde(default)]
    pub converged: Option<bool>,
    /// Representational rows: training bags (of those the fit saw) that Θ labels otherwise than
    /// Θ0. Empty for behavioral rows.
    #[serde(default)]
    pub relabelled: Option<usize>,
    /// Representational rows of a probe unit at the veracity layer (perturbations and their
    /// [`VOLUME_MATCHED`] fits): the largest ρ_R of the unit's noise-floor refits
    /// ([`BASELINE_REFIT`] rows). Empty for the refits themselves, other layers and behavioral
    /// rows.
    #[serde(default)]
    pub floor_retraction_rate: Option<f64>,
    /// `retraction_rate` above `floor_retraction_rate`: Θ retracts more than any refit with
    /// unchanged labels did. Empty where there is no floor or ρ_R is undefined.
    #[serde(default)]
    pub exceeds_floor: Option<bool>,
}

/// The `resample` of a representational row fit with every Θ relabelling the same number of
/// training bags (the smallest any Θ of the unit relabels; [`RESAMPLE_REFIT`] rows are the
/// noise floor).
pub const VOLUME_MATCHED: &str = "volume_matched";

/// The `resample` of the i-th noise-floor refit is `refit<i>` (1-based).
pub const RESAMPLE_REFIT: &str = "refit";

/// The `condition` of a representational row that is not a perturbation but the noise floor:
/// the baseline probe refit with unchanged labels (sAwMIL: another seeded shuffle, capping and
/// Noise draw of its training bags; Mass-Mean: a bootstrap resample of its training bags),
/// compared with the baseline, so its rates are what refitting alone moves. Its `resample` is
/// `refit<i>`.
pub const BASELINE_REFIT: &str = "baseline_refit";

/// The identifying columns of a [`StabilityRow`], apart from the measured values: the one
/// place they are spelled. Stability rows and the paired comparisons' rows are built from a
/// `RowKey` (`pstat_stability::stability_row`, `pstat_stability::paired`), so the columns that
/// join `stability.csv` to `comparisons.csv` cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RowKey {
    /// See [`StabilityRow::model`].
    pub model: String,
    /// See [`StabilityRow::domain`].
    pub domain: String,
    /// See [`StabilityRow::instantiation`].
    pub instantiation: Instantiation,
    /// See [`StabilityRow::probe`].
    pub probe: Probe,
    /// See [`StabilityRow::k`].
    pub k: Option<usize>,
    /// See [`StabilityRow::baseline`].
    pub baseline: Option<Baseline>,
    /// See [`StabilityRow::format`].
    pub format: Option<PromptFormat>,
    /// See [`StabilityRow::layer`].
    pub layer: Option<usize>,
    /// See [`StabilityRow::condition`].
    pub condition: String,
    /// See [`StabilityRow::resample`].
    pub resample: Option<String>,
}

impl StabilityRow {
    /// The row in one line for a terminal: format, domain, K, baseline, Θ, ρ_R with its counts
    /// and ρ_E (`pstat prompt` prints its behavioral rows so).
    pub fn summary_line(&self) -> String {
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
        let rate = |r: Option<f64>| r.map_or("undefined".to_string(), |v| format!("{v:.3}"));
        format!(
            "{} {} K={} baseline={}: {:14} ρ_R = {} ({} / {})  ρ_E = {}",
            or_dash(self.format.map(|f| f.to_string())),
            self.domain,
            or_dash(self.k.map(|k| k.to_string())),
            or_dash(self.baseline.map(|b| b.as_str().to_string())),
            self.condition,
            rate(self.retraction_rate),
            self.retractions,
            self.n_baseline_true,
            rate(self.expansion_rate)
        )
    }

    /// The row's identifying columns (a comparison of this row's configuration is built from
    /// them).
    pub fn row_key(&self) -> RowKey {
        RowKey {
            model: self.model.clone(),
            domain: self.domain.clone(),
            instantiation: self.instantiation,
            probe: self.probe,
            k: self.k,
            baseline: self.baseline,
            format: self.format,
            layer: self.layer,
            condition: self.condition.clone(),
            resample: self.resample.clone(),
        }
    }
}

/// The columns of `stability.csv`, in order.
pub const STABILITY_COLUMNS: [&str; 28] = [
    "model",
    "domain",
    "instantiation",
    "probe",
    "k",
    "baseline",
    "format",
    "layer",
    "condition",
    "resample",
    "n_baseline_true",
    "n_baseline_not_true",
    "retractions",
    "expansions",
    "retraction_rate",
    "retraction_rate_lo",
    "retraction_rate_hi",
    "expansion_rate",
    "expansion_rate_lo",
    "expansion_rate_hi",
    "flag",
    "c",
    "context_size",
    "short_context",
    "converged",
    "relabelled",
    "floor_retraction_rate",
    "exceeds_floor",
];

impl Table for StabilityRow {
    const FILE: &'static str = "stability.csv";
    const EMPTY_HEADER: Option<&'static [&'static str]> = Some(&STABILITY_COLUMNS);
}

/// One row of `comparisons.csv`: a paired comparison ρ_R(Θa) − ρ_R(Θb) of two perturbations of
/// one (model, domain, instantiation, probe, k, baseline, format, layer), measured on the same
/// baseline-True statements: McNemar's exact test on the statements only one of the two
/// retracts, a bootstrap interval of the difference, and Holm's correction within the row's
/// family (the same comparison of the same instantiation and probe across the run's cells).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// `representational` or `behavioral`.
    pub instantiation: Instantiation,
    /// `sawmil` or `mass_mean` (representational rows), `prompt` (behavioral rows).
    pub probe: Probe,
    /// Behavioral rows: the main (largest) K; empty for representational rows.
    pub k: Option<usize>,
    /// Behavioral rows: Θ0's context (`empty`: comparisons are made against the empty
    /// baseline); empty for representational rows.
    pub baseline: Option<Baseline>,
    /// Behavioral rows: the prompt format, `chat` or `plain`; empty for representational rows.
    pub format: Option<PromptFormat>,
    /// Representational rows: the veracity layer (1-based); empty for behavioral rows.
    pub layer: Option<usize>,
    /// Θa, the condition whose `compare_with` names Θb.
    pub condition_a: String,
    /// Θb, the condition Θa is compared with.
    pub condition_b: String,
    /// `main`, or [`VOLUME_MATCHED`]: both Θ relabelled the same number of training bags.
    pub variant: String,
    /// |B_true(Θ0)|: the baseline-True statements both rates are over (never 0: a cell whose
    /// baseline believes nothing has no rows).
    pub n_baseline_true: usize,
    /// ρ_R(Θa), in [0, 1].
    pub retraction_rate_a: f64,
    /// ρ_R(Θb), in [0, 1].
    pub retraction_rate_b: f64,
    /// ρ_R(Θa) − ρ_R(Θb).
    pub difference: f64,
    /// Lower end (2.5% percentile) of the 95% percentile bootstrap interval of `difference`
    /// (statements resampled in pairs).
    pub difference_lo: f64,
    /// Upper end (97.5% percentile) of that interval.
    pub difference_hi: f64,
    /// Baseline-True statements retracted under Θa but not Θb: one side of the discordant
    /// pairs McNemar's test reads.
    pub a_only: usize,
    /// Baseline-True statements retracted under Θb but not Θa: the other side.
    pub b_only: usize,
    /// The test behind `p_value`: `mcnemar_exact` (two-sided binomial on the discordant pairs).
    pub test: String,
    /// Two-sided p-value of `test` (uncorrected).
    pub p_value: f64,
    /// The multiple-comparison family: `<instantiation>/<probe>/<condition_a>-vs-<condition_b>/<variant>`.
    pub family: String,
    /// Rows in `family` across the run's cells.
    pub family_size: usize,
    /// `p_value` Holm-adjusted within `family` (capped at 1).
    pub p_holm: f64,
    /// `p_holm` below 0.05.
    pub significant: bool,
    /// Representational rows: the largest minus the smallest ρ_R of the unit's noise-floor
    /// refits, the spread of a difference between two fits with unchanged labels. Empty for
    /// behavioral rows and where fewer than two refits have a defined ρ_R.
    pub floor_difference: Option<f64>,
    /// |`difference`| above `floor_difference`, compared in statements (|`a_only` − `b_only`|
    /// above the largest minus the smallest refit retraction count, over the same baseline-True
    /// statements); empty where there is no floor.
    pub exceeds_floor: Option<bool>,
}

/// The `variant` of the main comparisons.
pub const MAIN_VARIANT: &str = "main";

/// The columns of `comparisons.csv`, in order.
pub const COMPARISON_COLUMNS: [&str; 27] = [
    "model",
    "domain",
    "instantiation",
    "probe",
    "k",
    "baseline",
    "format",
    "layer",
    "condition_a",
    "condition_b",
    "variant",
    "n_baseline_true",
    "retraction_rate_a",
    "retraction_rate_b",
    "difference",
    "difference_lo",
    "difference_hi",
    "a_only",
    "b_only",
    "test",
    "p_value",
    "family",
    "family_size",
    "p_holm",
    "significant",
    "floor_difference",
    "exceeds_floor",
];

impl Table for ComparisonRow {
    const FILE: &'static str = "comparisons.csv";
    const EMPTY_HEADER: Option<&'static [&'static str]> = Some(&COMPARISON_COLUMNS);
}

/// One row of `answers.csv`: the answer distribution of one behavioral unit over the
/// held-out True statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The prompt format, `chat` or `plain`.
    pub format: PromptFormat,
    /// K, the number of statements the belief context asks for.
    pub k: usize,
    /// Θ0's context: `empty` or `true` (K True training statements).
    pub baseline: Baseline,
    /// The condition prompted: Θ0 (the condition set's baseline) or a perturbation Θ.
    pub condition: String,
    /// The context draw: `main`, a resample's number (`1`, `2`, …) or `shuffle` (the main
    /// draw's statements in a permuted order).
    pub draw: String,
    /// Held-out True statements prompted.
    pub n: usize,
    /// Statements answered `a` ("The statement is true."): judged True.
    pub a: usize,
    /// Statements answered `b` ("The statement is false.").
    pub b: usize,
    /// Statements answered `c` ("The statement is neither true nor false.").
    pub c: usize,
    /// Mean over the statements of the probability mass on tokens other than the three
    /// options (1 − p(a) − p(b) − p(c)), in [0, 1].
    pub mean_leftover: f64,
    /// `small_baseline` on Θ0's row when fewer than
    /// [`MIN_BASELINE_TRUE`](crate::MIN_BASELINE_TRUE) (20) statements are answered `a`:
    /// retraction rates against it mean little. Empty otherwise.
    pub flag: Option<String>,
}

impl Table for AnswerRow {
    const FILE: &'static str = "answers.csv";
}

/// One row of `resamples.csv`: ρ_R and ρ_E of a condition over its main context draw and
/// resamples, and the order-shuffle control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResampleRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The prompt format, `chat` or `plain`.
    pub format: PromptFormat,
    /// K, the number of statements the belief context asks for.
    pub k: usize,
    /// Θ0's context: `empty` or `true`.
    pub baseline: Baseline,
    /// The perturbation Θ.
    pub condition: String,
    /// Draws summarised: the main one and every resample.
    pub n_draws: usize,
    /// Mean ρ_R over the draws where it is defined; empty where it is defined in none.
    pub retraction_rate_mean: Option<f64>,
    /// Sample standard deviation of ρ_R over draws (n − 1 denominator); empty with fewer
    /// than two defined rates.
    pub retraction_rate_sd: Option<f64>,
    /// Smallest ρ_R over the draws; empty where none is defined.
    pub retraction_rate_min: Option<f64>,
    /// Largest ρ_R over the draws; empty where none is defined.
    pub retraction_rate_max: Option<f64>,
    /// Mean ρ_E over the draws where it is defined; empty where it is defined in none.
    pub expansion_rate_mean: Option<f64>,
    /// Sample standard deviation of ρ_E over draws (n − 1 denominator); empty with fewer
    /// than two defined rates.
    pub expansion_rate_sd: Option<f64>,
    /// ρ_R with the main draw's statements in a permuted order; empty without a shuffle
    /// control or where ρ_R is undefined.
    pub shuffle_retraction_rate: Option<f64>,
    /// Share of held-out statements whose judgment differs between the main draw and its
    /// shuffled order, in [0, 1]: the noise floor of the judgment itself. Empty without a
    /// shuffle control.
    pub shuffle_flip_rate: Option<f64>,
}

impl Table for ResampleRow {
    const FILE: &'static str = "resamples.csv";
}

/// One row of `familiarity.csv`: mean object-token probability per (model, domain, kind)
/// with a bootstrap 95% interval (Tables A6–A8, Fig. 2e).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamiliarityRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// Statement kind: `true`, `false`, `fictional` (Fictional (T) and (F) pooled),
    /// `fictional_t`, `fictional_f`, `synthetic_tf` or `synthetic_fi`.
    pub kind: String,
    /// Sampled statements of the kind with at least one scored object token (the ones averaged).
    pub n: usize,
    /// Mean Fam(s) over those statements: Fam(s) is the mean probability the model gives each
    /// of the statement's object tokens after the tokens before it, so the value is in [0, 1].
    pub mean_object_token_prob: f64,
    /// Lower end (2.5% percentile) of the mean's 95% percentile bootstrap interval.
    pub lo: f64,
    /// Upper end (97.5% percentile) of that interval.
    pub hi: f64,
}

impl Table for FamiliarityRow {
    const FILE: &'static str = "familiarity.csv";
}

/// One row of `distances.csv`: mean within-kind Euclidean distance of standardized
/// last-token representations at `layer`, with a bootstrap 95% interval (Fig. 2d).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistanceRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// Statement kind: `true`, `false`, `fictional_t`, `fictional_f`, `synthetic_tf` or
    /// `synthetic_fi`.
    pub kind: String,
    /// The veracity layer (1-based) the representations are read at.
    pub layer: usize,
    /// Pairs of statements of the kind measured: every pair, or a seeded sample of
    /// `familiarity.distance_pairs` where there are more.
    pub n_pairs: usize,
    /// Mean Euclidean distance over those pairs, in units of the standardized features.
    pub mean_distance: f64,
    /// Lower end (2.5% percentile) of the mean's 95% percentile bootstrap interval.
    pub lo: f64,
    /// Upper end (97.5% percentile) of that interval.
    pub hi: f64,
}

impl Table for DistanceRow {
    const FILE: &'static str = "distances.csv";
}

/// One point of `bigram_rank_frequency.csv`: the character-bigram rank–frequency curve of a
/// domain × kind (Fig. 2 a–c).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BigramRankRow {
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// Statement type: `True`, `False`, `Fictional` (Fictional (T) and (F) share their
    /// entities), `Synthetic (TF)` or `Synthetic (Fi)`.
    pub kind: String,
    /// 1 = most frequent bigram; ties broken alphabetically so the curve is reproducible.
    pub rank: usize,
    /// The two characters, lower-cased, from a subject or object string.
    pub bigram: String,
    /// Occurrences of the bigram in the type's subject and object strings.
    pub count: u64,
    /// `count` / all bigrams of this domain × kind, in (0, 1].
    pub frequency: f64,
}

impl Table for BigramRankRow {
    const FILE: &'static str = "bigram_rank_frequency.csv";
}

/// One row of `bigram_distances.csv`: the Jensen–Shannon distance between two kinds' bigram
/// distributions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BigramDistanceRow {
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The first statement type (types in the order `True`, `False`, `Fictional`,
    /// `Synthetic (TF)`, `Synthetic (Fi)`; see [`BigramRankRow::kind`]).
    pub kind_a: String,
    /// The second statement type, later in that order.
    pub kind_b: String,
    /// Jensen–Shannon distance of the two bigram distributions: the square root of the
    /// base-2 divergence, in [0, 1] (0: identical, 1: disjoint).
    pub js_distance: f64,
}

impl Table for BigramDistanceRow {
    const FILE: &'static str = "bigram_distances.csv";
}

/// One row of `clusters.csv`: the cluster of a retracted statement (−1 = noise), and which
/// main configurations retracted it (Appendix I: sAwMIL at the veracity layer, the prompt at
/// the main K, empty baseline and main format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// Id of a held-out True statement that some main configuration retracted.
    pub statement_id: String,
    /// Its cluster in the chosen PCA/UMAP/HDBSCAN configuration; −1 = noise (in no cluster).
    pub cluster: i32,
    /// How many (instantiation, condition) pairs retracted the statement.
    #[serde(default)]
    pub retraction_count: usize,
    /// Those pairs as `instantiation:condition`, `;`-separated, sorted.
    #[serde(default)]
    pub retracted_by: String,
}

impl Table for ClusterRow {
    const FILE: &'static str = "clusters.csv";
}

/// One row of `themes.csv`: the labeler's answer for one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThemeRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The cluster's id, as in `clusters.csv`.
    pub cluster: i32,
    /// The labeler's short, noun/entity-focused label of the cluster.
    pub cluster_label: String,
    /// The pattern the labeler says the cluster's statements share.
    pub shared_cluster_pattern: String,
    /// The labeler's hypothesis of why statements with such content are retracted.
    pub retraction_hypothesis: String,
}

impl Table for ThemeRow {
    const FILE: &'static str = "themes.csv";
}

/// One row of `relabelled_bags.csv`: of the training bags of one kind that the probe of a
/// (model, domain, layer) saw under Θ, how many Θ labelled differently from Θ0. A kind is
/// relabelled whole or not at all; the baseline's rows have 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelabelledRow {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The probe: `sawmil` or `mass_mean`.
    pub probe: Probe,
    /// The layer (1-based) the probe reads.
    pub layer: usize,
    /// The condition whose labels are counted: Θ0 (all 0) or a perturbation Θ.
    pub condition: String,
    /// Statement kind (`noise` for the Gaussian sequences).
    pub kind: String,
    /// Training bags of this kind the probe's fit saw (sAwMIL: those among the first
    /// `train_bag_limit` of its shuffled training bags; Mass-Mean: all of them).
    pub bags: usize,
    /// Of `bags`, those Θ labels otherwise than Θ0: 0 or `bags`, since a kind moves whole.
    pub relabelled: usize,
}

impl Table for RelabelledRow {
    const FILE: &'static str = "relabelled_bags.csv";
}

/// One entry of `layers.json`: how the veracity layer of a (model, domain) was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerChoice {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The veracity layer, 1-based (a Table A3 layer of the paper is this minus 1).
    pub veracity_layer: usize,
    /// How it was chosen, in words: fixed in the run config, the paper's Table A3 layer, or
    /// the selection criterion with its settings.
    pub criterion: String,
    /// The selection curve (empty when the layer is fixed in the config).
    #[serde(default)]
    pub scores: Vec<LayerScore>,
    /// Per probe whose window of layers around the veracity layer had to be shifted to stay
    /// inside the model: how (empty when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<String>,
}

/// One candidate layer of the veracity-layer selection: how well a baseline sAwMIL probe
/// there separates True from Not True on the calibration statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerScore {
    /// The candidate layer, 1-based.
    pub layer: usize,
    /// Average precision of True against Not True on the calibration statements (the
    /// selection criterion); undefined where the fit was degenerate or no True statement was
    /// scored.
    #[serde(default)]
    pub average_precision: Option<f64>,
    /// Mean average precision over the layers l−2..l+2 that were scored: the veracity layer
    /// maximises it.
    #[serde(default)]
    pub window_average_precision: Option<f64>,
    /// ROC AUC of the same scores, for reference.
    pub auc: Option<f64>,
}

/// `layers.json`: the veracity layer of every (model, domain) of a run.
pub const LAYERS_FILE: &str = "layers.json";

/// `decisions.json`: what a run decided that the tables alone do not say, so the report reads
/// it instead of guessing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    /// Every condition of the run in order (the baseline first), with its display title.
    pub conditions: Vec<ConditionTitle>,
    /// The prompt formats each (model, domain) was prompted in, and why.
    pub formats: Vec<FormatDecision>,
}

/// `decisions.json`: the file [`Decisions`] is written to.
pub const DECISIONS_FILE: &str = "decisions.json";

/// One condition of the run in `decisions.json`: its name in the tables and its display title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionTitle {
    /// The condition's identifier in the tables, e.g. `synthetic_tf`.
    pub name: String,
    /// Its name as printed in figures, e.g. `Synthetic (TF)`.
    pub title: String,
    /// The conditions this one is compared with in `comparisons.csv` (the condition set's
    /// `compare_with`).
    #[serde(default)]
    pub compare_with: Vec<String>,
}

/// The prompt formats of one (model, domain) in `decisions.json`, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormatDecision {
    /// The model's name: its registry name, or its GGUF file's stem.
    pub model: String,
    /// The domain: `city_locations`, `med_indications` or `word_definitions`.
    pub domain: String,
    /// The formats prompted, the main one first.
    pub formats: Vec<PromptFormat>,
    /// Why, in words (for a chat model under `auto`: how many held-out True statements its
    /// chat-format baseline judges True).
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_table, write_table};

    fn row(condition: &str, retractions: usize) -> StabilityRow {
        StabilityRow {
            model: "m".into(),
            domain: "city_locations".into(),
            instantiation: Instantiation::Representational,
            probe: Probe::Sawmil,
            layer: Some(15),
            condition: condition.into(),
            retractions,
            n_baseline_true: 2,
            retraction_rate: Some(retractions as f64 / 2.0),
            ..StabilityRow::default()
        }
    }

    #[test]
    fn stability_csv_has_the_paper_columns_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        write_table::<StabilityRow>(dir.path(), &[]).unwrap();
        let text = std::fs::read_to_string(dir.path().join("stability.csv")).unwrap();
        assert_eq!(text.trim_end(), STABILITY_COLUMNS.join(","));
        let rows = vec![row("noise", 1), row("fictional", 0)];
        write_table(dir.path(), &rows).unwrap();
        let text = std::fs::read_to_string(dir.path().join("stability.csv")).unwrap();
        assert_eq!(text.lines().next().unwrap(), STABILITY_COLUMNS.join(","));
        assert!(
            text.contains(",,,15,noise,,2,0,1,0,0.5,,,,,,,,,,,,,\n"),
            "{text}"
        );
        assert_eq!(read_table::<StabilityRow>(dir.path()).unwrap(), rows);
    }

    #[test]
    fn an_empty_optional_table_is_no_file_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answers.csv");
        std::fs::write(&path, "stale").unwrap();
        write_table::<AnswerRow>(dir.path(), &[]).unwrap();
        assert!(!path.exists());
        std::fs::write(
            dir.path().join("clusters.csv"),
            "model,domain,statement_id,cluster\nm,d,s1,0\nm,d,s2,x\n",
        )
        .unwrap();
        let err = read_table::<ClusterRow>(dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("clusters.csv, line 3"), "{err}");
    }
}
