//! `pstat score`: next-token probabilities of answer options, one JSON line in per prompt,
//! one JSON line out, in input order.
//!
//! Input line: `{"prompt": "...", "options": ["a","b","c"], "chat": false, "prefill": "..."}`.
//! Each option's probability is the summed probability of the token ids of "L" and " L" that
//! no other option shares (the upstream collector's rule). With `"chat": true` the prompt is
//! the user turn of the model's chat template (its default system prompt included) and
//! `prefill` starts the assistant turn; without chat, `prefill` is appended to the prompt.
//! The longest token prefix shared by all prompts is computed once and reused.
//!
//! Output line: `{"logprobs": [...], "argmax": i, "option_ids": [[...]], "leftover": p}`.

use anyhow::{Context, bail};
use clap::Args;
use pstat_lm::chat::{ChatTemplate, Message};
use pstat_lm::tokenizer::Tokenizer;
use pstat_lm::{LanguageModel, option_token_ids};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ScoreArgs {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder.
    #[arg(long)]
    model: String,
    /// JSON lines of prompts.
    #[arg(long)]
    input: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Prompt {
    prompt: String,
    options: Vec<String>,
    #[serde(default)]
    chat: bool,
    #[serde(default)]
    prefill: String,
}

#[derive(Serialize)]
struct Scored {
    logprobs: Vec<f64>,
    argmax: usize,
    option_ids: Vec<Vec<u32>>,
    leftover: f64,
}

pub fn run(args: ScoreArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("reading {}", args.input.display()))?;
    let prompts: Vec<(usize, Prompt)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let p: Prompt = serde_json::from_str(l).with_context(|| {
                format!("{}:{}: not a prompt object", args.input.display(), i + 1)
            })?;
            if p.options.len() < 2 {
                bail!(
                    "{}:{}: `options` needs at least two entries",
                    args.input.display(),
                    i + 1
                );
            }
            Ok((i + 1, p))
        })
        .collect::<anyhow::Result<_>>()?;
    let path = pstat_lm::registry::resolve(&args.model)?;
    let lm = LanguageModel::load(&path)?;
    let tokenizer = Tokenizer::load(&path)?;
    let mut template: Option<ChatTemplate> = None;
    let mut sequences = Vec::with_capacity(prompts.len());
    for (line, p) in &prompts {
        let at = || format!("{}:{line}", args.input.display());
        let ids = if p.chat {
            if template.is_none() {
                template = Some(ChatTemplate::load(&path, &tokenizer).with_context(at)?);
            }
            let chat = template.as_ref().expect("template was just loaded");
            let user = [Message::new("user", &p.prompt)];
            let rendered = if p.prefill.is_empty() {
                chat.render(&user, true)
            } else {
                chat.render_with_prefill(&user, &p.prefill)
            };
            chat.tokenize(&tokenizer, &rendered.with_context(at)?)
                .with_context(at)?
        } else {
            tokenizer
                .encode(&format!("{}{}", p.prompt, p.prefill), true, false)
                .with_context(at)?
        };
        sequences.push(ids);
    }
    let shared = pstat_lm::extract::shared_prefix_len(&sequences);
    let prefix = if shared > 0 {
        Some(lm.prefix(&sequences[0][..shared])?)
    } else {
        None
    };
    // Prompts with the same options are scored together.
    let mut groups: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
    for (i, (_, p)) in prompts.iter().enumerate() {
        groups.entry(p.options.as_slice()).or_default().push(i);
    }
    let mut results: Vec<Option<Scored>> = (0..prompts.len()).map(|_| None).collect();
    for (options, members) in groups {
        let mut encode_err = None;
        let option_ids = option_token_ids(options, |o| {
            tokenizer.encode(o, true, false).unwrap_or_else(|e| {
                encode_err = Some(e);
                Vec::new()
            })
        })?;
        if let Some(e) = encode_err {
            return Err(e.into());
        }
        let suffixes: Vec<Vec<u32>> = members
            .iter()
            .map(|&i| sequences[i][shared..].to_vec())
            .collect();
        let scores = lm.score_options(prefix.as_ref(), &suffixes, &option_ids)?;
        for (&i, s) in members.iter().zip(scores) {
            results[i] = Some(Scored {
                logprobs: s.logprobs,
                argmax: s.argmax,
                option_ids: option_ids.clone(),
                leftover: s.leftover,
            });
        }
    }
    let mut out = std::io::BufWriter::new(crate::output::stdout());
    for r in results.into_iter().flatten() {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    }
    out.flush()?;
    Ok(())
}
