//! What the rest of pstat calls: a loaded [`LanguageModel`] that turns token ids into hidden
//! states, per-token probabilities and next-token scores of answer options after a shared
//! prefix. Batching is internal: sequences are packed into forward passes of bounded size.

use crate::gguf::{GgufFile, ModelConfig};
use crate::hf::{self, HfError, HfFolder};
use crate::memory::{self, MemoryEstimate, ROWS_PER_BATCH, ROWS_PER_HEAD};
use crate::model::precision::Precision;
use crate::model::q8;
use crate::model::{FinalRows, ForwardPlan, Model, ModelError, PrefixCache};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum LmError {
    /// Loading or running the decoder failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Reading a Hugging Face folder failed.
    #[error(transparent)]
    Hf(#[from] HfError),
    /// Reading the model's chat template failed.
    #[error(transparent)]
    Chat(#[from] crate::chat::ChatError),
    /// Reading the model's files failed.
    #[error("{path}: {source}")]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    #[error(
        "option {index} ({option:?}) has no token id of its own: every id of its encodings is shared with another option"
    )]
    /// An answer option has no token id that no other option shares.
    AmbiguousOption {
        /// The option's index.
        index: usize,
        /// The option's text.
        option: String,
    },
    /// A candidate token id is not below the vocabulary size.
    #[error("candidate token id {id} is outside the vocabulary of {vocab} tokens")]
    CandidateOutOfRange {
        /// The token id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The model's estimated memory exceeds what is available.
    #[error("{path}: the model does not fit in memory: {detail}")]
    TooLarge {
        /// The model file or folder.
        path: PathBuf,
        /// The estimate against what is available.
        detail: String,
    },
    #[error(
        "{model}: the forward pass of sequence {sequence} produced a non-finite value ({value}) at {layer}; the model file is damaged or the model overflows"
    )]
    /// A forward pass produced a NaN or infinity.
    NonFinite {
        /// The model file or folder.
        model: PathBuf,
        /// The sequence's index in the batch.
        sequence: usize,
        /// Where the value appeared, in words (a layer, or the output).
        layer: String,
        /// The first non-finite value found.
        value: f32,
    },
}

/// The next-token distribution after one continuation, reduced to what scoring needs.
#[derive(Debug, Clone, PartialEq)]
pub struct NextToken {
    /// log p of each requested candidate id, in request order.
    pub logprobs: Vec<f32>,
    /// The most probable token and its log p.
    pub top_token: u32,
    /// The log p of `top_token`.
    pub top_logprob: f32,
}

/// Answer options scored as the next token: each option's probability is the summed
/// probability of its token ids (notes §7.3).
#[derive(Debug, Clone, PartialEq)]
pub struct OptionScores {
    /// ln Σ p(id) over each option's ids.
    pub logprobs: Vec<f64>,
    /// Index of the most probable option.
    pub argmax: usize,
    /// 1 − Σ of the options' probabilities: the mass on every other token.
    pub leftover: f64,
    /// The most probable token overall and its log p.
    pub top_token: u32,
    /// The log p of `top_token`.
    pub top_logprob: f32,
}

/// A GGUF model loaded for inference, with the file's identity for provenance.
#[derive(Debug)]
pub struct LanguageModel {
    model: Model,
    path: PathBuf,
    sha256: String,
    precision: Precision,
}

/// Refuses a model whose estimate exceeds the memory available (where that can be read).
fn fits(path: &Path, estimate: &MemoryEstimate) -> Result<(), LmError> {
    match memory::available() {
        Some(available) => estimate
            .check(available)
            .map_err(|memory::OutOfMemory(detail)| LmError::TooLarge {
                path: path.to_path_buf(),
                detail,
            }),
        None => Ok(()),
    }
}

impl LanguageModel {
    /// Loads a GGUF file or a Hugging Face folder (weight matrices kept in their stored types),
    /// after checking that it fits in the memory available.
    pub fn load(path: &Path) -> Result<Self, LmError> {
        Self::load_with(path, Precision::F32)
    }

