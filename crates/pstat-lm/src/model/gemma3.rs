//! Gemma 3 decoder blocks, as llama.cpp's `llm_build_gemma3_iswa` computes them:
//!
//! ```text
//! h = x + post_attn_norm(W_o · attn(rope(q_norm(W_q·norm(x))), rope(k_norm(W_k·norm(x))), W_v·norm(x)))
//! y = h + post_ffw_norm(W_down · (gelu_tanh(W_gate·norm(h)) ⊙ W_up·norm(h)))
//! ```
//!
//! - Embeddings are scaled by sqrt(hidden) (done by the model, not the block).
//! - Layer i attends globally when (i + 1) is a multiple of the sliding-window pattern (6),
//!   with RoPE base `rope.freq_base` (1e6); the others attend to the last 512 positions with
//!   RoPE base 1e4. RoPE pairs are NEOX-style.
//! - The attention scale is 1/sqrt(head_dim) for the small models (ModelConfig decides).
//! - The converter folded Gemma's "1 + w" into the stored norm weights, so every norm here is
//!   a plain RMSNorm.

use super::attention::LayerKv;
use super::layers::{AttentionOptions, GatedMlp, SelfAttention};
use super::ops::{GatedActivation, RopeStyle, add_assign, rms_norm};
use super::{BlockContext, Loader, ModelError};
use crate::gguf::ModelConfig;

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
    pub fn load(
        loader: &mut Loader,
        layer: usize,
        config: &ModelConfig,
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        let sliding = config.is_sliding(layer);
        let options = AttentionOptions {
            biases: false,
            qk_norm: true,
            rope_base: match (sliding, config.rope_base_local) {
                (true, Some(local)) => local,
                _ => config.rope_base,
            },
            rope_style: RopeStyle::Neox,
            window: if sliding { config.sliding_window } else { None },
        };
        let h = config.hidden;
        Ok(Self {
            attn_norm: loader.vector(&name("attn_norm.weight"), h)?,
            attn: SelfAttention::load(loader, layer, config, options)?,
            post_attn_norm: loader.vector(&name("post_attention_norm.weight"), h)?,
            ffn_norm: loader.vector(&name("ffn_norm.weight"), h)?,
            mlp: GatedMlp::load(loader, layer, config, GatedActivation::GeluTanh)?,
            post_ffw_norm: loader.vector(&name("post_ffw_norm.weight"), h)?,
            eps: config.rms_eps,
        })
    }

    pub fn rope_base(&self) -> f32 {
        self.attn.rope_base()
    }

    pub fn forward(&self, x: &mut [f32], ctx: &BlockContext, prefix: Option<&LayerKv>) -> LayerKv {
        let n = ctx.positions.len();
        let mut normed = x.to_vec();
        rms_norm(&mut normed, &self.attn_norm, self.eps);
        let (mut attn, kv) = self.attn.forward(&normed, ctx, prefix);
        rms_norm(&mut attn, &self.post_attn_norm, self.eps);
        add_assign(x, &attn);
        let mut normed = x.to_vec();
        rms_norm(&mut normed, &self.ffn_norm, self.eps);
        let mut mlp = self.mlp.forward(&normed, n);
        rms_norm(&mut mlp, &self.post_ffw_norm, self.eps);
        add_assign(x, &mlp);
        kv
    }
}
