//! The run config (TOML). Its defaults are the paper's protocol on the embedded models; every
//! random choice of a run is derived from `seed`, and the config's hash is recorded in every
//! artifact's manifest.

use anyhow::{Context, bail};
use pstat_data::condition::Condition;
use pstat_data::{ConditionSet, Domain, SplitConfig};
use pstat_http::HttpOptions;
use pstat_lm::paper::LayerWindow;
use pstat_probe::{MassMeanParams, ProbeParams, SawMilParams};
use pstat_prompt::Protocol;
use pstat_prompt::server::{LogprobRequest, ServerConfig};
use pstat_stability::Bootstrap;
use pstat_tables::{Baseline, Probe, PromptFormat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A run's config (`config.toml` of the run folder; docs/run-config.md): the models, the
/// domains, the splits and what each stage does. Same config, same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Master seed: splits, context draws, capping, CV folds, noise and bootstraps derive from it.
    pub seed: u64,
    /// Registry names (`smollm2-135m-instruct`, `gemma-3-270m`) or paths to GGUF files.
    pub models: Vec<String>,
    /// The domains studied.
    pub domains: Vec<Domain>,
    /// Optional data folder laid out like the repo's `data/` (default: bundled data).
    pub data: Option<String>,
    /// The shares of the exclusive splits.
    pub splits: SplitShares,
    /// At most this many held-out True test statements per domain (None = all). `--quick`
    /// subsamples; the paper uses all.
    pub test_limit: Option<usize>,
    /// At most this many training statements per domain, a seeded sample stratified by kind
    /// (None = the whole training split, as the paper). `--quick` subsamples.
    pub train_limit: Option<usize>,
    /// `[representational]`: probes on hidden states.
    pub representational: Representational,
    /// `[behavioral]`: belief-context prompts.
    pub behavioral: Behavioral,
    /// `[contextual]`: the baseline probes on hidden states after each Θ's belief context
    /// (beyond the paper). Written to the config (and so to its hash) only when changed, so
    /// run folders made before the stage existed continue with it.
    #[serde(skip_serializing_if = "is_default")]
    pub contextual: Contextual,
    /// `[familiarity]`: object-token probabilities and distances.
    pub familiarity: Familiarity,
    /// `[clustering]`: the retraction clustering.
    pub clustering: Clustering,
    /// Conditions added to Table 2's six, in the same form as the built-in ones.
    pub condition: Vec<Condition>,
    /// Bootstrap resamples for every interval.
    pub bootstrap_resamples: usize,
    /// The behavioral protocol: `paper` (the printed prompt, the default) or `authors` (the
    /// authors' released code: its prompt text, system turn and prefill, contexts in file
    /// order, a second BOS on chat prompts; docs/run-config.md). Another protocol is another
    /// study: the key enters the config hash, and is left out of it when `paper` so the hash
    /// of a config without it is unchanged.
    #[serde(skip_serializing_if = "Protocol::is_paper")]
    pub protocol: Protocol,
    /// How the models' products are computed: `f32` (the default, exact) or `q8` (activations
    /// quantized to 8 bits per block, integer kernels; docs/BENCHMARKS.md). Written to the
    /// config (and so to its hash) only when not the default: another precision is another
    /// study.
    #[serde(skip_serializing_if = "is_default")]
    pub precision: pstat_lm::Precision,
}

/// `[splits]`: the shares of each domain's exclusive splits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SplitShares {
    /// Share of each domain's statements held out for testing.
    pub test: f64,
    /// Share kept for calibration (the rest trains).
    pub calibration: f64,
}

/// `[representational]`: the probes, their layers and parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Representational {
    /// Whether the stage runs.
    pub enabled: bool,
    /// `sawmil` and/or `mass_mean`.
    pub probes: Vec<Probe>,
    /// Offsets from the veracity layer (Appendix F uses −2..=2).
    pub layer_offsets: Vec<i64>,
    /// Offsets evaluated for the Mass-Mean probe (the paper reports it at the veracity layer;
    /// the default adds l±2 as for sAwMIL, since a Mass-Mean fit costs milliseconds).
    pub mass_mean_layer_offsets: Vec<i64>,
    /// Fix the veracity layer instead of selecting it on the calibration split.
    pub veracity_layer: Option<usize>,
    /// sAwMIL's C. None = chosen by 3-fold CV over [0.05, 0.1, 0.5, 1, 10] with the one-SE
    /// rule for every fit (the paper); a value skips the search (`--quick` uses 1).
    pub sawmil_c: Option<f64>,
    /// Training statements (stratified by kind) on which the veracity-layer selection fits its
    /// baseline sAwMIL probe at every candidate layer.
    pub selection_statements: usize,
    /// Calibration statements on which the selection scores each layer; None = the whole
    /// calibration split (the paper's protocol). `--quick` samples 300.
    pub selection_calibration: Option<usize>,
    /// Refits of each probe with unchanged labels at the veracity layer: the representational
    /// noise floor every Θ effect is read against (sAwMIL: other seeded shuffles, caps and
    /// Noise draws of its training bags; Mass-Mean: bootstrap resamples of its training bags).
    /// Each sAwMIL refit costs one fit at the unit's C; 0 = no floor.
    pub noise_floor_refits: usize,
    /// A folder of activations computed elsewhere (docs/activations.md): the stage reads and
    /// checks them instead of running the model for them. None = the cache, extracted by the
    /// embedded runtime on a miss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activations: Option<String>,
}

impl Representational {
    /// The fit parameters of `probe` under this config.
    pub fn probe_params(&self, probe: Probe, seed: u64) -> Box<dyn ProbeParams> {
        match probe {
            Probe::Sawmil => Box::new(self.sawmil_params(seed)),
            Probe::MassMean | Probe::Prompt => Box::new(MassMeanParams::default()),
        }
    }