    /// [`LanguageModel::load`], its products computed in `precision`.
    pub fn load_with(path: &Path, precision: Precision) -> Result<Self, LmError> {
        if hf::is_folder(path) {
            let mut folder = HfFolder::open(path)?;
            let config = folder.config().map_err(ModelError::from)?;
            let mut estimate = MemoryEstimate::of(folder.metadata(), &config);
            // The folder's metadata view does not record stored types; the safetensors
            // headers do.
            estimate.weights = folder.weight_bytes();
            fits(path, &estimate)?;
            let model = Model::load_from(config, folder.tensors(), precision)?;
            return Ok(Self {
                model,
                path: path.to_path_buf(),
                sha256: files_sha256(&folder.files())?,
                precision,
            });
        }
        let file = GgufFile::open(path).map_err(ModelError::from)?;
        let config = file.config().map_err(ModelError::from)?;
        fits(path, &MemoryEstimate::of(&file, &config))?;
        let model = Model::load(&file, precision)?;
        Ok(Self {
            model,
            path: path.to_path_buf(),
            sha256: file_sha256(path)?,
            precision,
        })
    }

    /// How the model's products are computed.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The kernels that run this model, for manifests: the f32 kernels' SIMD family
    /// ([`crate::kernel_isa`]), and under `q8` the integer kernels' instruction set too (results
    /// are bit-identical only between machines that agree on it).
    pub fn kernel_isa(&self) -> String {
        match self.precision {
            Precision::F32 => crate::kernel_isa().to_string(),
            Precision::Q8 => format!("{}; q8 {}", crate::kernel_isa(), q8::kernel_isa()),
        }
    }

