//! `pstat hidden`: per-token hidden states of text lines at chosen layers, as ragged
//! safetensors files (pstat-data's `Activations` layout: `values` [tokens, hidden], `offsets`
//! i64 [lines + 1], `token_ids` u32 [tokens], metadata with model sha256, layer and line ids).
//!
//! One file per layer: with a single `--layers` value the file is `--out` itself; with several,
//! `--out acts.safetensors` becomes `acts.layer10.safetensors`, `acts.layer15.safetensors`, ...

use anyhow::{Context, bail};
use clap::Args;
use pstat_data::activations::Precision;
use pstat_lm::LanguageModel;
use pstat_lm::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};

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
    /// Output safetensors file (see the module docs for several layers).
    #[arg(long)]
    out: PathBuf,
    /// Store values as f16 (half the size) instead of f32.
    #[arg(long)]
    f16: bool,
}

pub fn run(args: HiddenArgs) -> anyhow::Result<()> {
    let path = pstat_lm::registry::resolve(&args.model)?;
    let lm = LanguageModel::load(&path)?;
    if let Some(&layer) = args.layers.iter().find(|&&l| l > lm.n_layers()) {
        bail!(
            "--layers {layer}: {} has {} blocks (valid layers 0..={})",
            path.display(),
            lm.n_layers(),
            lm.n_layers()
        );
    }
    let tokenizer = Tokenizer::load(&path)?;
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("reading {}", args.input.display()))?;
    let (ids, sequences): (Vec<String>, Vec<Vec<u32>>) = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let tokens = tokenizer
                .encode(line, true, false)
                .with_context(|| format!("{}:{}: tokenizing", args.input.display(), i + 1))?;
            Ok((format!("line:{}", i + 1), tokens))
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    if sequences.is_empty() {
        bail!(
            "{}: no statements (every line is blank)",
            args.input.display()
        );
    }
    let activations = pstat_lm::extract::extract(&lm, &ids, &sequences, &args.layers, |_| {})?;
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
        let out = layer_path(&args.out, layer, args.layers.len());
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

/// `--out` itself for a single layer; `stem.layerL.ext` next to it for several.
fn layer_path(out: &Path, layer: usize, n_layers: usize) -> PathBuf {
    if n_layers == 1 {
        return out.to_path_buf();
    }
    let stem = out.file_stem().and_then(|s| s.to_str()).unwrap_or("acts");
    let ext = out
        .extension()
        .and_then(|s| s.to_str())
        .unwrap_or("safetensors");
    out.with_file_name(format!("{stem}.layer{layer}.{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_layer() {
        let out = Path::new("runs/acts.safetensors");
        assert_eq!(
            layer_path(out, 10, 1),
            PathBuf::from("runs/acts.safetensors")
        );
        assert_eq!(
            layer_path(out, 10, 2),
            PathBuf::from("runs/acts.layer10.safetensors")
        );
    }
}
