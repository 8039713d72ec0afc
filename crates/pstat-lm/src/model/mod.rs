//! The forward pass: a decoder built from a GGUF file, its weight matrices kept in their
//! stored type ([`weights`]) and dequantized to f32 a tile at a time inside each product
//! ("exact mode": every product is an f32 gemm on exactly the values that dequantizing the
//! whole file would give, so results are comparable with llama.cpp on an F32 re-quantized
//! file), run over packed batches of sequences that all continue one cached prefix.
//!
//! One file per architecture ([`llama`], [`qwen2`], [`gemma`], [`gemma2`], [`gemma3`]) wires
//! the shared sublayers of [`layers`] into one of two block layouts: pre-norm
//! ([`llama::Block`]) or sandwich-norm ([`gemma3::Block`]); [`attention`] and [`ops`] hold the
//! kernels.
//!
//! The products' files form layers, each importing only those below it: at the bottom what
//! every kernel reads ([`precision`], ggml's block layouts, the q8 activation blocks, the
//! shared output pointer), then the SIMD kernels, then [`weights`] (which calls the AVX2
//! dequantizer), the q8 product driver [`q8`], and on top [`ops`], whose `linear` picks a
//! product's precision.

pub mod attention;
#[cfg(target_arch = "x86_64")]
mod dequant_avx2;
pub mod gemma;
pub mod gemma2;
pub mod gemma3;
mod ggml_blocks;
pub mod layers;
pub mod llama;
pub mod ops;
pub mod precision;
pub mod q8;
mod q8_activations;
#[cfg(target_arch = "x86_64")]
mod q8_x86;
mod q8k;
pub mod qwen2;
mod shared_dst;
pub mod weights;

use crate::gguf::{Arch, GgufError, GgufFile, ModelConfig};
use crate::weights::{GgufTensors, SourceError, TensorSource};
use attention::{LayerKv, Packing};
use candle_core::Device;
use layers::Rope;
use ops::{Matrix, Precision, RopeTable, linear, rms_norm, soft_cap};
use weights::Stored;

#[derive(Debug, thiserror::Error)]
/// Why a model could not be loaded or run on a batch.
pub enum ModelError {
    /// Reading the GGUF file failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// Reading a tensor from its source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A tensor has the wrong shape or cannot be dequantized.
    #[error("{path}: tensor `{name}`: {detail}")]
    Tensor {
        /// The file that holds (or should hold) the tensor.
        path: String,
        /// The tensor's GGUF name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    #[error(
        "layer {layer} does not exist: the model has {n_layers} blocks (valid layers: 0 = embeddings ..= {n_layers})"
    )]
    /// A residual-stream layer past the last block was asked for.
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// Decoder blocks of the model.
        n_layers: usize,
    },
    #[error(
        "sequence {index} is {len} tokens{prefix}, longer than the model's context of {context} tokens"
    )]
    /// A sequence, with the shared prefix, exceeds the context length.
    TooLong {
        /// The sequence's index in the batch.
        index: usize,
        /// Its length in tokens, without the prefix.
        len: usize,
        /// " after a N-token prefix" when there is one, else empty.
        prefix: String,
        /// The model's context length in tokens.
        context: usize,
    },
    /// A sequence has no tokens.
    #[error("sequence {index} is empty")]
    EmptySequence {
        /// The sequence's index in the batch.
        index: usize,
    },
    /// A token id is not below the vocabulary size.
    #[error("sequence {index}: token id {id} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The sequence's index in the batch.
        index: usize,
        /// The token id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
}

/// Reads tensors of a [`TensorSource`] (a GGUF file or a Hugging Face folder), checking their
/// shapes: weight matrices in their stored type, vectors (norms, biases) as f32.
pub struct Loader<'a> {
    source: &'a mut dyn TensorSource,
    precision: Precision,
}

impl<'a> Loader<'a> {
    /// A loader of `source`'s tensors, products in f32 precision.
    pub fn new(source: &'a mut dyn TensorSource) -> Self {
        Self {
            source,
            precision: Precision::F32,
        }
    }

