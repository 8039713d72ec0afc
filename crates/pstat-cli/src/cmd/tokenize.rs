//! `pstat tokenize`: token ids of text lines, exactly as llama.cpp would produce them.
//! Reads lines from stdin and writes one `{"text": ..., "ids": [...]}` JSON line per input line.
//! Only the vocabulary is read, so vocabulary-only GGUF files (no tensors) work.

use anyhow::Context;
use clap::Args;
use pstat_lm::tokenizer::Tokenizer;
use std::io::{BufRead, BufWriter, Write};

#[derive(Args)]
pub struct TokenizeArgs {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder.
    #[arg(long)]
    model: String,
    /// Do not add BOS even where the model's metadata asks for it (add_bos_token).
    #[arg(long)]
    no_bos: bool,
    /// Turn control-token texts such as `<|im_start|>` into their ids (for chat-rendered text).
    #[arg(long)]
    parse_special: bool,
    /// Each stdin line is a JSON string (so a text can hold newlines, tabs or a trailing `\r`).
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Line<'a> {
    text: &'a str,
    ids: Vec<u32>,
}

pub fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let path = pstat_lm::registry::resolve(&args.model)?;
    let tokenizer = Tokenizer::load(&path)?;
    let mut out = BufWriter::new(crate::output::stdout());
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.with_context(|| format!("reading stdin line {}", i + 1))?;
        let decoded: String;
        let text = if args.json {
            decoded = serde_json::from_str(&line)
                .with_context(|| format!("stdin line {}: not a JSON string", i + 1))?;
            decoded.as_str()
        } else {
            line.strip_suffix('\r').unwrap_or(&line)
        };
        let ids = tokenizer
            .encode(text, !args.no_bos, args.parse_special)
            .with_context(|| format!("stdin line {}", i + 1))?;
        serde_json::to_writer(&mut out, &Line { text, ids })?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
