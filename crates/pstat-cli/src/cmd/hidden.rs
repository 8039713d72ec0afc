//! `pstat hidden`: per-token hidden states of text lines at chosen layers, as ragged
//! safetensors files (pstat-data's `Activations` layout: `values` `[tokens, hidden]`, `offsets`
//! i64 `[lines + 1]`, `token_ids` u32 `[tokens]`, metadata with model sha256, layer and line ids).
//!
//! One file per layer: with a single `--layers` value the file is `--out` itself; with several,
//! `--out acts.safetensors` becomes `acts.layer10.safetensors`, `acts.layer15.safetensors`, ...

use anyhow::Context;
use clap::Args;
use pstat_data::activations::Precision;
use pstat_lm::LanguageModel;
use pstat_lm::extract::{layer_file, tokenize_lines};
use pstat_lm::tokenizer::Tokenizer;
use std::path::PathBuf;

#[derive(Args)]
pub struct HiddenArgs {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder.
    #[arg(long)]
    model: String,
    /// Comma-separated layers: 0 = embeddings, i = output of decoder block i.
    #[arg(long, value_delimiter = ',', required = true)]
    layers: Vec<usize>,
    /// Text file, one statement per line (blank lines are skipped).
    #[arg(long)]
    input: PathBuf,
    /// Output safetensors file; with several --layers, one file per layer beside it
    /// (`acts.safetensors` → `acts.layer10.safetensors`, `acts.layer15.safetensors`, ...).
    #[arg(long)]
    out: PathBuf,
    /// Store values as f16 (half the size) instead of f32.
    #[arg(long)]
    f16: bool,
    /// Products in `f32` (exact, the default) or `q8` (8-bit activations, integer kernels;
    /// faster, approximate: docs/BENCHMARKS.md).
    #[arg(long, default_value = "f32")]
    precision: pstat_lm::Precision,
}

pub fn run(args: HiddenArgs) -> anyhow::Result<()> {
    let path = pstat_lm::registry::resolve(&args.model)?;
    let lm = LanguageModel::load_with(&path, args.precision)?;
    let tokenizer = Tokenizer::load(&path)?;
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("reading {}", args.input.display()))?;
    let (ids, sequences) =
        tokenize_lines(&tokenizer, &text).with_context(|| args.input.display().to_string())?;
    // Checked here so that each error names what is at fault: the option, or the input's line.
    let n_layers = lm.n_layers();
    if let Some(layer) = pstat_study::config::first_duplicate(&args.layers) {
        anyhow::bail!("--layers: layer {layer} is named twice");
    }
    if let Some(layer) = args.layers.iter().find(|&&l| l > n_layers) {
        anyhow::bail!(
            "--layers: layer {layer} does not exist: the model has {n_layers} blocks (valid layers: 0 = embeddings ..= {n_layers})"
        );
    }
    let context = lm.config().context_length;
    if let Some((id, seq)) = ids.iter().zip(&sequences).find(|(_, s)| s.len() > context) {
        anyhow::bail!(
            "{}:{}: the line is {} tokens, longer than the model's context of {context} tokens",
            args.input.display(),
            id.trim_start_matches("line:"),
            seq.len()
        );
    }
    let activations = pstat_lm::extract::extract(&lm, &ids, &sequences, &args.layers, |_| {})
        .with_context(|| args.input.display().to_string())?;
    let precision = if args.f16 {
        Precision::F16
    } else {
        Precision::F32
    };
    for (&layer, mut acts) in args.layers.iter().zip(activations) {
        acts.metadata.insert("model".into(), args.model.clone());
        acts.metadata
            .insert("model_sha256".into(), lm.sha256().to_string());
        acts.metadata.insert("layer".into(), layer.to_string());
        acts.metadata
            .insert("input".into(), args.input.display().to_string());
        let out = layer_file(&args.out, layer, args.layers.len());
        acts.write(&out, precision)?;
        eprintln!(
            "layer {layer}: {} statements, {} tokens -> {}",
            acts.len(),
            acts.n_tokens(),
            out.display()
        );
    }
    Ok(())
}
