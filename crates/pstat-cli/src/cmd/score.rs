//! `pstat score`: next-token probabilities of answer options, one JSON line in per prompt,
//! one JSON line out, in input order ([`pstat_lm::score`] says how options are scored).
//!
//! Input line: `{"prompt": "...", "options": ["a","b","c"], "chat": false, "prefill": "..."}`.
//! Output line: `{"logprobs": [...], "argmax": i, "option_ids": [[...]], "leftover": p}`.

use anyhow::Context;
use clap::Args;
use pstat_lm::LanguageModel;
use pstat_lm::score::{OptionPrompt, score_prompts};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ScoreArgs {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder.
    #[arg(long)]
    model: String,
    /// JSON lines, one prompt each: {"prompt": "...", "options": [" a", " b", " c"]}, with
    /// optional "chat": true (the model's chat template) and "prefill": "..." (text the
    /// answer starts with). Printed: one line per prompt, {"logprobs": [...], "argmax": i,
    /// "option_ids": [[...]], "leftover": p}.
    #[arg(long)]
    input: PathBuf,
    /// Products in `f32` (exact, the default) or `q8` (8-bit activations, integer kernels;
    /// faster, approximate: docs/BENCHMARKS.md).
    #[arg(long, default_value = "f32")]
    precision: pstat_lm::Precision,
}

pub fn run(args: ScoreArgs) -> anyhow::Result<()> {
    let input = args.input.display();
    let text = std::fs::read_to_string(&args.input).with_context(|| format!("reading {input}"))?;
    let (lines, prompts): (Vec<usize>, Vec<OptionPrompt>) = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let p = serde_json::from_str(l)
                .with_context(|| format!("{input}:{}: not a prompt object", i + 1))?;
            Ok((i + 1, p))
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let path = pstat_lm::registry::resolve(&args.model)?;
    let lm = LanguageModel::load_with(&path, args.precision)?;
    let scored = score_prompts(&lm, &path, &prompts).map_err(|e| match e.prompt() {
        Some(i) => anyhow::Error::new(e).context(format!("{input}:{}", lines[i])),
        None => e.into(),
    })?;
    let mut out = std::io::BufWriter::new(crate::output::stdout());
    for r in &scored {
        writeln!(out, "{}", serde_json::to_string(r)?)?;
    }
    out.flush()?;
    Ok(())
}