    /// The decoder's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        self.model.config()
    }

    /// Decoder blocks (residual-stream layers are 0 ..= this).
    pub fn n_layers(&self) -> usize {
        self.config().n_layers
    }

    /// Width of the residual stream.
    pub fn hidden_size(&self) -> usize {
        self.config().hidden
    }

    /// The GGUF file or Hugging Face folder the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hex sha256 of the GGUF file; for a Hugging Face folder, of the list of its files' names
    /// and sha256s (config, tokenizer, weights).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The decoder itself.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Residual stream of every token of every sequence at `layers` (0 = embeddings, i = output
    /// of block i): `[sequence][index into layers]`, each `[tokens × hidden]` row-major.
    /// Runs only as deep as the deepest requested layer.
    pub fn hidden_states(
        &self,
        sequences: &[Vec<u32>],
        layers: &[usize],
    ) -> Result<Vec<Vec<Vec<f32>>>, LmError> {
        self.hidden_states_after(None, sequences, layers)
    }

    /// [`Self::hidden_states`] of sequences that continue `prefix` (a belief context computed
    /// once): the rows are the sequences' own tokens, attending to the prefix's cached keys
    /// and values as they would to the same tokens in one longer sequence.
    pub fn hidden_states_after(
        &self,
        prefix: Option<&PrefixCache>,
        sequences: &[Vec<u32>],
        layers: &[usize],
    ) -> Result<Vec<Vec<Vec<f32>>>, LmError> {
        let hidden = self.hidden_size();
        let plan = ForwardPlan {
            capture: layers,
            final_rows: FinalRows::None,
            keep_kv: false,
        };
        let mut result = Vec::with_capacity(sequences.len());
        for batch in batches(sequences) {
            let out = self.model.forward(&batch, prefix, &plan)?;
            let mut row = 0;
            for seq in &batch {
                let rows = row * hidden..(row + seq.len()) * hidden;
                for (c, &layer) in out.captured.iter().zip(layers) {
                    self.check_finite(&c[rows.clone()], result.len(), layer)?;
                }
                result.push(
                    out.captured
                        .iter()
                        .map(|c| c[rows.clone()].to_vec())
                        .collect(),
                );
                row += seq.len();
            }
        }
        Ok(result)
    }

    /// p(t_i | t_<i) for i ≥ 1 of every sequence (a sequence of n tokens gets n − 1 values).
    pub fn token_probabilities(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, LmError> {
        let positions: Vec<Vec<usize>> = sequences.iter().map(|s| (1..s.len()).collect()).collect();
        self.token_probabilities_at(sequences, &positions)
    }

    /// p(t_i | t_<i) at the positions `positions[s]` of sequence s, in the order listed. The
    /// LM head (for a large vocabulary the biggest product of the model) runs only at the rows
    /// that predict them; each value is the one [`Self::token_probabilities`] gives.
    ///
    /// Panics when a position is 0 (the first token has no prediction) or past the end of its
    /// sequence, or when there is not one list of positions per sequence.
    pub fn token_probabilities_at(
        &self,
        sequences: &[Vec<u32>],
        positions: &[Vec<usize>],
    ) -> Result<Vec<Vec<f32>>, LmError> {
        assert_eq!(
            sequences.len(),
            positions.len(),
            "one position list per sequence"
        );
        for (seq, wanted) in sequences.iter().zip(positions) {
            assert!(
                wanted.iter().all(|&i| (1..seq.len()).contains(&i)),
                "positions must lie in 1..{}",
                seq.len()
            );
        }
        let plan = ForwardPlan {
            capture: &[],
            final_rows: FinalRows::All,
            keep_kv: false,
        };
        let mut result: Vec<Vec<f32>> = Vec::with_capacity(sequences.len());
        for batch in batches(sequences) {
            let out = self.model.forward(&batch, None, &plan)?;
            let first = result.len();
            // Row r of a sequence predicts its token at r + 1.
            let mut targets: Vec<Option<u32>> = vec![None; batch.iter().map(|s| s.len()).sum()];
            let mut offsets = Vec::with_capacity(batch.len());
            let mut row = 0;
            for (j, seq) in batch.iter().enumerate() {
                for &i in &positions[first + j] {
                    targets[row + i - 1] = Some(seq[i]);
                }
                offsets.push(row);
                row += seq.len();
            }
            let scored = self.logprobs_of(&out.final_hidden, |r| targets[r].map(|t| vec![t]))?;
            for (j, &row) in offsets.iter().enumerate() {
                let probs: Vec<f32> = positions[first + j]
                    .iter()
                    .map(|&i| {
                        let next = scored[row + i - 1]
                            .as_ref()
                            .expect("every listed row is scored");
                        next.logprobs[0].exp()
                    })
                    .collect();
                self.check_output(&probs, result.len())?;
                result.push(probs);
            }
        }
        Ok(result)
    }

    /// Computes `tokens` once; [`Self::next_token_logprobs`] then scores continuations of it.
    pub fn prefix(&self, tokens: &[u32]) -> Result<PrefixCache, LmError> {
        Ok(self.model.prefix(tokens)?)
    }

    /// For each suffix (continuing `prefix`, if any), log p of each candidate id as the next token after
    /// the suffix, and the top token. Suffixes run in packed batches against the shared cache.
    pub fn next_token_logprobs(
        &self,
        prefix: Option<&PrefixCache>,
        suffixes: &[Vec<u32>],
        candidates: &[u32],
    ) -> Result<Vec<NextToken>, LmError> {
        let vocab = self.config().vocab_size;
        if let Some(&id) = candidates.iter().find(|&&id| id as usize >= vocab) {
            return Err(LmError::CandidateOutOfRange { id, vocab });
        }
        let plan = ForwardPlan {
            capture: &[],
            final_rows: FinalRows::Last,
            keep_kv: false,
        };
        let mut result = Vec::with_capacity(suffixes.len());
        for batch in batches(suffixes) {
            let out = self.model.forward(&batch, prefix, &plan)?;
            let scored = self.logprobs_of(&out.final_hidden, |_| Some(candidates.to_vec()))?;
            for next in scored.into_iter().flatten() {
                self.check_output(&next.logprobs, result.len())?;
                self.check_output(&[next.top_logprob], result.len())?;
                result.push(next);
            }
        }
        Ok(result)
    }

    /// Scores answer options: `option_ids[j]` are the token ids counted for option j (see
    /// [`option_token_ids`]).
    pub fn score_options(
        &self,
        prefix: Option<&PrefixCache>,
        suffixes: &[Vec<u32>],
        option_ids: &[Vec<u32>],
    ) -> Result<Vec<OptionScores>, LmError> {
        let flat: Vec<u32> = option_ids.concat();
        let next = self.next_token_logprobs(prefix, suffixes, &flat)?;
        Ok(next
            .into_iter()
            .map(|n| combine_options(&n, option_ids))
            .collect())
    }

    /// A NaN or infinity in what leaves the runtime is an error naming the model, the sequence
    /// and the layer: a damaged weight otherwise turns into `null` scores or silent answers.
    /// Checked once on the returned values, never inside the kernels.
    pub(crate) fn check_finite(
        &self,
        values: &[f32],
        sequence: usize,
        layer: usize,
    ) -> Result<(), LmError> {
        self.non_finite(values, sequence, || format!("layer {layer}"))
    }

    /// [`Self::check_finite`] for values computed from the LM head's logits.
    fn check_output(&self, values: &[f32], sequence: usize) -> Result<(), LmError> {
        self.non_finite(values, sequence, || "the output (LM head)".to_string())
    }

    fn non_finite(
        &self,
        values: &[f32],
        sequence: usize,
        layer: impl Fn() -> String,
    ) -> Result<(), LmError> {
        match values.iter().find(|v| !v.is_finite()) {
            None => Ok(()),
            Some(&value) => Err(LmError::NonFinite {
                model: self.path.clone(),
                sequence,
                layer: layer(),
                value,
            }),
        }
    }

    /// Log-softmax of the logits of each final-norm row, read at the ids `wanted(row)` asks for
    /// (rows where it returns `None` are skipped and yield `None`).
    fn logprobs_of(
        &self,
        final_hidden: &[f32],
        wanted: impl Fn(usize) -> Option<Vec<u32>>,
    ) -> Result<Vec<Option<NextToken>>, LmError> {
        let hidden = self.hidden_size();
        let vocab = self.config().vocab_size;
        let n_rows = final_hidden.len() / hidden;
        let mut result: Vec<Option<NextToken>> = vec![None; n_rows];
        let needed: Vec<usize> = (0..n_rows).filter(|&r| wanted(r).is_some()).collect();
        for chunk in needed.chunks(ROWS_PER_HEAD) {
            let logits =
                self.model
                    .logits(&crate::model::ops::rows_of(final_hidden, hidden, chunk));
            for (&r, row) in chunk.iter().zip(logits.chunks_exact(vocab)) {
                let ids = wanted(r).unwrap_or_default();
                result[r] = Some(next_token(row, &ids));
            }
        }
        Ok(result)
    }
}

