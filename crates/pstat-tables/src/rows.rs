//! One type per table. Columns that do not apply, and undefined values, are empty cells,
//! which pandas reads as NaN.

use crate::keys::{Baseline, Instantiation, Probe, PromptFormat};
use crate::{Table, key_of};
use serde::{Deserialize, Serialize};

/// One row of `stability.csv`: ρ_R and ρ_E of one perturbation against its baseline, per
/// (model, domain, instantiation, probe, k, baseline, format, layer, condition, resample).
/// `Default` is an empty row (no rates) for building rows field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    pub model: String,
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    /// The behavioral baseline context.
    pub baseline: Option<Baseline>,
    /// The behavioral prompt format.
    pub format: Option<PromptFormat>,
    pub layer: Option<usize>,
    pub condition: String,
    /// Index of the context draw (behavioral resamples), or `shuffle` controls; for
    /// representational rows `refit<i>` (the noise floor's refits) or [`VOLUME_MATCHED`];
    /// empty for the main rows.
    pub resample: Option<String>,
    pub n_baseline_true: usize,
    pub n_baseline_not_true: usize,
    pub retractions: usize,
    pub expansions: usize,
    pub retraction_rate: Option<f64>,
    pub retraction_rate_lo: Option<f64>,
    pub retraction_rate_hi: Option<f64>,
    pub expansion_rate: Option<f64>,
    pub expansion_rate_lo: Option<f64>,
    pub expansion_rate_hi: Option<f64>,
    /// `small_baseline` when the baseline holds too few True beliefs for a meaningful rate.
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
    /// Representational perturbation rows at the veracity layer: the largest ρ_R of the
    /// noise floor's refits ([`BASELINE_REFIT`] rows) of the same probe unit.
    #[serde(default)]
    pub floor_retraction_rate: Option<f64>,
    /// `retraction_rate` above `floor_retraction_rate`: Θ retracts more than any refit with
    /// unchanged labels did. Empty where there is no floor.
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

/// The identifying columns of a [`StabilityRow`], apart from the measured values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RowKey {
    pub model: String,
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    pub layer: Option<usize>,
    pub condition: String,
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

pub(crate) fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or(String::new(), T::to_string)
}

impl Table for StabilityRow {
    const FILE: &'static str = "stability.csv";
    const EMPTY_HEADER: Option<&'static [&'static str]> = Some(&STABILITY_COLUMNS);
    fn key(&self) -> String {
        key_of(&[
            &self.model,
            &self.domain,
            self.instantiation.as_str(),
            self.probe.as_str(),
            &opt(&self.k),
            &opt(&self.baseline),
            &opt(&self.format),
            &opt(&self.layer),
            &self.condition,
            &opt(&self.resample),
        ])
    }
}

/// One row of `comparisons.csv`: a paired comparison ρ_R(Θa) − ρ_R(Θb) of two perturbations of
/// one (model, domain, instantiation, probe, k, baseline, format, layer), measured on the same
/// baseline-True statements: McNemar's exact test on the statements only one of the two
/// retracts, a bootstrap interval of the difference, and Holm's correction within the row's
/// family (the same comparison of the same instantiation and probe across the run's cells).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    pub model: String,
    pub domain: String,
    pub instantiation: Instantiation,
    pub probe: Probe,
    pub k: Option<usize>,
    pub baseline: Option<Baseline>,
    pub format: Option<PromptFormat>,
    pub layer: Option<usize>,
    pub condition_a: String,
    pub condition_b: String,
    /// `main`, or [`VOLUME_MATCHED`]: both Θ relabelled the same number of training bags.
    pub variant: String,
    pub n_baseline_true: usize,
    pub retraction_rate_a: f64,
    pub retraction_rate_b: f64,
    /// ρ_R(Θa) − ρ_R(Θb).
    pub difference: f64,
    /// 95% percentile bootstrap interval of the difference (statements resampled in pairs).
    pub difference_lo: f64,
    pub difference_hi: f64,
    /// Baseline-True statements retracted under Θa but not Θb, and under Θb but not Θa: the
    /// discordant pairs McNemar's test reads.
    pub a_only: usize,
    pub b_only: usize,
    /// The test behind `p_value`: `mcnemar_exact` (two-sided binomial on the discordant pairs).
    pub test: String,
    /// Two-sided p-value of `test` (uncorrected).
    pub p_value: f64,
    /// The multiple-comparison family: `<instantiation>/<probe>/<condition_a>-vs-<condition_b>/<variant>`.
    pub family: String,
    /// Rows in the family.
    pub family_size: usize,
    /// Holm-adjusted within `family`.
    pub p_holm: f64,
    /// `p_holm` below the stated level (5%).
    pub significant: bool,
    /// Representational rows: the largest minus the smallest ρ_R of the unit's noise-floor
    /// refits, the spread of a difference between two fits with unchanged labels.
    pub floor_difference: Option<f64>,
    /// |difference| above `floor_difference`; empty where there is no floor.
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
    fn key(&self) -> String {
        key_of(&[
            &self.model,
            &self.domain,
            self.instantiation.as_str(),
            self.probe.as_str(),
            &opt(&self.k),
            &opt(&self.baseline),
            &opt(&self.format),
            &opt(&self.layer),
            &self.condition_a,
            &self.condition_b,
            &self.variant,
        ])
    }
}