    /// Weight matrices read from now on multiply in `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    fn tensor_error(&self, name: &str, detail: String) -> ModelError {
        ModelError::Tensor {
            path: self.source.origin(name),
            name: name.to_string(),
            detail,
        }
    }

    /// Tensor `name` as f32, with its expected dimensions (outermost first).
    fn read(&mut self, name: &str, dims: &[usize]) -> Result<Vec<f32>, ModelError> {
        let tensor = self.source.tensor(name)?;
        if tensor.shape().dims() != dims {
            let found = tensor.shape().dims().to_vec();
            return Err(self.tensor_error(name, format!("shape {found:?}, expected {dims:?}")));
        }
        tensor
            .dequantize(&Device::Cpu)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| {
                let e = crate::gguf::candle_message(&e);
                self.tensor_error(name, format!("cannot dequantize: {e}"))
            })
    }

    /// A weight matrix stored `rows × cols` (ggml: `[cols, rows]`), kept in its stored type.
    pub fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, ModelError> {
        let origin = self.source.origin(name);
        let error = |detail: String| ModelError::Tensor {
            path: origin.clone(),
            name: name.to_string(),
            detail,
        };
        let raw = self.source.raw(name)?;
        if raw.dims != [rows, cols] {
            let found = raw.dims.clone();
            return Err(error(format!(
                "shape {found:?}, expected {:?}",
                [rows, cols]
            )));
        }
        let dtype = raw.dtype;
        if !cols.is_multiple_of(dtype.block_size()) {
            return Err(error(format!(
                "rows of {cols} elements are not whole {dtype:?} blocks"
            )));
        }
        let mut data = raw.data;
        let stored = Stored::read(&mut data, dtype, rows * cols)
            .map_err(|e| error(format!("cannot read: {}", crate::gguf::candle_message(&e))))?
            .ok_or_else(|| {
                error(format!(
                    "tensor type {dtype:?} is not supported for weight matrices"
                ))
            })?;
        Matrix::from_stored(rows, cols, stored)
            .map(|m| m.with_precision(self.precision))
            .map_err(|e| error(e.0))
    }

    /// The 1-D tensor `name` of `len` elements, as f32; fails when absent or of another shape.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        self.read(name, &[len])
    }
}

/// Per-forward facts every block needs: where sequences lie, each row's position, RoPE tables.
pub struct BlockContext {
    /// Where each sequence's rows lie in the batch.
    pub packing: Packing,
    /// Each row's position (the prefix's length counted), one per row.
    pub positions: Vec<usize>,
    ropes: Vec<(Rope, RopeTable)>,
}

impl BlockContext {
    /// The table of `rope` (one is built for every RoPE the model's blocks use).
    pub fn rope(&self, rope: Rope) -> &RopeTable {
        &self
            .ropes
            .iter()
            .find(|(r, _)| *r == rope)
            .expect("a RoPE table is built for every block's RoPE")
            .1
    }
}

/// The decoder blocks, in one of the two layouts the architectures share.
#[derive(Debug)]
enum Blocks {
    /// Llama, Qwen 2, Gemma 1.
    PreNorm(Vec<llama::Block>),
    /// Gemma 2, Gemma 3.
    Sandwich(Vec<gemma3::Block>),
}

impl Blocks {
    fn load(loader: &mut Loader, config: &ModelConfig) -> Result<Self, ModelError> {
        Ok(match config.arch {
            Arch::Llama => Blocks::PreNorm(llama::blocks(loader, config)?),
            Arch::Qwen2 => Blocks::PreNorm(qwen2::blocks(loader, config)?),
            Arch::Gemma => Blocks::PreNorm(gemma::blocks(loader, config)?),
            Arch::Gemma2 => Blocks::Sandwich(gemma2::blocks(loader, config)?),
            Arch::Gemma3 => Blocks::Sandwich(gemma3::blocks(loader, config)?),
        })
    }