    /// Layer offsets from text: a range `-2..2` → [-2, -1, 0, 1, 2] or a list `0,2` → [0, 2].
    pub fn parse_offsets(text: &str) -> anyhow::Result<Vec<i64>> {
        let bad = || {
            anyhow::anyhow!(
                "layer offsets `{text}`: expected a range like -2..2 or a list like 0,1"
            )
        };
        let number = |t: &str| t.trim().parse::<i64>().map_err(|_| bad());
        if let Some((a, b)) = text.split_once("..") {
            let (a, b) = (number(a)?, number(b)?);
            if a > b {
                return Err(bad());
            }
            return Ok((a..=b).collect());
        }
        text.split(',').map(number).collect()
    }

    /// The layer offsets from the veracity layer at which `probe` is retrained.
    pub fn offsets(&self, probe: Probe) -> &[i64] {
        match probe {
            Probe::MassMean => &self.mass_mean_layer_offsets,
            Probe::Sawmil | Probe::Prompt => &self.layer_offsets,
        }
    }

    /// The layers `probe` is retrained at around `veracity`: its configured offsets, the window
    /// shifted inside 1..=n_layers where it would leave the model ([`LayerWindow`]).
    pub fn window(
        &self,
        probe: Probe,
        veracity: usize,
        n_layers: usize,
        model: &str,
    ) -> anyhow::Result<LayerWindow> {
        LayerWindow::new(veracity, self.offsets(probe), n_layers)
            .map_err(|e| anyhow::anyhow!("{model}: {probe} layers: {e}"))
    }

    pub(crate) fn sawmil_params(&self, seed: u64) -> SawMilParams {
        SawMilParams {
            c: self.sawmil_c,
            seed,
            ..SawMilParams::default()
        }
    }
}

/// `[behavioral]`: context sizes, baselines, formats, draws and the scoring backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Behavioral {
    /// Whether the stage runs.
    pub enabled: bool,
    /// Context sizes; the paper's main result uses 100, Appendix G adds 20 and 50.
    pub k: Vec<usize>,
    /// `empty` (the paper's Θ0) and/or `true` (K True training statements; Appendix G).
    pub baselines: Vec<Baseline>,
    /// `["chat"]`, `["plain"]` or both (chat applies to chat models only), or `["auto"]`.
    pub formats: Formats,
    /// Extra independent context draws per Θ (beyond the paper's single draw).
    pub resamples: usize,
    /// Also score draw 0's statements in a permuted order (noise floor of the judgment).
    pub shuffle_control: bool,
    /// When a condition has fewer than K training statements, use them all, record it in the
    /// unit's context file and flag the row (`short_context` in stability.csv); off (the
    /// default), a short context is an error before anything is scored. The stratified split
    /// gives every paper condition at least 100 training statements in every domain.
    pub allow_fewer: bool,
    /// Score on an OpenAI-compatible completions server instead of in-process.
    pub backend: Option<String>,
    /// A server per model (keyed by the model's name in the tables: the registry name, or
    /// a GGUF file's or folder's stem), e.g. one vLLM per model on a cluster; a model not
    /// listed uses `backend`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub backends: BTreeMap<String, String>,
    /// The model asked of every server (default: the server's only model, from
    /// `GET /v1/models`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_model: Option<String>,
    /// Requests in flight at once on each server.
    #[serde(skip_serializing_if = "is_default_concurrency")]
    pub concurrency: usize,
    /// How the option tokens' log-probabilities are asked of every server: `top_n` (the
    /// next token's top-n; vLLM needs `--max-logprobs` above the options' ranks) or `prompt`
    /// (vLLM's `prompt_logprobs` on the prompt plus each option token: any rank, no flag).
    #[serde(skip_serializing_if = "is_default")]
    pub backend_logprobs: LogprobRequest,
    /// Per-request timeout, retries and the API key's variable of the server client.
    #[serde(skip_serializing_if = "is_default")]
    pub http: HttpOptions,
}

impl Behavioral {
    /// The server that scores `model` (its name in the tables), if any.
    pub fn backend_for(&self, model: &str) -> Option<&str> {
        self.backends
            .get(model)
            .or(self.backend.as_ref())
            .map(String::as_str)
    }

    /// The server backend's settings for `url` (its prompt input and top-n stay the
    /// backend's defaults).
    pub fn server_config(&self, url: &str) -> ServerConfig {
        ServerConfig {
            model: self.backend_model.clone(),
            concurrency: self.concurrency,
            logprobs: self.backend_logprobs,
            http: self.http.clone(),
            ..ServerConfig::new(url)
        }
    }

    /// The server settings' checks, naming the field; every listed server URL included.
    fn validate_server(&self) -> anyhow::Result<()> {
        if self.concurrency == 0 {
            bail!("behavioral.concurrency must be at least 1");
        }
        self.http.validate().context("behavioral.http")?;
        if self.backend_model.as_deref() == Some("") {
            bail!(
                "behavioral.backend_model is empty (leave it out to use the server's only model)"
            );
        }
        let urls = self
            .backend
            .iter()
            .map(|u| ("behavioral.backend".to_string(), u));
        let per_model = self
            .backends
            .iter()
            .map(|(m, u)| (format!("behavioral.backends.{m}"), u));
        for (field, url) in urls.chain(per_model) {
            self.server_config(url).validate().context(field)?;
        }
        Ok(())
    }
}

/// Serialized only when changed, so configs that leave the server settings alone keep their
/// `config.toml` and hash.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn is_default_concurrency(concurrency: &usize) -> bool {
    *concurrency == ServerConfig::default().concurrency
}

/// `[contextual]`: the third instantiation (beyond the paper). The held-out True statements
/// are read after the behavioral stage's belief contexts (its K values, baselines and main
/// draws) and judged by the representational stage's baseline probes at their layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Contextual {
    /// Whether the stage runs (where the representational and behavioral stages do: it reads
    /// the probes of one and the contexts of the other).
    pub enabled: bool,
    /// A folder of the statements' hidden states after each context, computed elsewhere
    /// (docs/activations.md, `<model>/<domain>/contextual/<context>/layer_LL.safetensors`):
    /// the stage reads and checks them instead of running the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activations: Option<String>,
}