/// One row of `answers.csv`: the answer distribution of one behavioral unit over the
/// held-out True statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRow {
    pub model: String,
    pub domain: String,
    pub format: PromptFormat,
    pub k: usize,
    pub baseline: Baseline,
    pub condition: String,
    pub draw: String,
    pub n: usize,
    pub a: usize,
    pub b: usize,
    pub c: usize,
    pub mean_leftover: f64,
    /// `small_baseline` on the baseline row when too few statements are judged True:
    /// retraction rates against it mean little.
    pub flag: Option<String>,
}

impl Table for AnswerRow {
    const FILE: &'static str = "answers.csv";
    fn key(&self) -> String {
        key_of(&[
            &self.model,
            &self.domain,
            self.format.as_str(),
            &self.k.to_string(),
            self.baseline.as_str(),
            &self.condition,
            &self.draw,
        ])
    }
}

/// One row of `resamples.csv`: ρ_R and ρ_E of a condition over its main context draw and
/// resamples, and the order-shuffle control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResampleRow {
    pub model: String,
    pub domain: String,
    pub format: PromptFormat,
    pub k: usize,
    pub baseline: Baseline,
    pub condition: String,
    /// Draws summarised: the main one and every resample.
    pub n_draws: usize,
    pub retraction_rate_mean: Option<f64>,
    /// Sample standard deviation over draws (n − 1 denominator).
    pub retraction_rate_sd: Option<f64>,
    pub retraction_rate_min: Option<f64>,
    pub retraction_rate_max: Option<f64>,
    pub expansion_rate_mean: Option<f64>,
    pub expansion_rate_sd: Option<f64>,
    /// ρ_R with the main draw's statements in a permuted order.
    pub shuffle_retraction_rate: Option<f64>,
    /// Share of held-out statements whose judgment differs between the main draw and its
    /// shuffled order: the noise floor of the judgment itself.
    pub shuffle_flip_rate: Option<f64>,
}

impl Table for ResampleRow {
    const FILE: &'static str = "resamples.csv";
    fn key(&self) -> String {
        key_of(&[
            &self.model,
            &self.domain,
            self.format.as_str(),
            &self.k.to_string(),
            self.baseline.as_str(),
            &self.condition,
        ])
    }
}

/// One row of `familiarity.csv`: mean object-token probability per (model, domain, kind)
/// with a bootstrap 95% interval (Tables A6–A8, Fig. 2e).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamiliarityRow {
    pub model: String,
    pub domain: String,
    pub kind: String,
    pub n: usize,
    pub mean_object_token_prob: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Table for FamiliarityRow {
    const FILE: &'static str = "familiarity.csv";
    fn key(&self) -> String {
        key_of(&[&self.model, &self.domain, &self.kind])
    }
}

/// One row of `distances.csv`: mean within-kind Euclidean distance of standardized
/// last-token representations at `layer`, with a bootstrap 95% interval (Fig. 2d).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistanceRow {
    pub model: String,
    pub domain: String,
    pub kind: String,
    pub layer: usize,
    pub n_pairs: usize,
    pub mean_distance: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Table for DistanceRow {
    const FILE: &'static str = "distances.csv";
    fn key(&self) -> String {
        key_of(&[&self.model, &self.domain, &self.kind])
    }
}