/// log-softmax of one logits row at `ids`, plus its argmax. The normaliser sums in f64.
fn next_token(logits: &[f32], ids: &[u32]) -> NextToken {
    let (top, max) = logits
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 { (i, v) } else { best }
        });
    let sum: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
    let log_z = max as f64 + sum.ln();
    NextToken {
        logprobs: ids
            .iter()
            .map(|&id| (logits[id as usize] as f64 - log_z) as f32)
            .collect(),
        top_token: top as u32,
        top_logprob: (max as f64 - log_z) as f32,
    }
}

/// Sums the candidate probabilities of each option (`next.logprobs` follows the concatenation
/// of `option_ids`).
fn combine_options(next: &NextToken, option_ids: &[Vec<u32>]) -> OptionScores {
    let mut at = 0;
    let probs: Vec<f64> = option_ids
        .iter()
        .map(|ids| {
            let p = next.logprobs[at..at + ids.len()]
                .iter()
                .map(|&l| (l as f64).exp())
                .sum();
            at += ids.len();
            p
        })
        .collect();
    let argmax = probs
        .iter()
        .enumerate()
        .fold(0, |best, (i, &p)| if p > probs[best] { i } else { best });
    OptionScores {
        logprobs: probs.iter().map(|p| p.ln()).collect(),
        argmax,
        leftover: 1.0 - probs.iter().sum::<f64>(),
        top_token: next.top_token,
        top_logprob: next.top_logprob,
    }
}