    /// Every distinct RoPE of the blocks, in order of first use.
    fn ropes(&self) -> Vec<Rope> {
        let all: Vec<Rope> = match self {
            Blocks::PreNorm(b) => b.iter().map(|b| b.rope()).collect(),
            Blocks::Sandwich(b) => b.iter().map(|b| b.rope()).collect(),
        };
        let mut distinct: Vec<Rope> = Vec::new();
        for rope in all {
            if !distinct.contains(&rope) {
                distinct.push(rope);
            }
        }
        distinct
    }

    fn forward(
        &self,
        layer: usize,
        x: &mut Vec<f32>,
        ctx: &BlockContext,
        prefix: Option<&LayerKv>,
        keep: Option<&[usize]>,
    ) -> LayerKv {
        match self {
            Blocks::PreNorm(b) => b[layer].forward(x, ctx, prefix, keep),
            Blocks::Sandwich(b) => b[layer].forward(x, ctx, prefix, keep),
        }
    }
}

/// Which rows of the batch leave the model through the final norm (for logits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalRows {
    /// No row (no logits wanted).
    None,
    /// The last row of each sequence.
    Last,
    /// Every row.
    All,
}

/// What one forward pass computes.
#[derive(Debug, Clone)]
pub struct ForwardPlan<'a> {
    /// Residual-stream layers to return: 0 = embeddings, i = output of block i.
    pub capture: &'a [usize],
    /// Which rows go through the final norm into `final_hidden`.
    pub final_rows: FinalRows,
    /// Return every layer's keys and values (to build a prefix cache).
    pub keep_kv: bool,
}

/// What one forward pass returns, as its [`ForwardPlan`] asked.
#[derive(Debug, Clone)]
pub struct ForwardOutput {
    /// One `[rows × hidden]` matrix per entry of `plan.capture`, in that order.
    pub captured: Vec<Vec<f32>>,
    /// `[selected rows × hidden]` after the final norm.
    pub final_hidden: Vec<f32>,
    /// Every layer's keys and values when `plan.keep_kv`.
    pub kv: Vec<LayerKv>,
}

/// A computed shared prefix: every layer's keys and values for its tokens, and the final-norm
/// output of its last token (the next-token distribution after the prefix alone).
#[derive(Debug, Clone)]
pub struct PrefixCache {
    /// The prefix's tokens.
    pub tokens: Vec<u32>,
    /// Keys and values, one entry per decoder block.
    pub kv: Vec<LayerKv>,
    /// The final-norm output of the last token, `[hidden]`.
    pub last_hidden: Vec<f32>,
}

impl PrefixCache {
    /// The prefix's length in tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the prefix has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A decoder with weight matrices in their stored types.
#[derive(Debug)]
pub struct Model {
    config: ModelConfig,
    /// `vocab × hidden`; also the LM head when the file ties them.
    embeddings: Matrix,
    /// `vocab × hidden` when the file has its own `output.weight`.
    lm_head: Option<Matrix>,
    blocks: Blocks,
    output_norm: Vec<f32>,
}

impl Model {
    /// The decoder of a GGUF file, its products computed in `precision`.
    pub fn load(file: &GgufFile, precision: Precision) -> Result<Self, ModelError> {
        Self::load_from(file.config()?, &mut GgufTensors::new(file)?, precision)
    }

    /// A decoder of shape `config` with the tensors of `source` (GGUF names), its products
    /// computed in `precision`.
    pub fn load_from(
        config: ModelConfig,
        source: &mut dyn TensorSource,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        let mut loader = Loader::new(source).with_precision(precision);
        let (vocab, hidden) = (config.vocab_size, config.hidden);
        let embeddings = loader.matrix("token_embd.weight", vocab, hidden)?;
        let lm_head = if config.tied_embeddings {
            None
        } else {
            Some(loader.matrix("output.weight", vocab, hidden)?)
        };
        let blocks = Blocks::load(&mut loader, &config)?;
        let output_norm = loader.vector("output_norm.weight", hidden)?;
        Ok(Self {
            config,
            embeddings,
            lm_head,
            blocks,
            output_norm,
        })
    }