impl Default for Contextual {
    fn default() -> Self {
        Contextual {
            enabled: true,
            activations: None,
        }
    }
}

/// `[familiarity]`: the samples of the familiarity analyses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Familiarity {
    /// Whether the stage runs.
    pub enabled: bool,
    /// Pairs sampled per kind for the within-group distance (Fig. 2d).
    pub distance_pairs: usize,
    /// Statements per kind (all splits, seeded sample) whose object-token probabilities are
    /// computed (Fig. 2e, Tables A6–A8).
    pub statements_per_kind: usize,
}

/// `[clustering]`: the retraction clustering and its labeler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Clustering {
    /// Whether the stage runs.
    pub enabled: bool,
    /// OpenAI-compatible chat endpoint that names the clusters (optional).
    pub labeler: Option<String>,
    /// Per-request timeout, retries and the API key's variable of the labeler's client
    /// (`[clustering.http]`, as `[behavioral.http]` for the scoring server).
    #[serde(skip_serializing_if = "is_default")]
    pub http: HttpOptions,
}

/// `behavioral.formats`: the prompt formats to run, or `auto`. In TOML a list of strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Formats {
    /// Chat for chat models (the paper, Section 4.4.2), plain for base models; a chat model
    /// whose chat-format empty baseline holds fewer than 20 True beliefs in a domain is
    /// prompted plain there instead, since nothing can be retracted from an empty belief set
    /// (SmolLM2-135M answers "c" to every chat-formatted baseline question).
    Auto,
    /// These formats, the main one first (less chat for a model without a chat template).
    Listed(Vec<PromptFormat>),
}

/// The prompt formats of a cell, as [`Formats::rule`] decides them before any prompt is scored.
#[derive(Debug, Clone, PartialEq)]
pub enum FormatRule {
    /// These formats, for this reason (recorded in `decisions.json`).
    Fixed {
        /// The formats, the main one first.
        formats: Vec<PromptFormat>,
        /// Why, in words.
        reason: &'static str,
    },
    /// `auto` on a chat model: its chat-format empty baseline at the main K decides
    /// ([`PromptFormat::auto`]).
    ChatBaselineDecides,
}

impl Formats {
    /// The one rule for which formats a model is prompted in, read by the behavioral stage,
    /// the plan and the shards: listed formats less chat where the model has no chat template
    /// (plain where nothing is left), and under `auto` plain for a base model, the chat
    /// baseline's decision for a chat model.
    pub fn rule(&self, chat_template: bool) -> FormatRule {
        match self {
            Formats::Listed(listed) => {
                let usable: Vec<PromptFormat> = listed
                    .iter()
                    .copied()
                    .filter(|f| *f == PromptFormat::Plain || chat_template)
                    .collect();
                // A base model asked only for chat still gets its plain prompt.
                if usable.is_empty() {
                    FormatRule::Fixed {
                        formats: vec![PromptFormat::Plain],
                        reason: "listed chat only, but the model has no chat template",
                    }
                } else {
                    FormatRule::Fixed {
                        formats: usable,
                        reason: "listed in behavioral.formats",
                    }
                }
            }
            Formats::Auto if !chat_template => FormatRule::Fixed {
                formats: vec![PromptFormat::Plain],
                reason: "auto: the model has no chat template",
            },
            Formats::Auto => FormatRule::ChatBaselineDecides,
        }
    }

    /// Every format a model may be prompted in whatever its template and its baseline: the
    /// [`Formats::rule`] of a chat model and of a base model together, plain first.
    pub fn possible(&self) -> Vec<PromptFormat> {
        let mut formats = Vec::new();
        for chat_template in [true, false] {
            match self.rule(chat_template) {
                FormatRule::Fixed { formats: f, .. } => formats.extend(f),
                FormatRule::ChatBaselineDecides => {
                    formats.extend([PromptFormat::Chat, PromptFormat::Plain])
                }
            }
        }
        [PromptFormat::Plain, PromptFormat::Chat]
            .into_iter()
            .filter(|f| formats.contains(f))
            .collect()
    }
}

/// The `behavioral.formats` entry that asks for [`Formats::Auto`].
const AUTO: &str = "auto";

impl Serialize for Formats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Formats::Auto => [AUTO].serialize(s),
            Formats::Listed(formats) => formats.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Formats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let names = Vec::<String>::deserialize(d)?;
        if names.iter().any(|f| f == AUTO) {
            if names.len() > 1 {
                return Err(D::Error::custom(
                    "`auto` chooses the format itself and stands alone",
                ));
            }
            return Ok(Formats::Auto);
        }
        names
            .iter()
            .map(|f| {
                f.parse::<PromptFormat>().map_err(|_| {
                    D::Error::custom(format!(
                        "unknown prompt format `{f}` (expected chat, plain or {AUTO})"
                    ))
                })
            })
            .collect::<Result<_, _>>()
            .map(Formats::Listed)
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            seed: 42,
            models: vec!["smollm2-135m-instruct".into(), "gemma-3-270m".into()],
            domains: Domain::ALL.to_vec(),
            data: None,
            splits: SplitShares::default(),
            test_limit: None,
            train_limit: None,
            representational: Representational::default(),
            behavioral: Behavioral::default(),
            contextual: Contextual::default(),
            familiarity: Familiarity::default(),
            clustering: Clustering::default(),
            condition: Vec::new(),
            bootstrap_resamples: 1000,
            protocol: Protocol::Paper,
            precision: pstat_lm::Precision::F32,
        }
    }
}

impl Default for SplitShares {
    fn default() -> Self {
        let d = SplitConfig::default();
        SplitShares {
            test: d.test,
            calibration: d.calibration,
        }
    }
}

impl Default for Representational {
    fn default() -> Self {
        Representational {
            enabled: true,
            probes: vec![Probe::Sawmil, Probe::MassMean],
            layer_offsets: vec![-2, -1, 0, 1, 2],
            mass_mean_layer_offsets: vec![-2, -1, 0, 1, 2],
            veracity_layer: None,
            sawmil_c: None,
            selection_statements: 500,
            selection_calibration: None,
            noise_floor_refits: 5,
            activations: None,
        }
    }
}

