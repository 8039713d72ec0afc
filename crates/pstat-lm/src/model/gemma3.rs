//! Gemma 3 decoder blocks, as llama.cpp's `llm_build_gemma3_iswa` computes them, and the
//! sandwich-norm block it shares with Gemma 2 ([`super::gemma2`]):
//!
//! ```text
//! h = x + post_attn_norm(W_o · attn(rope(q_norm(W_q·norm(x))), rope(k_norm(W_k·norm(x))), W_v·norm(x)))
//! y = h + post_ffw_norm(W_down · (gelu_tanh(W_gate·norm(h)) ⊙ W_up·norm(h)))
//! ```
//!
//! - Embeddings are scaled by sqrt(hidden) (done by the model, not the block).
//! - Layer i attends globally when (i + 1) is a multiple of the sliding-window pattern (6 by
//!   default), with RoPE base `rope.freq_base` (1e6) and the file's RoPE scaling; the others
//!   attend to the last `attention.sliding_window` positions with RoPE base
//!   `rope.freq_base_swa` (10000 by default) and no scaling. RoPE pairs are NEOX-style.
//! - q·k is scaled by 1/sqrt(head width), by 1/sqrt(hidden / heads) for the 27B model.
//! - The converter folded Gemma's "1 + w" into the stored norm weights, so every norm here is
//!   a plain RMSNorm.

use super::attention::LayerKv;
use super::layers::{AttentionOptions, GatedMlp, Rope, SelfAttention};
use super::ops::{GatedActivation, RopeStyle, add_assign, add_to_kept_rows, par_copy, rms_norm};
use super::{BlockContext, Loader, ModelError};
use crate::gguf::ModelConfig;

/// Gemma 3's blocks.
pub fn blocks(loader: &mut Loader, config: &ModelConfig) -> Result<Vec<Block>, ModelError> {
    (0..config.n_layers)
        .map(|layer| {
            let options = AttentionOptions {
                qk_norm: true,
                ..AttentionOptions::local_or_global(config, layer, RopeStyle::Neox)
            };
            Block::load(loader, layer, config, options)
        })
        .collect()
}

/// A sandwich-norm decoder block: RMSNorm before and after attention and the GELU-tanh MLP.
#[derive(Debug)]
pub struct Block {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    mlp: GatedMlp,
    post_ffw_norm: Vec<f32>,
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
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        let h = config.hidden;
        Ok(Self {
            attn_norm: loader.vector(&name("attn_norm.weight"), h)?,
            attn: SelfAttention::load(loader, layer, config, options)?,
            post_attn_norm: loader.vector(&name("post_attention_norm.weight"), h)?,
            ffn_norm: loader.vector(&name("ffn_norm.weight"), h)?,
            mlp: GatedMlp::load(
                loader,
                layer,
                config,
                GatedActivation::GeluTanh(config.gelu),
            )?,
            post_ffw_norm: loader.vector(&name("post_ffw_norm.weight"), h)?,
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
        let (mut attn, kv) = self.attn.forward(&normed, ctx, prefix, keep);
        rms_norm(&mut attn, &self.post_attn_norm, self.eps);
        add_to_kept_rows(x, self.post_attn_norm.len(), &attn, keep);
        let n = x.len() / self.post_attn_norm.len();
        let mut normed = par_copy(x);
        rms_norm(&mut normed, &self.ffn_norm, self.eps);
        let mut mlp = self.mlp.forward(&normed, n);
        rms_norm(&mut mlp, &self.post_ffw_norm, self.eps);
        add_assign(x, &mlp);
        kv
    }
}
