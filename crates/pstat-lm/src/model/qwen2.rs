//! Qwen 2 (Qwen2.5), as llama.cpp's `llm_build_qwen2` computes it: Llama's pre-norm block
//! ([`super::llama::Block`]) with biases on the q, k and v projections and NEOX RoPE (the
//! converter does not permute Qwen's q/k rows). SiLU gate; the LM head is `output.weight` or
//! the tied embeddings (the small Qwen2.5 models tie them).

use super::layers::AttentionOptions;
use super::llama::Block;
use super::ops::{GatedActivation, RopeStyle};
use super::{Loader, ModelError};
use crate::gguf::ModelConfig;

/// Qwen 2's blocks.
pub fn blocks(loader: &mut Loader, config: &ModelConfig) -> Result<Vec<Block>, ModelError> {
    (0..config.n_layers)
        .map(|layer| {
            let options = AttentionOptions {
                biases: true,
                ..AttentionOptions::global(config, RopeStyle::Neox)
            };
            Block::load(loader, layer, config, options, GatedActivation::Silu)
        })
        .collect()
}