impl Default for Behavioral {
    fn default() -> Self {
        Behavioral {
            enabled: true,
            k: vec![100],
            baselines: vec![Baseline::Empty, Baseline::True],
            formats: Formats::Auto,
            resamples: 0,
            shuffle_control: false,
            allow_fewer: false,
            backend: None,
            backends: BTreeMap::new(),
            backend_model: None,
            concurrency: ServerConfig::default().concurrency,
            backend_logprobs: LogprobRequest::TopN,
            http: HttpOptions::default(),
        }
    }
}

impl Default for Familiarity {
    fn default() -> Self {
        Familiarity {
            enabled: true,
            distance_pairs: 5000,
            statements_per_kind: 200,
        }
    }
}

impl Default for Clustering {
    fn default() -> Self {
        Clustering {
            enabled: true,
            labeler: None,
            http: HttpOptions::default(),
        }
    }
}

impl RunConfig {
    /// The config in the TOML file `path`, with errors naming the file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: RunConfig = toml::from_str(&text).map_err(|e| {
            // One line naming the line of the file, not toml's multi-line excerpt, and ending
            // with that line's text, which names the setting a type error leaves out.
            let (line, shown) = e
                .span()
                .map(|s| {
                    let n = text[..s.start].matches('\n').count();
                    let shown = text.lines().nth(n).unwrap_or_default().trim();
                    (format!(", line {}", n + 1), format!(" (`{shown}`)"))
                })
                .unwrap_or_default();
            anyhow::anyhow!(
                "{}{line}: invalid run config: {}{shown}",
                path.display(),
                e.message().trim()
            )
        })?;
        config
            .validate()
            .with_context(|| format!("{}", path.display()))?;
        Ok(config)
    }

    /// The base of a stage command's preset: this config (`None`: the paper's defaults) for
    /// one model and domain with every stage off; the command turns its own stage on.
    pub fn stage_preset(file: Option<&Path>, model: &str, domain: Domain) -> anyhow::Result<Self> {
        let mut c = match file {
            Some(path) => RunConfig::from_file(path)?,
            None => RunConfig::default(),
        };
        c.models = vec![model.to_string()];
        c.domains = vec![domain];
        c.representational.enabled = false;
        c.behavioral.enabled = false;
        c.contextual.enabled = false;
        c.familiarity.enabled = false;
        c.clustering.enabled = false;
        Ok(c)
    }

    /// The documented `--quick` preset: the first model only, 600 training statements and 100
    /// held-out True statements per domain, K = 20, the veracity layer only, sAwMIL with
    /// C = 1 (no CV search) and Mass-Mean (seconds), the empty baseline and the plain prompt
    /// format.
    pub fn quick(mut self) -> Self {
        self.models.truncate(1);
        self.test_limit = Some(100);
        self.train_limit = Some(600);
        self.representational.selection_statements = 300;
        self.representational.selection_calibration = Some(300);
        // Upstream's default C, as the layer selection's probes. At C = 0.1 the 600 training
        // statements did not determine sAwMIL's direction: refits with unchanged labels had
        // weight vectors at cosine 0.0–0.6 to the baseline's and disagreed on up to half of its
        // beliefs (docs/deviations.md).
        self.representational.sawmil_c = Some(1.0);
        self.behavioral.k = vec![20];
        self.behavioral.baselines = vec![Baseline::Empty];
        // SmolLM2-135M answers "c" to every chat-formatted baseline question (|B_true| = 0), so
        // the quick look uses the plain prompt, where its baseline believes most True statements.
        self.behavioral.formats = Formats::Listed(vec![PromptFormat::Plain]);
        self.representational.layer_offsets = vec![0];
        self.representational.probes = vec![Probe::Sawmil, Probe::MassMean];
        self.representational.mass_mean_layer_offsets = vec![0];
        self.bootstrap_resamples = 200;
        self.familiarity.distance_pairs = 1000;
        self.familiarity.statements_per_kind = 30;
        self
    }

    /// Every check a run needs before it loads a model, so a bad value fails at once with the
    /// field's name instead of after hours of work.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.models.is_empty() {
            bail!("`models` is empty");
        }
        if self.domains.is_empty() {
            bail!("`domains` is empty");
        }
        if let Some(model) = first_duplicate(&self.models) {
            bail!("`models` lists `{model}` twice");
        }
        if let Some(domain) = first_duplicate(&self.domains) {
            bail!("`domains` lists `{domain}` twice");
        }
        self.validate_no_repeats()?;
        for (field, limit) in [
            ("test_limit", self.test_limit),
            ("train_limit", self.train_limit),
            (
                "representational.selection_statements",
                Some(self.representational.selection_statements),
            ),
            (
                "representational.selection_calibration",
                self.representational.selection_calibration,
            ),
            (
                "representational.veracity_layer",
                self.representational.veracity_layer,
            ),
        ] {
            if limit == Some(0) {
                bail!("`{field}` must be at least 1");
            }
        }
        self.representational
            .sawmil_params(self.seed)
            .validate()
            .context("representational.sawmil_c")?;
        Bootstrap {
            resamples: self.bootstrap_resamples,
            seed: self.seed,
        }
        .validate()?;
        self.split_config().validate().context("[splits]")?;
        if self.representational.noise_floor_refits == 1 {
            bail!(
                "representational.noise_floor_refits = 1: the floor's spread needs at least 2 refits (0 = no floor)"
            );
        }
        if self.representational.probes.contains(&Probe::Prompt) {
            bail!(
                "representational.probes: `prompt` is the behavioral judgment (expected sawmil or mass_mean)"
            );
        }
        if let Some(dir) = &self.data
            && !Path::new(dir).is_dir()
        {
            bail!("data: {dir:?} is not a folder (one laid out like the repository's data/)");
        }
        self.validate_enabled_stages_have_work()?;
        if let Some(url) = &self.clustering.labeler
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("clustering.labeler: {url:?} should start with http:// or https://");
        }
        if let Some(dir) = &self.representational.activations
            && !Path::new(dir).is_dir()
        {
            bail!("representational.activations: {dir:?} is not a folder");
        }
        if let Some(dir) = &self.contextual.activations
            && !Path::new(dir).is_dir()
        {
            bail!("contextual.activations: {dir:?} is not a folder");
        }
        if self.behavioral.formats == Formats::Listed(Vec::new()) {
            bail!("behavioral.formats is empty");
        }
        if let Some(model) = self.behavioral.backends.keys().find(|m| {
            !self
                .models
                .iter()
                .any(|listed| crate::model::display_name(listed) == **m)
        }) {
            bail!("behavioral.backends: `{model}` is not one of `models`");
        }
        if self.behavioral.k.contains(&0) {
            bail!("behavioral.k: context sizes must be positive");
        }
        self.behavioral.validate_server()?;
        self.clustering.http.validate().context("clustering.http")?;
        self.conditions()?;
        self.validate_paper_layers()?;
        // Every model, not only the first: a path that is not there would otherwise fail only
        // after the models before it had run their whole study. (A Table A3 short name passes:
        // its layers are checked above; where its weights live is the machine's business.)
        if let Some(model) = self.models.iter().find(|m| {
            pstat_lm::registry::find(m).is_none()
                && pstat_lm::paper::by_short_name(m).is_none()
                && !Path::new(m.as_str()).exists()
        }) {
            bail!(
                "`models`: {}",
                pstat_lm::registry::RegistryError::Unknown(model.clone())
            );
        }
        Ok(())
    }

    /// An enabled stage given nothing to compute would leave its tables out without a word;
    /// `enabled = false` is the way to leave a stage out.
    fn validate_enabled_stages_have_work(&self) -> anyhow::Result<()> {
        let rep = &self.representational;
        let beh = &self.behavioral;
        let fam = &self.familiarity;
        let empty = [
            (
                beh.enabled && beh.k.is_empty(),
                "behavioral.k",
                "behavioral",
            ),
            (
                beh.enabled && beh.baselines.is_empty(),
                "behavioral.baselines",
                "behavioral",
            ),
            (
                rep.enabled && rep.probes.contains(&Probe::Sawmil) && rep.layer_offsets.is_empty(),
                "representational.layer_offsets",
                "representational",
            ),
            (
                rep.enabled
                    && rep.probes.contains(&Probe::MassMean)
                    && rep.mass_mean_layer_offsets.is_empty(),
                "representational.mass_mean_layer_offsets",
                "representational",
            ),
            (
                fam.enabled && fam.statements_per_kind == 0,
                "familiarity.statements_per_kind",
                "familiarity",
            ),
            (
                fam.enabled && fam.distance_pairs == 0,
                "familiarity.distance_pairs",
                "familiarity",
            ),
        ];
        if let Some((_, field, stage)) = empty.into_iter().find(|(bad, ..)| *bad) {
            bail!(
                "{field} is empty or 0 while the {stage} stage is enabled (set {stage}.enabled = false to leave it out)"
            );
        }
        Ok(())
    }

    /// Lists whose entries each become rows: a repeated entry would write every row twice and
    /// count it twice in its comparisons' multiple-testing family.
    fn validate_no_repeats(&self) -> anyhow::Result<()> {
        let rep = &self.representational;
        let beh = &self.behavioral;
        let repeated = [
            (
                "representational.probes",
                first_duplicate(&rep.probes).map(|p| p.to_string()),
            ),
            (
                "representational.layer_offsets",
                first_duplicate(&rep.layer_offsets).map(|o| o.to_string()),
            ),
            (
                "representational.mass_mean_layer_offsets",
                first_duplicate(&rep.mass_mean_layer_offsets).map(|o| o.to_string()),
            ),
            (
                "behavioral.k",
                first_duplicate(&beh.k).map(|k| k.to_string()),
            ),
            (
                "behavioral.baselines",
                first_duplicate(&beh.baselines).map(|b| format!("{b:?}").to_lowercase()),
            ),
            (
                "behavioral.formats",
                match &beh.formats {
                    Formats::Listed(formats) => {
                        first_duplicate(formats).map(|f| format!("{f:?}").to_lowercase())
                    }
                    Formats::Auto => None,
                },
            ),
        ];
        for (field, value) in repeated {
            if let Some(value) = value {
                bail!("{field} lists `{value}` twice");
            }
        }
        Ok(())
    }

    /// A Table A3 model named by its short name: every probe's window of layers around its
    /// veracity layer (the authors' block + 1) fits the model, shifted where needed.
    fn validate_paper_layers(&self) -> anyhow::Result<()> {
        let rep = &self.representational;
        for m in self
            .models
            .iter()
            .filter_map(|n| pstat_lm::paper::by_short_name(n))
        {
            for &domain in &self.domains {
                let veracity = rep.veracity_layer.unwrap_or(m.pstat_layer(domain));
                for &probe in &rep.probes {
                    pstat_lm::paper::LayerWindow::new(veracity, rep.offsets(probe), m.n_layers)
                        .map_err(|e| {
                            anyhow::anyhow!("{} {domain}: {probe} layers: {e}", m.short_name)
                        })?;
                }
            }
        }
        Ok(())
    }

    /// Table 2 plus the user's conditions.
    pub fn conditions(&self) -> anyhow::Result<ConditionSet> {
        // The tables' rows of the noise floor name their condition so; a Θ of that name would
        // be read as one of them.
        if let Some(c) = self
            .condition
            .iter()
            .find(|c| c.name == pstat_tables::BASELINE_REFIT)
        {
            bail!(
                "condition `{}`: the name is reserved for the noise floor's rows",
                c.name
            );
        }
        let mut set = ConditionSet::paper();
        set.extend(self.condition.clone())?;
        Ok(set)
    }

    /// The split settings of the data crate.
    pub fn split_config(&self) -> SplitConfig {
        SplitConfig {
            seed: self.seed,
            test: self.splits.test,
            calibration: self.splits.calibration,
        }
    }

    /// sha256 of the canonical JSON form: the identity of a run's settings.
    pub fn hash(&self) -> String {
        pstat_data::artifact::sha256_hex(&serde_json::to_vec(self).expect("config serializes"))
    }
}

