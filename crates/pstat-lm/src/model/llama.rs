//! Llama-family decoder blocks (Llama, Mistral, SmolLM; Qwen 2 adds q/k/v biases and NEOX
//! RoPE), as llama.cpp's `llm_build_llama` / `llm_build_qwen2` compute them:
//!
//! ```text
//! h = x + W_o · attn(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x))
//! y = h + W_down · (silu(W_gate·norm(h)) ⊙ W_up·norm(h))
//! ```
//!
//! The GGUF converter permutes Llama's q/k rows so that RoPE rotates adjacent pairs
//! (llama.cpp's "normal" RoPE); Qwen 2 files are not permuted and use NEOX pairs.

use super::attention::LayerKv;
use super::layers::{AttentionOptions, GatedMlp, SelfAttention};
use super::ops::{GatedActivation, RopeStyle, add_assign, rms_norm};
use super::{BlockContext, Loader, ModelError};
use crate::gguf::{Arch, ModelConfig};

#[derive(Debug)]
pub struct Block {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    ffn_norm: Vec<f32>,
    mlp: GatedMlp,
    eps: f32,
}

impl Block {
    pub fn load(
        loader: &mut Loader,
        layer: usize,
        config: &ModelConfig,
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        let qwen = config.arch == Arch::Qwen2;
        let options = AttentionOptions {
            biases: qwen,
            qk_norm: false,
            rope_base: config.rope_base,
            rope_style: if qwen {
                RopeStyle::Neox
            } else {
                RopeStyle::Interleaved
            },
            window: None,
        };
        Ok(Self {
            attn_norm: loader.vector(&name("attn_norm.weight"), config.hidden)?,
            attn: SelfAttention::load(loader, layer, config, options)?,
            ffn_norm: loader.vector(&name("ffn_norm.weight"), config.hidden)?,
            mlp: GatedMlp::load(loader, layer, config, GatedActivation::Silu)?,
            eps: config.rms_eps,
        })
    }

    /// RoPE bases this block needs tables for.
    pub fn rope_base(&self) -> f32 {
        self.attn.rope_base()
    }

    pub fn forward(&self, x: &mut [f32], ctx: &BlockContext, prefix: Option<&LayerKv>) -> LayerKv {
        let n = ctx.positions.len();
        let mut normed = x.to_vec();
        rms_norm(&mut normed, &self.attn_norm, self.eps);
        let (attn, kv) = self.attn.forward(&normed, ctx, prefix);
        add_assign(x, &attn);
        let mut normed = x.to_vec();
        rms_norm(&mut normed, &self.ffn_norm, self.eps);
        add_assign(x, &self.mlp.forward(&normed, n));
        kv
    }
}
