//! Gemma 2, as llama.cpp's `llm_build_gemma2_iswa` computes it: Gemma 3's sandwich-norm block
//! ([`super::gemma3::Block`]) without q/k norms, with soft-capped attention logits:
//!
//! ```text
//! h = x + post_attn_norm(W_o · attn(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x)))
//! y = h + post_ffw_norm(W_down · (gelu_tanh(W_gate·norm(h)) ⊙ W_up·norm(h)))
//! attn logits ← cap_a · tanh(logits / cap_a)    (attn_logit_softcapping, 50 by default)
//! LM logits   ← cap_f · tanh(logits / cap_f)    (final_logit_softcapping, 30; done by the model)
//! ```
//!
//! - Even layers (0, 2, ...) attend to the last `attention.sliding_window` positions (4096 by
//!   default), odd layers globally; both use the same RoPE unless the file gives
//!   `rope.freq_base_swa`. RoPE pairs are NEOX-style.
//! - Embeddings are scaled by sqrt(hidden) and tied to the LM head; norms are stored as w + 1
//!   by the converter (plain RMSNorm here).
//! - q·k is scaled by 1/sqrt(head width), by 1/sqrt(hidden / heads) for the 27B model.

use super::gemma3::Block;
use super::layers::AttentionOptions;
use super::ops::RopeStyle;
use super::{Loader, ModelError};
use crate::gguf::ModelConfig;

/// Gemma 2's blocks.
pub fn blocks(loader: &mut Loader, config: &ModelConfig) -> Result<Vec<Block>, ModelError> {
    (0..config.n_layers)
        .map(|layer| {
            let options = AttentionOptions {
                softcap: config.attn_softcap,
                ..AttentionOptions::local_or_global(config, layer, RopeStyle::Neox)
            };
            Block::load(loader, layer, config, options)
        })
        .collect()
}