/// The sections of a run config that are stages, each with an `enabled` switch.
const STAGE_SECTIONS: [&str; 5] = [
    "representational",
    "behavioral",
    "contextual",
    "familiarity",
    "clustering",
];

/// Settings of the representational section that the probes alone use: a stage that needs
/// only the veracity layer (familiarity's distances) asks for no probes and is served by
/// any probes of the same layer choice.
const PROBE_SETTINGS: [&str; 3] = ["probes", "layer_offsets", "mass_mean_layer_offsets"];

impl RunConfig {
    /// The config of a run folder that holds `self` once a single-stage command has asked
    /// for `next` in it: the folder's run with the stages `next` enables added, so `pstat
    /// probe`, `pstat prompt`, `pstat familiarity` and `pstat cluster` build one study in one
    /// folder. What results depend on must agree — every setting outside the stages, and the
    /// settings of a stage both enable — or the folder holds another study: the error names
    /// the first setting that differs.
    pub fn continued_by(&self, next: &RunConfig) -> anyhow::Result<RunConfig> {
        let held = serde_json::to_value(self)?;
        let asked = serde_json::to_value(next)?;
        let (Some(held), Some(asked)) = (held.as_object(), asked.as_object()) else {
            bail!("a run config serializes to a table");
        };
        let mut merged = held.clone();
        for (key, value) in asked {
            if !STAGE_SECTIONS.contains(&key.as_str()) {
                differs(key, held.get(key), Some(value))?;
                continue;
            }
            let enabled = |v: Option<&serde_json::Value>| {
                v.and_then(|v| v.get("enabled")) == Some(&serde_json::Value::Bool(true))
            };
            if !enabled(Some(value)) {
                continue;
            }
            if !enabled(held.get(key)) {
                merged.insert(key.clone(), value.clone());
                continue;
            }
            let layer_only = |v: Option<&serde_json::Value>| {
                key == "representational"
                    && v.and_then(|v| v.get("probes"))
                        .and_then(|p| p.as_array())
                        .is_some_and(Vec::is_empty)
            };
            let (held_layer_only, asked_layer_only) =
                (layer_only(held.get(key)), layer_only(Some(value)));
            for (setting, v) in value.as_object().into_iter().flatten() {
                if (held_layer_only || asked_layer_only)
                    && PROBE_SETTINGS.contains(&setting.as_str())
                {
                    continue;
                }
                differs(
                    &format!("{key}.{setting}"),
                    held.get(key).and_then(|h| h.get(setting)),
                    Some(v),
                )?;
            }
            if held_layer_only && !asked_layer_only {
                merged.insert(key.clone(), value.clone());
            }
        }
        Ok(serde_json::from_value(serde_json::Value::Object(merged))?)
    }
}