    /// The decoder's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Checks a batch before running it: non-empty, in-vocabulary, within the context.
    pub fn check(&self, sequences: &[&[u32]], prefix_len: usize) -> Result<(), ModelError> {
        let vocab = self.config.vocab_size;
        for (index, seq) in sequences.iter().enumerate() {
            if seq.is_empty() {
                return Err(ModelError::EmptySequence { index });
            }
            if let Some(&id) = seq.iter().find(|&&id| id as usize >= vocab) {
                return Err(ModelError::TokenOutOfRange { index, id, vocab });
            }
            if prefix_len + seq.len() > self.config.context_length {
                return Err(ModelError::TooLong {
                    index,
                    len: seq.len(),
                    prefix: if prefix_len > 0 {
                        format!(" after a {prefix_len}-token prefix")
                    } else {
                        String::new()
                    },
                    context: self.config.context_length,
                });
            }
        }
        Ok(())
    }

    /// Runs `sequences` (each continuing `prefix`, if any) as one packed batch.
    pub fn forward(
        &self,
        sequences: &[&[u32]],
        prefix: Option<&PrefixCache>,
        plan: &ForwardPlan,
    ) -> Result<ForwardOutput, ModelError> {
        let n_layers = self.config.n_layers;
        if let Some(&layer) = plan.capture.iter().find(|&&l| l > n_layers) {
            return Err(ModelError::LayerOutOfRange { layer, n_layers });
        }
        let prefix_len = prefix.map_or(0, |p| p.len());
        self.check(sequences, prefix_len)?;
        let depth = if plan.final_rows != FinalRows::None || plan.keep_kv {
            n_layers
        } else {
            plan.capture.iter().copied().max().unwrap_or(0)
        };
        let packing = Packing::from_lengths(sequences.iter().map(|s| s.len()));
        let positions: Vec<usize> = sequences
            .iter()
            .flat_map(|s| prefix_len..prefix_len + s.len())
            .collect();
        let max_pos = positions.iter().copied().max().unwrap_or(0) + 1;
        let c = &self.config;
        let ropes = self
            .blocks
            .ropes()
            .into_iter()
            .map(|rope| {
                let factors = c.rope_freq_factors.as_deref();
                let table =
                    RopeTable::new(c.rope_dim, rope.base, rope.freq_scale, factors, max_pos);
                (rope, table)
            })
            .collect();
        let ctx = BlockContext {
            packing,
            positions,
            ropes,
        };
        let mut x = self.embed(sequences);
        let mut captured = vec![Vec::new(); plan.capture.len()];
        let mut kv = Vec::new();
        let mut capture = |layer: usize, x: &[f32]| {
            for (slot, _) in plan
                .capture
                .iter()
                .enumerate()
                .filter(|(_, l)| **l == layer)
            {
                captured[slot] = ops::par_copy(x);
            }
        };
        capture(0, &x);
        let last_block = self.last_block_rows(plan, &ctx.packing);
        for layer in 0..depth {
            let layer_prefix = prefix.map(|p| &p.kv[layer]);
            let keep = (layer + 1 == n_layers)
                .then_some(last_block.as_deref())
                .flatten();
            let layer_kv = self.blocks.forward(layer, &mut x, &ctx, layer_prefix, keep);
            if plan.keep_kv {
                kv.push(concat_kv(layer_prefix, layer_kv));
            }
            capture(layer + 1, &x);
        }
        let hidden = c.hidden;
        let mut final_hidden = match (plan.final_rows, &last_block) {
            (FinalRows::None, _) => Vec::new(),
            (FinalRows::All, _) => x,
            // The last block kept the sequences' last rows, after the row before a lone one.
            (FinalRows::Last, Some(kept)) => {
                x.split_off((kept.len() - ctx.packing.n_sequences()) * hidden)
            }
            (FinalRows::Last, None) => {
                let last: Vec<usize> = (1..=ctx.packing.n_sequences())
                    .map(|s| ctx.packing.offsets[s] - 1)
                    .collect();
                ops::rows_of(&x, hidden, &last)
            }
        };
        rms_norm(&mut final_hidden, &self.output_norm, c.rms_eps);
        Ok(ForwardOutput {
            captured,
            final_hidden,
            kv,
        })
    }

