//! Gemma 1, as llama.cpp's `llm_build_gemma` computes it: Llama's pre-norm block
//! ([`super::llama::Block`]) with a GELU-tanh gate and NEOX RoPE.
//!
//! - Embeddings are multiplied by sqrt(hidden) (done by the model) and tied to the LM head.
//! - Heads may be wider than hidden / heads (Gemma 7B: 16 × 256 on a 3072-wide stream); q·k is
//!   scaled by 1/sqrt(head width).
//! - Gemma's RMSNorm multiplies by (1 + w); the GGUF converter stores w + 1, so every norm
//!   here is a plain RMSNorm.

use super::layers::AttentionOptions;
use super::llama::Block;
use super::ops::{GatedActivation, RopeStyle};
use super::{Loader, ModelError};
use crate::gguf::ModelConfig;

/// Gemma 1's blocks.
pub fn blocks(loader: &mut Loader, config: &ModelConfig) -> Result<Vec<Block>, ModelError> {
    (0..config.n_layers)
        .map(|layer| {
            let options = AttentionOptions::global(config, RopeStyle::Neox);
            Block::load(
                loader,
                layer,
                config,
                options,
                GatedActivation::GeluTanh(config.gelu),
            )
        })
        .collect()
}