/// An error naming `setting` when the folder's value and the command's differ.
fn differs(
    setting: &str,
    held: Option<&serde_json::Value>,
    asked: Option<&serde_json::Value>,
) -> anyhow::Result<()> {
    if held == asked {
        return Ok(());
    }
    let show = |v: Option<&serde_json::Value>| v.map_or("nothing".to_string(), |v| v.to_string());
    bail!(
        "the folder holds a study with `{setting}` = {}, this command asks for {}",
        show(held),
        show(asked)
    )
}

/// The first value listed twice, if any.
pub fn first_duplicate<T: PartialEq>(values: &[T]) -> Option<&T> {
    values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config with only the stages `set` turns on.
    fn only(set: impl Fn(&mut RunConfig)) -> RunConfig {
        let mut c =
            RunConfig::stage_preset(None, "smollm2-135m-instruct", Domain::CityLocations).unwrap();
        set(&mut c);
        c
    }

    #[test]
    fn offsets_parse_ranges_and_lists() {
        let parse = Representational::parse_offsets;
        assert_eq!(parse("-2..2").unwrap(), vec![-2, -1, 0, 1, 2]);
        assert_eq!(parse("0, 1").unwrap(), vec![0, 1]);
        assert!(parse("2..-2").is_err());
        assert!(parse("x").is_err());
    }

    #[test]
    fn stage_commands_continue_one_study_and_refuse_another() {
        let probe = only(|c| c.representational.enabled = true);
        let familiarity = only(|c| {
            c.familiarity.enabled = true;
            c.representational.enabled = true;
            c.representational.probes = Vec::new();
        });
        let both = probe.continued_by(&familiarity).unwrap();
        assert!(both.representational.enabled && both.familiarity.enabled);
        assert!(!both.behavioral.enabled && !both.clustering.enabled);
        assert_eq!(both.representational.probes, probe.representational.probes);
        // Either order builds the same study, and asking again changes nothing.
        assert_eq!(familiarity.continued_by(&probe).unwrap(), both);
        assert_eq!(both.continued_by(&probe).unwrap(), both);

        let prompt = only(|c| {
            c.behavioral.enabled = true;
            c.behavioral.k = vec![20];
        });
        let three = both.continued_by(&prompt).unwrap();
        assert!(three.behavioral.enabled && three.behavioral.k == [20]);
        let other_k = only(|c| c.behavioral.enabled = true);
        let err = three.continued_by(&other_k).unwrap_err().to_string();
        assert!(
            err.contains("`behavioral.k` = [20], this command asks for [100]"),
            "{err}"
        );
        let mut other_seed = probe.clone();
        other_seed.seed += 1;
        let err = both.continued_by(&other_seed).unwrap_err().to_string();
        assert!(err.contains("`seed`"), "{err}");
    }

    #[test]
    fn defaults_are_the_paper_protocol() {
        let c = RunConfig::default();
        assert_eq!(c.behavioral.k, [100]);
        assert_eq!(c.behavioral.formats, Formats::Auto);
        assert!(
            !c.behavioral.allow_fewer,
            "a short context is an error unless asked for"
        );
        assert_eq!(c.representational.layer_offsets, [-2, -1, 0, 1, 2]);
        assert_eq!(
            c.representational.mass_mean_layer_offsets,
            [-2, -1, 0, 1, 2]
        );
        assert_eq!((c.splits.test, c.splits.calibration), (0.25, 0.20));
        assert_eq!(c.conditions().unwrap().names().len(), 6);
    }

    #[test]
    fn toml_round_trip_and_user_condition() {
        let text = r#"
            seed = 7
            models = ["smollm2-135m-instruct"]
            domains = ["city_locations"]
            [behavioral]
            k = [20, 50, 100]
            [[condition]]
            name = "synthetic_all"
            title = "Synthetic (all)"
            probe_true = ["true", "synthetic_tf", "synthetic_fi"]
            context = { from = "kinds", kinds = ["synthetic_tf", "synthetic_fi"] }
        "#;
        let c: RunConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        assert_eq!(c.conditions().unwrap().names().len(), 7);
        assert_eq!(
            c.behavioral.baselines,
            [Baseline::Empty, Baseline::True],
            "unset fields keep defaults"
        );
        assert_ne!(c.hash(), RunConfig::default().hash());
    }

    #[test]
    fn quick_fixes_sawmil_c_in_the_fit_parameters() {
        let quick = RunConfig::default()
            .quick()
            .representational
            .sawmil_params(3);
        assert_eq!((quick.c, quick.seed), (Some(1.0), 3));
        let quick = RunConfig::default().quick().representational;
        assert_eq!(quick.probes, [Probe::Sawmil, Probe::MassMean]);
        for probe in [Probe::Sawmil, Probe::MassMean] {
            assert_eq!(
                quick.offsets(probe),
                [0],
                "{probe} at the veracity layer only"
            );
        }
        let paper = RunConfig::default().representational.sawmil_params(3);
        assert_eq!(
            paper.c, None,
            "the paper's protocol searches C by cross-validation"
        );
    }

    #[test]
    fn unknown_fields_and_values_are_errors() {
        assert!(toml::from_str::<RunConfig>("sed = 1").is_err());
        let err = |text: &str| toml::from_str::<RunConfig>(text).unwrap_err().to_string();
        assert!(err("[behavioral]\nformats = [\"chatt\"]").contains("chatt"));
        assert!(err("[behavioral]\nformats = [\"auto\", \"chat\"]").contains("stands alone"));
        assert!(err("[representational]\nprobes = [\"mass-mean\"]").contains("mass_mean"));
        assert!(err("[behavioral]\nbaselines = [\"none\"]").contains("empty"));
        let prompt: RunConfig =
            toml::from_str("[representational]\nprobes = [\"prompt\"]").unwrap();
        assert!(prompt.validate().is_err());
    }

    #[test]
    fn a_bad_config_file_is_one_line_naming_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "seed = 1\n[behavioral]\nkk = [2]\n").unwrap();
        let err = format!("{:#}", RunConfig::from_file(&path).unwrap_err());
        assert!(
            err.contains("run.toml, line 3: invalid run config: unknown field `kk`"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }

    #[test]
    fn validate_names_the_bad_field_before_any_work() {
        let invalid = |text: &str| {
            let config: RunConfig = toml::from_str(text).unwrap();
            format!("{:#}", config.validate().unwrap_err())
        };
        let err = invalid("[representational]\nsawmil_c = 0.0");
        assert!(
            err.contains("sawmil_c") && err.contains("positive"),
            "{err}"
        );
        assert!(invalid("[representational]\nsawmil_c = -1.0").contains("sawmil_c"));
        assert!(
            invalid("[representational]\nnoise_floor_refits = 1").contains("noise_floor_refits")
        );
        assert!(invalid("test_limit = 0").contains("`test_limit` must be at least 1"));
        assert!(invalid("train_limit = 0").contains("train_limit"));
        assert!(
            invalid("[representational]\nselection_statements = 0")
                .contains("selection_statements")
        );
        assert!(invalid("bootstrap_resamples = 0").contains("bootstrap_resamples"));
        let err = invalid("[behavioral.backends]\nllama = \"http://gpu:8000\"");
        assert!(
            err.contains("behavioral.backends: `llama` is not one of `models`"),
            "{err}"
        );
        let err =
            invalid("models = [\"gemma-3-270m\", \"smollm2-135m-instruct\", \"gemma-3-270m\"]");
        assert!(err.contains("`models` lists `gemma-3-270m` twice"), "{err}");
        let err = invalid("domains = [\"word_definitions\", \"word_definitions\"]");
        assert!(
            err.contains("`domains` lists `word_definitions` twice"),
            "{err}"
        );
        // A repeated entry would write its rows twice and double its comparisons' families.
        for (text, expect) in [
            ("[behavioral]\nk = [2, 2]", "behavioral.k lists `2` twice"),
            (
                "[behavioral]\nbaselines = [\"empty\", \"empty\"]",
                "behavioral.baselines lists `empty` twice",
            ),
            (
                "[behavioral]\nformats = [\"plain\", \"plain\"]",
                "behavioral.formats lists `plain` twice",
            ),
            (
                "[representational]\nprobes = [\"sawmil\", \"sawmil\"]",
                "representational.probes lists `sawmil` twice",
            ),
            (
                "[representational]\nlayer_offsets = [0, 0]",
                "representational.layer_offsets lists `0` twice",
            ),
            (
                "[representational]\nmass_mean_layer_offsets = [1, 1]",
                "representational.mass_mean_layer_offsets lists `1` twice",
            ),
            // An enabled stage with nothing to compute, a data folder that is not one, a
            // labeler that is no URL, more resamples than memory should hold.
            ("[behavioral]\nk = []", "behavioral.k is empty or 0"),
            (
                "[behavioral]\nbaselines = []",
                "behavioral.baselines is empty",
            ),
            (
                "[representational]\nlayer_offsets = []",
                "representational.layer_offsets is empty",
            ),
            (
                "[familiarity]\nstatements_per_kind = 0",
                "familiarity.statements_per_kind",
            ),
            (
                "data = \"/nonexistent/data\"",
                "data: \"/nonexistent/data\" is not a folder",
            ),
            (
                "[clustering]\nlabeler = \"localhost:8000\"",
                "clustering.labeler",
            ),
            ("bootstrap_resamples = 100000000000", "more than 1000000"),
        ] {
            let err = invalid(text);
            assert!(err.contains(expect), "{text}: {err}");
        }
        let off: RunConfig = toml::from_str("[behavioral]\nenabled = false\nk = []").unwrap();
        off.validate().unwrap();
        assert!(
            invalid("[[condition]]\nname = \"baseline_refit\"\ntitle = \"R\"\nprobe_true = [\"true\", \"fictional_t\"]\ncontext = { from = \"none\" }")
                .contains("reserved")
        );
        let err = invalid("[splits]\ntest = 0.6\ncalibration = 0.5");
        assert!(
            err.contains("[splits]") && err.contains("split shares"),
            "{err}"
        );
        let err = invalid("[representational]\nactivations = \"/nonexistent/acts\"");
        assert!(
            err.contains("representational.activations: \"/nonexistent/acts\" is not a folder"),
            "{err}"
        );
        RunConfig::default().validate().unwrap();
        RunConfig::default().quick().validate().unwrap();
    }

    #[test]
    fn server_settings_parse_reach_the_backend_and_are_checked() {
        let text = r#"
            models = ["smollm2-135m-instruct"]
            [behavioral]
            backend = "http://gpu:8000"
            backend_model = "smollm2"
            concurrency = 32
            [behavioral.http]
            timeout_s = 1200.0
            retries = 2
            api_key_env = "VLLM_KEY"
        "#;
        let c: RunConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        let server = c.behavioral.server_config("http://gpu:8000");
        assert_eq!(server.url, "http://gpu:8000");
        assert_eq!(server.model.as_deref(), Some("smollm2"));
        assert_eq!(server.concurrency, 32);
        assert_eq!(
            (server.http.timeout_s, server.http.retries),
            (1200.0, 2),
            "set fields are taken"
        );
        assert_eq!(server.http.api_key_env.as_deref(), Some("VLLM_KEY"));
        assert_eq!(
            server.http.backoff_ms,
            HttpOptions::default().backoff_ms,
            "unset fields keep the client's defaults"
        );
        assert_ne!(c.hash(), {
            let mut d = c.clone();
            d.behavioral.concurrency = 8;
            d.hash()
        });

        // Left alone, the settings are the backend's defaults and stay out of the serialized
        // config, so the hash of a config that does not use them is unchanged.
        let d = RunConfig::default();
        let defaults = d.behavioral.server_config("http://x");
        assert_eq!(defaults, ServerConfig::new("http://x"));
        let toml_text = toml::to_string(&d).unwrap();
        assert!(
            !toml_text.contains("concurrency") && !toml_text.contains("[behavioral.http]"),
            "{toml_text}"
        );

        let invalid = |text: &str| {
            let config: RunConfig = toml::from_str(text).unwrap();
            format!("{:#}", config.validate().unwrap_err())
        };
        let err = invalid("[behavioral]\nconcurrency = 0");
        assert!(
            err.contains("behavioral.concurrency must be at least 1"),
            "{err}"
        );
        let err = invalid("[behavioral.http]\ntimeout_s = 0.0");
        assert!(
            err.contains("behavioral.http") && err.contains("timeout_s = 0"),
            "{err}"
        );
        let err = invalid("[behavioral.http]\ntimeout_s = -5.0");
        assert!(err.contains("behavioral.http"), "{err}");
        let err = invalid("[behavioral]\nbackend_model = \"\"");
        assert!(err.contains("behavioral.backend_model is empty"), "{err}");
        let err = invalid("[behavioral]\nbackend = \"gpu:8000\"");
        assert!(
            err.contains("behavioral.backend") && err.contains("http://"),
            "{err}"
        );
        let err = invalid(
            "models = [\"smollm2-135m-instruct\"]\n[behavioral.backends]\nsmollm2-135m-instruct = \"ftp://x\"",
        );
        assert!(
            err.contains("behavioral.backends.smollm2-135m-instruct"),
            "{err}"
        );
        let unknown = toml::from_str::<RunConfig>("[behavioral.http]\ntimeout = 5.0")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("timeout"), "{unknown}");
    }

    #[test]
    fn a_default_study_of_every_paper_model_validates() {
        // `_qwen-2.5-72b` City is Table A3's 79 (pstat 80, the last of 80 layers): its window
        // is shifted inside the model instead of reaching layer 82.
        for m in &pstat_lm::paper::PAPER_MODELS {
            let c = RunConfig {
                models: vec![m.short_name.to_string()],
                ..RunConfig::default()
            };
            c.validate()
                .unwrap_or_else(|e| panic!("{}: {e:#}", m.short_name));
        }
        // A window wider than the model cannot be shifted into it.
        let mut c = RunConfig {
            models: vec!["_qwen-2.5-72b".into()],
            ..RunConfig::default()
        };
        c.representational.layer_offsets = (-50..=50).collect();
        let err = format!("{:#}", c.validate().unwrap_err());
        assert!(
            err.contains("_qwen-2.5-72b") && err.contains("sawmil"),
            "{err}"
        );
    }

    #[test]
    fn the_protocol_is_a_top_level_key_that_changes_the_hash() {
        let paper = RunConfig::default();
        let parsed: RunConfig = toml::from_str("protocol = \"paper\"").unwrap();
        assert_eq!(parsed, paper);
        assert_eq!(parsed.hash(), paper.hash(), "paper is the default");
        assert!(!serde_json::to_string(&paper).unwrap().contains("protocol"));
        let authors: RunConfig = toml::from_str("protocol = \"authors\"").unwrap();
        assert_eq!(authors.protocol, Protocol::Authors);
        assert_ne!(
            authors.hash(),
            paper.hash(),
            "another protocol is another study"
        );
        assert!(toml::from_str::<RunConfig>("protocol = \"printed\"").is_err());
    }
}
