//! Per-token hidden states of many statements, as ragged per-layer [`Activations`].
//!
//! Chat-formatted statements share a long token prefix (the template's system turn and the
//! user-turn header). That prefix runs once through the model; its rows, identical for every
//! statement (causal attention), are copied into each statement's bag, and only the suffixes
//! are computed, in packed batches against the prefix's KV cache. The bags therefore hold every
//! token that was fed, as the upstream collector stored them.

use crate::model::{FinalRows, ForwardPlan, PrefixCache};
use crate::runtime::{LanguageModel, LmError, batches};
use crate::tokenizer::{Tokenizer, TokenizerError};
use pstat_data::activations::Activations;
use rayon::prelude::*;
use std::ops::Range;
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
    progress: impl FnMut(usize),
) -> Result<Vec<Activations>, LmError> {
    Extractor::new(model, ids, sequences, layers)?.block(0..ids.len(), progress)
}

/// Tokens of the shared prefix that run once ahead of the suffixes (0: none is worth it).
fn prefix_len(sequences: &[Vec<u32>]) -> usize {
    let shared = shared_prefix_len(sequences);
    if shared >= MIN_SHARED_PREFIX {
        shared
    } else {
        0
    }
}

/// Splits the statements into consecutive blocks of at least `size` statements (the last may
/// be shorter), each made of whole batches as [`extract`] packs them over all `sequences`. A
/// block computed alone ([`Extractor::block`]) therefore runs the very batches, against the
/// very prefix, of one pass over everything: its numbers are those of [`extract`], bit for bit.
pub fn blocks(sequences: &[Vec<u32>], size: usize) -> Vec<Range<usize>> {
    let skip = prefix_len(sequences);
    let suffixes: Vec<Vec<u32>> = sequences.iter().map(|s| s[skip..].to_vec()).collect();
    let mut out = Vec::new();
    let (mut start, mut end) = (0, 0);
    for batch in batches(&suffixes) {
        end += batch.len();
        if end - start >= size {
            out.push(start..end);
            start = end;
        }
    }
    if start < end {
        out.push(start..end);
    }
    out
}

/// An extraction of `sequences` at `layers` that computes any of its [`blocks`] on demand:
/// the shared prefix (of all sequences) runs once, when it is created.
pub struct Extractor<'a> {
    model: &'a LanguageModel,
    ids: &'a [String],
    sequences: &'a [Vec<u32>],
    layers: &'a [usize],
    skip: usize,
    prefix: Option<PrefixCache>,
    prefix_rows: Vec<Vec<f32>>,
}

impl<'a> Extractor<'a> {
    /// Runs the shared prefix of `sequences` (named by `ids`) through `model`.
    pub fn new(
        model: &'a LanguageModel,
        ids: &'a [String],
        sequences: &'a [Vec<u32>],
        layers: &'a [usize],
    ) -> Result<Self, LmError> {
        assert_eq!(ids.len(), sequences.len(), "one id per sequence");
        let skip = prefix_len(sequences);
        let (prefix, prefix_rows) = if skip > 0 {
            let tokens = &sequences[0][..skip];
            let rows = model.hidden_states(&[tokens.to_vec()], layers)?.remove(0);
            (Some(model.prefix(tokens)?), rows)
        } else {
            (None, vec![Vec::new(); layers.len()])
        };
        Ok(Extractor {
            model,
            ids,
            sequences,
            layers,
            skip,
            prefix,
            prefix_rows,
        })
    }

    /// Activations of the statements `range` (all of them, or one of [`blocks`]), one per
    /// layer. `progress` is called with the number of statements finished after each batch.
    pub fn block(
        &self,
        range: Range<usize>,
        mut progress: impl FnMut(usize),
    ) -> Result<Vec<Activations>, LmError> {
        let (model, layers) = (self.model, self.layers);
        let hidden = model.hidden_size();
        let tokens: usize = self.sequences[range.clone()].iter().map(Vec::len).sum();
        let mut out: Vec<Activations> = layers
            .iter()
            .map(|_| {
                let mut acts = Activations::new(hidden);
                acts.reserve(range.len(), tokens);
                acts
            })
            .collect();
        let suffixes: Vec<Vec<u32>> = self.sequences[range.clone()]
            .iter()
            .map(|s| s[self.skip..].to_vec())
            .collect();
        let plan = ForwardPlan {
            capture: layers,
            final_rows: FinalRows::None,
            keep_kv: false,
        };
        let mut next = range.start;
        for batch in batches(&suffixes) {
            let result = model.model().forward(&batch, self.prefix.as_ref(), &plan)?;
            // Each layer's rows are checked and stored by a worker of their own; the error
            // reported is the one a statement-by-statement, layer-by-layer pass meets first.
            let first_error = out
                .par_iter_mut()
                .enumerate()
                .filter_map(|(layer, acts)| {
                    let captured = &result.captured[layer];
                    let mut row = 0;
                    for (i, suffix) in batch.iter().enumerate() {
                        let span = row * hidden..(row + suffix.len()) * hidden;
                        let mut rows = self.prefix_rows[layer].clone();
                        rows.extend_from_slice(&captured[span]);
                        let at = next + i;
                        if let Err(err) = model.check_finite(&rows, at, layers[layer]) {
                            return Some(((at, layer), err));
                        }
                        acts.push(&self.ids[at], &self.sequences[at], &rows);
                        row += suffix.len();
                    }
                    None
                })
                .min_by_key(|(order, _)| *order);
            if let Some((_, err)) = first_error {
                return Err(err);
            }
            next += batch.len();
            progress(batch.len());
        }
        Ok(out)
    }
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
    fn blocks_are_whole_batches() {
        // Two 1000-token sequences fill a batch of 2048 rows; the shared prefix (a lone
        // token) is too short to be split off.
        let seqs: Vec<Vec<u32>> = (0..5).map(|i| vec![i; 1000]).collect();
        assert_eq!(blocks(&seqs, 3), vec![0..4, 4..5]);
        assert_eq!(blocks(&seqs, 1), vec![0..2, 2..4, 4..5]);
        assert_eq!(blocks(&seqs, usize::MAX), vec![0..5]);
        assert!(blocks(&[], 3).is_empty());
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
