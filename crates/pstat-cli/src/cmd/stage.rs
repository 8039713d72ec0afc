//! Single-stage commands over one (model, domain): each builds a run config that enables just
//! its stage and runs it through `pstat run`'s machinery, so results, caches and resumption
//! are the same as in a full run (and a later `pstat run` into the same folder reuses them
//! only if its config matches).

use crate::output::outln;
use anyhow::Context;
use clap::Args;
use pstat_data::Domain;
use pstat_study::RunConfig;
use pstat_tables::Probe;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct Target {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder.
    #[arg(long)]
    pub model: String,
    /// city_locations, med_indications or word_definitions.
    #[arg(long)]
    pub domain: Domain,
    /// Start from this run config (TOML) instead of the paper's defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output folder.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// `f32` or `q8`, overriding the config's `precision`.
    #[arg(long)]
    pub precision: Option<pstat_lm::Precision>,
}

impl Target {
    /// The config with this model and domain and every stage off.
    pub fn base(&self) -> anyhow::Result<RunConfig> {
        let mut c = RunConfig::stage_preset(self.config.as_deref(), &self.model, self.domain)?;
        if let Some(precision) = self.precision {
            c.precision = precision;
        }
        Ok(c)
    }
}

#[derive(Args)]
pub struct ProbeArgs {
    #[command(flatten)]
    target: Target,
    /// `sawmil` or `mass_mean`; repeat for both (default: both).
    #[arg(long)]
    probe: Vec<Probe>,
    /// Layers as offsets from the veracity layer, for both probes: `-2..2` (Appendix F) or a
    /// list `0,1` (default: the --config's `layer_offsets` and `mass_mean_layer_offsets`, else
    /// -2..2).
    #[arg(long, allow_hyphen_values = true)]
    layers: Option<String>,
    /// Use this veracity layer instead of selecting it on the calibration split.
    #[arg(long)]
    veracity_layer: Option<usize>,
}

/// `pstat probe`: the representational instantiation (every Θ, each probe, each layer).
pub fn probe(args: ProbeArgs) -> anyhow::Result<()> {
    let mut c = args.target.base()?;
    c.representational.enabled = true;
    if !args.probe.is_empty() {
        c.representational.probes = args.probe.clone();
    }
    if let Some(layers) = &args.layers {
        let offsets =
            pstat_study::config::Representational::parse_offsets(layers).context("--layers")?;
        c.representational.layer_offsets = offsets.clone();
        c.representational.mass_mean_layer_offsets = offsets;
    }
    c.representational.veracity_layer = args.veracity_layer.or(c.representational.veracity_layer);
    execute(c, &args.target.out)
}

#[derive(Args)]
pub struct ExtractArgs {
    /// A registry model name or a path to a GGUF file.
    #[arg(long)]
    model: String,
    /// city_locations, med_indications or word_definitions.
    #[arg(long)]
    domain: Domain,
    /// Layers to store (0 = embeddings, i = output of block i), e.g. `13,14,15`.
    #[arg(long, value_delimiter = ',', required = true)]
    layers: Vec<usize>,
    /// Data folder laid out like the repo's data/ (default: the bundled data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Products in `f32` (exact, the default) or `q8` (8-bit activations, integer kernels;
    /// faster, approximate: docs/BENCHMARKS.md).
    #[arg(long, default_value = "f32")]
    precision: pstat_lm::Precision,
}

/// `pstat extract`: every token's residual stream of every statement of a domain, cached as
/// ragged f16 safetensors per layer (reused by every later command).
pub fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    let root = pstat_data::DataRoot::open(args.data.as_deref())?;
    let data = pstat_data::load_domain(&root, args.domain)?;
    let model = pstat_study::LoadedModel::load(&args.model, args.precision)?;
    let ids: Vec<String> = data.statements.iter().map(|s| s.id.clone()).collect();
    let acts = pstat_study::activations::cached_activations(
        &model,
        &data,
        &ids,
        &args.layers,
        &mut crate::progress::Bars::new(),
    )?;
    for (layer, a) in &acts {
        outln!(
            "{} {} layer {layer}: {} statements, {} tokens × {}",
            model.name,
            args.domain,
            a.len(),
            a.n_tokens(),
            a.hidden
        )?;
    }
    Ok(())
}

#[derive(Args)]
pub struct FamiliarityArgs {
    #[command(flatten)]
    target: Target,
}

/// `pstat familiarity`: object-token probabilities per kind and, at the veracity layer,
/// within-kind activation distances.
pub fn familiarity(args: FamiliarityArgs) -> anyhow::Result<()> {
    let mut c = args.target.base()?;
    c.familiarity.enabled = true;
    // Distances need the veracity layer's activations; no probes are retrained for them.
    c.representational.enabled = true;
    c.representational.probes = Vec::new();
    execute(c, &args.target.out)
}

pub struct ClusterModelArgs {
    pub target: Target,
    pub labeler: Option<String>,
}

/// `pstat cluster --model M --domain D`: both instantiations (to find the retracted
/// statements), then the clustering and contrastive prompts.
pub fn cluster(args: ClusterModelArgs) -> anyhow::Result<()> {
    let mut c = args.target.base()?;
    c.representational.enabled = true;
    c.behavioral.enabled = true;
    c.clustering.enabled = true;
    c.clustering.labeler = args.labeler.or(c.clustering.labeler);
    execute(c, &args.target.out)
}

/// Runs `config`'s stage into `out`; a folder that already holds a study gets the stage
/// added to it, so the stage commands build one study.
pub fn execute(config: RunConfig, out: &Path) -> anyhow::Result<()> {
    pstat_study::execute_stage(
        config,
        out,
        super::run::reporter(out, false, false).as_mut(),
    )
}