    /// The rows the last block computes past its attention when only the sequences' last rows
    /// leave the model (and neither the last layer's states nor keys and values are kept):
    /// every row still attends, but the output projection and the MLP run at the last rows
    /// only (for the embedded models, 2–3% of scoring a prompt after its shared prefix). Each
    /// kept row is computed exactly as in the whole batch where the products are wide enough
    /// ([`ops::rows_independent`]; every real model's are), and because gemm multiplies a
    /// lone row by its matrix-vector path, in another summation order, a single sequence
    /// keeps the row before its last one too. `None` where nothing would be saved or a bit
    /// could change.
    fn last_block_rows(&self, plan: &ForwardPlan, packing: &Packing) -> Option<Vec<usize>> {
        let c = &self.config;
        if plan.final_rows != FinalRows::Last
            || plan.keep_kv
            || plan.capture.contains(&c.n_layers)
            || !ops::rows_independent(c.hidden.min(2 * c.ffn))
        {
            return None;
        }
        let last = |s: usize| packing.offsets[s + 1] - 1;
        let n = packing.n_sequences();
        match (n, packing.n_rows()) {
            (_, rows) if rows <= n.max(2) => None,
            (1, _) => Some(vec![last(0) - 1, last(0)]),
            _ => Some((0..n).map(last).collect()),
        }
    }

    /// Runs `tokens` once and keeps every layer's keys and values, so that many continuations
    /// can be scored against it without recomputing it.
    pub fn prefix(&self, tokens: &[u32]) -> Result<PrefixCache, ModelError> {
        let out = self.forward(
            &[tokens],
            None,
            &ForwardPlan {
                capture: &[],
                final_rows: FinalRows::Last,
                keep_kv: true,
            },
        )?;
        Ok(PrefixCache {
            tokens: tokens.to_vec(),
            kv: out.kv,
            last_hidden: out.final_hidden,
        })
    }

    /// Logits `[rows × vocab]` of final-norm outputs `[rows × hidden]` (soft-capped for
    /// Gemma 2). A row's logits do not depend on the other rows of the call: a lone row goes
    /// in twice, because gemm multiplies a single row by its matrix-vector path, which sums
    /// in another order.
    pub fn logits(&self, final_hidden: &[f32]) -> Vec<f32> {
        let head = self.lm_head.as_ref().unwrap_or(&self.embeddings);
        let rows = final_hidden.len() / self.config.hidden;
        let mut logits = if rows == 1 {
            let mut twice = linear(&final_hidden.repeat(2), 2, head);
            twice.truncate(head.rows);
            twice
        } else {
            linear(final_hidden, rows, head)
        };
        if let Some(cap) = self.config.final_softcap {
            soft_cap(&mut logits, cap);
        }
        logits
    }

    /// Token embeddings of the packed batch, scaled for Gemma.
    fn embed(&self, sequences: &[&[u32]]) -> Vec<f32> {
        let scale = self.config.embed_scale;
        sequences
            .iter()
            .flat_map(|s| s.iter())
            .flat_map(|&id| {
                self.embeddings
                    .row(id as usize)
                    .into_iter()
                    .map(move |v| scale.map_or(v, |s| v * s))
            })
            .collect()
    }
}

/// The keys/values of a prefix followed by those of its continuation.
fn concat_kv(prefix: Option<&LayerKv>, own: LayerKv) -> LayerKv {
    match prefix {
        None => own,
        Some(p) => LayerKv {
            k: [p.k.as_slice(), &own.k].concat(),
            v: [p.v.as_slice(), &own.v].concat(),
        },
    }
}

#[cfg(test)]
mod tests;
