//! Llama (Llama 2/3, Mistral, SmolLM), as llama.cpp's `llm_build_llama` computes it, and the
//! pre-norm block it shares with Qwen 2 ([`super::qwen2`]) and Gemma 1 ([`super::gemma`]):
//!
//! ```text
//! h = x + W_o · attn(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x))
//! y = h + W_down · (act(W_gate·norm(h)) ⊙ W_up·norm(h))
//! ```
//!
//! - SiLU gate; the LM head is `output.weight` or the tied embeddings.
//! - The GGUF converter permutes Llama's q/k rows so that RoPE rotates adjacent pairs
//!   (llama.cpp's "normal" RoPE).
//! - Llama 3.1+ (`rope_scaling` type llama3) divides each pair's frequency by a factor the
//!   converter stores as `rope_freqs.weight` ([`ModelConfig::rope_freq_factors`]).
//! - Mistral is stored as `llama`. Its sliding window, if any, is ignored for a GGUF file, as by
//!   llama.cpp, and applied to every layer for a Hugging Face folder, as by transformers
//!   ([`ModelConfig::sliding_window`] is set only then).

use super::attention::LayerKv;
use super::layers::{AttentionOptions, GatedMlp, Rope, SelfAttention};
use super::ops::{GatedActivation, RopeStyle, add_assign, add_to_kept_rows, par_copy, rms_norm};
use super::{BlockContext, Loader, ModelError};
use crate::gguf::ModelConfig;

/// Llama's blocks.
pub fn blocks(loader: &mut Loader, config: &ModelConfig) -> Result<Vec<Block>, ModelError> {
    (0..config.n_layers)
        .map(|layer| {
            let options = AttentionOptions::local_or_global(config, layer, RopeStyle::Interleaved);
            Block::load(loader, layer, config, options, GatedActivation::Silu)
        })
        .collect()
}

/// A pre-norm decoder block: RMSNorm before attention and before the gated MLP.
#[derive(Debug)]
pub struct Block {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    ffn_norm: Vec<f32>,
    mlp: GatedMlp,
    eps: f32,
}

impl Block {
    /// Loads layer `layer`'s weights (`blk.{layer}.*`); fails on a missing or misshapen
    /// tensor.
    pub fn load(
        loader: &mut Loader,
        layer: usize,
        config: &ModelConfig,
        options: AttentionOptions,
        act: GatedActivation,
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        Ok(Self {
            attn_norm: loader.vector(&name("attn_norm.weight"), config.hidden)?,
            attn: SelfAttention::load(loader, layer, config, options)?,
            ffn_norm: loader.vector(&name("ffn_norm.weight"), config.hidden)?,
            mlp: GatedMlp::load(loader, layer, config, act)?,
            eps: config.rms_eps,
        })
    }

    /// The RoPE this block needs a table for.
    pub fn rope(&self) -> Rope {
        self.attn.rope()
    }

    /// Runs the block on the residual stream `x` `[rows × hidden]` in place, after the cached
    /// `prefix` keys/values when given; returns this batch's keys/values for the layer. With
    /// `keep`, `x` leaves with only the rows listed (see [`SelfAttention::forward`]).
    pub fn forward(
        &self,
        x: &mut Vec<f32>,
        ctx: &BlockContext,
        prefix: Option<&LayerKv>,
        keep: Option<&[usize]>,
    ) -> LayerKv {
        let mut normed = par_copy(x);
        rms_norm(&mut normed, &self.attn_norm, self.eps);
        let (attn, kv) = self.attn.forward(&normed, ctx, prefix, keep);
        add_to_kept_rows(x, self.attn_norm.len(), &attn, keep);
        let n = x.len() / self.attn_norm.len();
        let mut normed = par_copy(x);
        rms_norm(&mut normed, &self.ffn_norm, self.eps);
        add_assign(x, &self.mlp.forward(&normed, n));
        kv
    }
}
