#![warn(missing_docs)]
//! The behavioral instantiation of P-StaT (Section 4.4.2): g_pr(s, Θ) prepends a belief
//! context C_Θ to a held-out True statement, asks the three-option question and takes the
//! argmax of p(a), p(b), p(c); a is True, b and c are Not True.
//!
//! - [`template`]: the prompt text, verbatim from the paper, chat or plain.
//! - [`context`]: seeded belief-context draws from the training split (K, Noise, baselines,
//!   resamples, the order-shuffle control).
//! - [`scoring`]: the [`PromptCodec`]/[`OptionScorer`] seam, shared-prefix tokenization,
//!   option ids and the judgment rule.
//! - [`embedded`]: the in-process GGUF runtime (prefix KV cache reused across statements).
//! - [`server`]: OpenAI-compatible and llama.cpp completion servers.
//! - [`record`], [`study`], [`tables`]: units on disk (resumable), stability rows, answer
//!   distributions and the spread over draws.

pub mod context;
pub mod embedded;
/// The crate's error type, [`PromptError`].
pub mod error;
pub mod progress;
pub mod record;
pub mod scoring;
pub mod server;
pub mod study;
pub mod tables;
pub mod template;

#[cfg(test)]
mod testdata;

pub use context::{Baseline, BeliefContext, ContextSpec, Draw, TrainingPool};
pub use error::PromptError;
pub use progress::{Progress, Silent};
pub use record::Judgment;
pub use scoring::{Answer, EncodedPrompts, OptionProbs, OptionScorer, OptionTokens, PromptCodec};
pub use study::{StudySpec, UnitResult, run_selected_units, run_units};
pub use tables::{Summary, summarize};
pub use template::{PromptFormat, Protocol};
