//! The language-model runtime of pstat: GGUF models run in-process on candle.
//!
//! - [`gguf`]: opening a GGUF file, typed metadata, the decoder's [`gguf::ModelConfig`].
//! - [`registry`]: the embedded models, fetched from PyPI into a verified local cache.

pub mod gguf;
pub mod registry;

pub use gguf::{Arch, GgufError, GgufFile, ModelConfig};