/// One point of `bigram_rank_frequency.csv`: the character-bigram rank–frequency curve of a
/// domain × kind (Fig. 2 a–c).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BigramRankRow {
    pub domain: String,
    pub kind: String,
    /// 1 = most frequent bigram; ties broken alphabetically so the curve is reproducible.
    pub rank: usize,
    pub bigram: String,
    pub count: u64,
    /// count / all bigrams of this domain × kind.
    pub frequency: f64,
}

impl Table for BigramRankRow {
    const FILE: &'static str = "bigram_rank_frequency.csv";
    fn key(&self) -> String {
        key_of(&[&self.domain, &self.kind, &self.rank.to_string()])
    }
}

/// One row of `bigram_distances.csv`: the Jensen–Shannon distance between two kinds' bigram
/// distributions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BigramDistanceRow {
    pub domain: String,
    pub kind_a: String,
    pub kind_b: String,
    pub js_distance: f64,
}

impl Table for BigramDistanceRow {
    const FILE: &'static str = "bigram_distances.csv";
    fn key(&self) -> String {
        key_of(&[&self.domain, &self.kind_a, &self.kind_b])
    }
}

/// One row of `clusters.csv`: the cluster of a retracted statement (−1 = noise), and which
/// main configurations retracted it (Appendix I: sAwMIL at the veracity layer, the prompt at
/// the main K, empty baseline and main format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterRow {
    pub model: String,
    pub domain: String,
    pub statement_id: String,
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
    fn key(&self) -> String {
        key_of(&[&self.model, &self.domain, &self.statement_id])
    }
}

/// One row of `themes.csv`: the labeler's answer for one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThemeRow {
    pub model: String,
    pub domain: String,
    pub cluster: i32,
    pub cluster_label: String,
    pub shared_cluster_pattern: String,
    pub retraction_hypothesis: String,
}

impl Table for ThemeRow {
    const FILE: &'static str = "themes.csv";
    fn key(&self) -> String {
        key_of(&[&self.model, &self.domain, &self.cluster.to_string()])
    }
}

/// One row of `relabelled_bags.csv`: of the training bags of one kind that the probe of a
/// (model, domain, layer) saw under Θ, how many Θ labelled differently from Θ0. A kind is
/// relabelled whole or not at all; the baseline's rows have 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelabelledRow {
    pub model: String,
    pub domain: String,
    pub probe: Probe,
    pub layer: usize,
    pub condition: String,
    /// Statement kind (`noise` for the Gaussian sequences).
    pub kind: String,
    pub bags: usize,
    pub relabelled: usize,
}

impl Table for RelabelledRow {
    const FILE: &'static str = "relabelled_bags.csv";
    fn key(&self) -> String {
        key_of(&[
            &self.model,
            &self.domain,
            self.probe.as_str(),
            &self.layer.to_string(),
            &self.condition,
            &self.kind,
        ])
    }
}

/// One entry of `layers.json`: how the veracity layer of a (model, domain) was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerChoice {
    pub model: String,
    pub domain: String,
    pub veracity_layer: usize,
    pub criterion: String,
    /// The selection curve (empty when the layer is fixed in the config).
    #[serde(default)]
    pub scores: Vec<LayerScore>,
    /// Per probe whose window of layers around the veracity layer had to be shifted to stay
    /// inside the model: how (empty when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerScore {
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

pub const DECISIONS_FILE: &str = "decisions.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionTitle {
    pub name: String,
    pub title: String,
    /// The conditions this one is compared with in `comparisons.csv` (the condition set's
    /// `compare_with`).
    #[serde(default)]
    pub compare_with: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormatDecision {
    pub model: String,
    pub domain: String,
    pub formats: Vec<PromptFormat>,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_table, upsert, write_table};

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
    fn upsert_replaces_rows_with_the_same_key_in_place() {
        let mut rows = vec![row("noise", 0), row("fictional", 0)];
        upsert(&mut rows, [row("noise", 1), row("synthetic_tf", 0)]);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].retractions, 1);
        assert_eq!(rows[2].condition, "synthetic_tf");
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
