//! Per-token hidden states of many statements, as ragged per-layer [`Activations`].
//!
//! Chat-formatted statements share a long token prefix (the template's system turn and the
//! user-turn header). That prefix runs once through the model; its rows, identical for every
//! statement (causal attention), are copied into each statement's bag, and only the suffixes
//! are computed, in packed batches against the prefix's KV cache. The bags therefore hold every
//! token that was fed, as the upstream collector stored them.

use crate::model::{FinalRows, ForwardPlan};
use crate::runtime::{LanguageModel, LmError, batches};
use crate::tokenizer::{Tokenizer, TokenizerError};
use pstat_data::activations::Activations;
use std::path::{Path, PathBuf};

/// The shared prefix is reused only when it is at least this long (a lone BOS is not worth a
/// separate pass).
const MIN_SHARED_PREFIX: usize = 4;

/// Length of the longest common prefix of all sequences, leaving every sequence at least one
/// token of its own.
pub fn shared_prefix_len(sequences: &[Vec<u32>]) -> usize {
    let Some(first) = sequences.first() else {
        return 0;
    };
    let mut len = first.len();
    for seq in &sequences[1..] {
        len = len.min(seq.iter().zip(first).take_while(|(a, b)| a == b).count());
    }
    let shortest = sequences.iter().map(|s| s.len()).min().unwrap_or(0);
    len.min(shortest.saturating_sub(1))
}

/// Hidden states of `sequences` (named by `ids`) at `layers` (0 = embeddings, i = output of
/// block i): one [`Activations`] per requested layer, statements in input order.
/// `progress` is called with the number of statements finished after each batch.
pub fn extract(
    model: &LanguageModel,
    ids: &[String],
    sequences: &[Vec<u32>],
    layers: &[usize],
    mut progress: impl FnMut(usize),
) -> Result<Vec<Activations>, LmError> {
    assert_eq!(ids.len(), sequences.len(), "one id per sequence");
    let hidden = model.hidden_size();
    let mut out: Vec<Activations> = layers.iter().map(|_| Activations::new(hidden)).collect();
    let shared = shared_prefix_len(sequences);
    let (prefix, prefix_rows) = if shared >= MIN_SHARED_PREFIX {
        let tokens = &sequences[0][..shared];
        let rows = model.hidden_states(&[tokens.to_vec()], layers)?.remove(0);
        (Some(model.prefix(tokens)?), rows)
    } else {
        (None, vec![Vec::new(); layers.len()])
    };
    let skip = if prefix.is_some() { shared } else { 0 };
    let suffixes: Vec<Vec<u32>> = sequences.iter().map(|s| s[skip..].to_vec()).collect();
    let plan = ForwardPlan {
        capture: layers,
        final_rows: FinalRows::None,
        keep_kv: false,
    };
    let mut next = 0;
    for batch in batches(&suffixes) {
        let result = model.model().forward(&batch, prefix.as_ref(), &plan)?;
        let mut row = 0;
        for suffix in &batch {
            let span = row * hidden..(row + suffix.len()) * hidden;
            for (layer, acts) in out.iter_mut().enumerate() {
                let mut rows = prefix_rows[layer].clone();
                rows.extend_from_slice(&result.captured[layer][span.clone()]);
                model.check_finite(&rows, next, layers[layer])?;
                acts.push(&ids[next], &sequences[next], &rows);
            }
            row += suffix.len();
            next += 1;
        }
        progress(batch.len());
    }
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
/// Why a file of statements, one a line, could not be encoded.
pub enum LinesError {
    /// A line failed to tokenize.
    #[error("line {line}: {source}")]
    Tokenize {
        /// The line's number.
        line: usize,
        /// The tokenizer's error.
        #[source]
        source: TokenizerError,
    },
    /// Every line is blank.
    #[error("no statements (every line is blank)")]
    Empty,
}

/// The non-blank lines of `text` as statements: each tokenized with BOS (no special-token
/// parsing) and named `line:N` by its 1-based line number, so an id points back into the file.
pub fn tokenize_lines(
    tokenizer: &Tokenizer,
    text: &str,
) -> Result<(Vec<String>, Vec<Vec<u32>>), LinesError> {
    let mut ids = Vec::new();
    let mut sequences = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let tokens =
            tokenizer
                .encode(line, true, false)
                .map_err(|source| LinesError::Tokenize {
                    line: i + 1,
                    source,
                })?;
        ids.push(format!("line:{}", i + 1));
        sequences.push(tokens);
    }
    if sequences.is_empty() {
        return Err(LinesError::Empty);
    }
    Ok((ids, sequences))
}

/// Where one layer of several goes: `out` itself when there is one layer, else
/// `stem.layerL.ext` beside it (`acts.safetensors` → `acts.layer10.safetensors`).
pub fn layer_file(out: &Path, layer: usize, n_layers: usize) -> PathBuf {
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
    fn shared_prefix_leaves_each_sequence_a_token() {
        assert_eq!(shared_prefix_len(&[vec![1, 2, 3, 4], vec![1, 2, 3, 5]]), 3);
        assert_eq!(shared_prefix_len(&[vec![1, 2, 3], vec![1, 2, 3, 4]]), 2);
        assert_eq!(shared_prefix_len(&[vec![7, 8]]), 1);
        assert_eq!(shared_prefix_len(&[vec![1, 2, 3], vec![1, 2, 3]]), 2);
        let three = [vec![1, 2, 3, 4], vec![1, 2, 3, 5, 6], vec![1, 2, 7]];
        assert_eq!(shared_prefix_len(&three), 2);
        assert_eq!(shared_prefix_len(&[]), 0);
    }

    #[test]
    fn one_file_per_layer() {
        let out = Path::new("runs/acts.safetensors");
        assert_eq!(layer_file(out, 10, 1), out);
        assert_eq!(
            layer_file(out, 10, 2),
            Path::new("runs/acts.layer10.safetensors")
        );
    }
}