/// The token ids counted for each answer option, by the upstream collector's rule (notes
/// §7.3): encode "L" and " L" with the tokenizer's usual special tokens, pool the ids, and drop
/// every id that occurs in more than one option (BOS, a lone space piece, ...).
pub fn option_token_ids(
    options: &[String],
    mut encode: impl FnMut(&str) -> Vec<u32>,
) -> Result<Vec<Vec<u32>>, LmError> {
    let pooled: Vec<Vec<u32>> = options
        .iter()
        .map(|o| {
            let mut ids = encode(o);
            ids.extend(encode(&format!(" {o}")));
            ids.sort_unstable();
            ids.dedup();
            ids
        })
        .collect();
    pooled
        .iter()
        .enumerate()
        .map(|(i, ids)| {
            let own: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|id| {
                    pooled
                        .iter()
                        .enumerate()
                        .all(|(j, other)| j == i || !other.contains(id))
                })
                .collect();
            if own.is_empty() {
                Err(LmError::AmbiguousOption {
                    index: i,
                    option: options[i].clone(),
                })
            } else {
                Ok(own)
            }
        })
        .collect()
}

/// Splits `sequences` into consecutive batches of at most [`ROWS_PER_BATCH`] rows (a longer
/// sequence forms a batch of its own).
pub(crate) fn batches(sequences: &[Vec<u32>]) -> Vec<Vec<&[u32]>> {
    let mut out: Vec<Vec<&[u32]>> = Vec::new();
    let mut rows = 0;
    for seq in sequences {
        if out.is_empty() || rows + seq.len() > ROWS_PER_BATCH {
            out.push(Vec::new());
            rows = 0;
        }
        out.last_mut().unwrap().push(seq);
        rows += seq.len();
    }
    out
}

/// sha256 of the lines `<file name> <sha256>` of `files`, in order.
fn files_sha256(files: &[PathBuf]) -> Result<String, LmError> {
    let mut listing = String::new();
    for file in files {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        listing.push_str(&format!("{name} {}\n", file_sha256(file)?));
    }
    Ok(hex::encode(Sha256::digest(listing.as_bytes())))
}

fn file_sha256(path: &Path) -> Result<String, LmError> {
    let io = |source| LmError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(io)?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_ids_drop_shared_ids() {
        // BOS (1) and a lone-space piece (9) appear in every option and are dropped.
        let vocab = |s: &str| -> Vec<u32> {
            let mut ids = vec![1];
            if s.starts_with(' ') {
                ids.push(9);
            }
            ids.push(match s.trim() {
                "a" => 20,
                "b" => 21,
                _ => 22,
            });
            ids
        };
        let opts: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            option_token_ids(&opts, vocab).unwrap(),
            vec![vec![20], vec![21], vec![22]]
        );
        let same: Vec<String> = ["a", "a"].iter().map(|s| s.to_string()).collect();
        assert!(matches!(
            option_token_ids(&same, vocab),
            Err(LmError::AmbiguousOption { index: 0, .. })
        ));
    }

    #[test]
    fn next_token_is_a_log_softmax() {
        let n = next_token(&[1.0, 3.0, 2.0], &[0, 1]);
        let z = (1f64.exp() + 3f64.exp() + 2f64.exp()).ln();
        assert!((n.logprobs[0] as f64 - (1.0 - z)).abs() < 1e-6);
        assert_eq!(n.top_token, 1);
        let scores = combine_options(&n, &[vec![0], vec![1]]);
        assert_eq!(scores.argmax, 1);
        let p2 = (2.0 - z).exp();
        assert!((scores.leftover - p2).abs() < 1e-6);
    }

    #[test]
    fn batches_respect_the_row_budget() {
        let seqs = vec![vec![0u32; 1500], vec![0; 500], vec![0; 3000], vec![0; 10]];
        let sizes: Vec<usize> = batches(&seqs).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, vec![2, 1, 1]);
    }
}
