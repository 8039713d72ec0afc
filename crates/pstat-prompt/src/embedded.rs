//! The in-process backend: the GGUF's own tokenizer and chat template, and the candle runtime
//! scoring every statement of a unit against one prefix KV cache.

use crate::error::PromptError;
use crate::scoring::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens, PromptCodec};
use pstat_lm::chat::{ChatError, Message};
use pstat_lm::input::ModelText;
use pstat_lm::{LanguageModel, PrefixCache};
use std::path::Path;
use std::sync::Arc;

/// Statements per scoring call: the granularity of progress reports (the runtime packs each
/// call into forward passes of its own size) and of a unit's checkpoints.
pub const STATEMENTS_PER_CALL: usize = 64;

/// Tokenizer and (for chat models) chat template of a model.
pub struct EmbeddedCodec {
    text: Arc<ModelText>,
    origin: String,
}

impl EmbeddedCodec {
    /// Load the tokenizer and, when the model has one, the chat template of the GGUF file or
    /// Hugging Face folder at `path`; [`PromptError::Tokenizer`] naming the path when either
    /// cannot be read.
    pub fn open(path: &Path) -> Result<Self, PromptError> {
        let text = ModelText::load(path).map_err(|e| PromptError::Tokenizer {
            what: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Self::new(Arc::new(text), path))
    }

    /// The codec over a model's already loaded tokenizer and chat template, read from `path`
    /// (named in errors).
    pub fn new(text: Arc<ModelText>, path: &Path) -> Self {
        EmbeddedCodec {
            text,
            origin: path.display().to_string(),
        }
    }

    /// Whether the model has a chat template (and so can take the chat format).
    pub fn has_chat_template(&self) -> bool {
        self.text.chat.is_some()
    }

    fn error(&self, e: impl std::fmt::Display) -> PromptError {
        PromptError::Tokenizer {
            what: self.origin.clone(),
            message: e.to_string(),
        }
    }
}

impl PromptCodec for EmbeddedCodec {
    fn render_chat(&self, user: &str, prefill: &str) -> Result<String, PromptError> {
        let chat = self.text.chat.as_ref().ok_or_else(|| {
            self.error("the model has no chat template, so it is a base model: use --format plain")
        })?;
        chat.render_with_prefill(&[Message::new("user", user)], prefill)
            .map_err(|e| self.error(e))
    }

    fn render_chat_with_system(
        &self,
        system: &str,
        user: &str,
        prefill: &str,
    ) -> Result<String, PromptError> {
        let chat = self.text.chat.as_ref().ok_or_else(|| {
            self.error("the model has no chat template, so it is a base model: use --format plain")
        })?;
        let turns = [Message::new("system", system), Message::new("user", user)];
        match chat.render_with_prefill(&turns, prefill) {
            Ok(text) => Ok(text),
            // Templates without a system role (Gemma 1 and 2) refuse one: the authors' configs
            // give those models one user turn holding the system text, a blank line and the
            // question.
            Err(ChatError::Template { .. }) => chat
                .render_with_prefill(
                    &[Message::new("user", &format!("{system}\n\n{user}"))],
                    prefill,
                )
                .map_err(|e| self.error(e)),
            Err(e) => Err(self.error(e)),
        }
    }

    fn encode_prompt_with_bos(&self, rendered: &str) -> Result<Vec<u32>, PromptError> {
        self.text
            .tokenizer
            .encode(rendered, true, true)
            .map_err(|e| self.error(e))
    }

    fn encode_prompt(&self, rendered: &str) -> Result<Vec<u32>, PromptError> {
        match &self.text.chat {
            // Adds BOS by the tokenizer's rule unless the template already wrote it.
            Some(chat) => chat
                .tokenize(&self.text.tokenizer, rendered)
                .map_err(|e| self.error(e)),
            None => self
                .text
                .tokenizer
                .encode(rendered, true, true)
                .map_err(|e| self.error(e)),
        }
    }

    fn encode_option(&self, text: &str) -> Result<Vec<u32>, PromptError> {
        self.text
            .tokenizer
            .encode(text, true, false)
            .map_err(|e| self.error(e))
    }

    fn piece(&self, id: u32) -> Result<String, PromptError> {
        Ok(String::from_utf8_lossy(&self.text.tokenizer.token_to_piece(id)).into_owned())
    }
}

/// Scores with a loaded model: the shared prefix once per unit, then every statement's suffix
/// against its KV cache.
pub struct EmbeddedScorer<'m> {
    model: &'m LanguageModel,
    options: OptionTokens,
    /// The last prefix's KV cache: a unit scored block by block (checkpoints) computes it once.
    prefix: Option<PrefixCache>,
}

impl<'m> EmbeddedScorer<'m> {
    /// A scorer that reads the probabilities of `options`' tokens from `model`; the prefix cache
    /// starts empty.
    pub fn new(model: &'m LanguageModel, options: OptionTokens) -> Self {
        EmbeddedScorer {
            model,
            options,
            prefix: None,
        }
    }
}

impl OptionScorer for EmbeddedScorer<'_> {
    fn score(
        &mut self,
        prompts: &EncodedPrompts,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<OptionProbs>, PromptError> {
        let prefix = match prompts.shared {
            0 => None,
            _ => {
                let tokens = prompts.prefix();
                if self.prefix.as_ref().is_none_or(|p| p.tokens != tokens) {
                    // The old cache goes first: two would double the peak memory.
                    self.prefix = None;
                    self.prefix = Some(self.model.prefix(tokens)?);
                }
                self.prefix.as_ref()
            }
        };
        let mut out = Vec::with_capacity(prompts.len());
        for chunk in prompts.suffixes().chunks(STATEMENTS_PER_CALL) {
            let scores = self.model.score_options(prefix, chunk, &self.options.ids)?;
            out.extend(scores.iter().map(|s| OptionProbs {
                p: [0, 1, 2].map(|j| s.logprobs[j].exp()),
                leftover: s.leftover,
            }));
            progress(chunk.len());
        }
        Ok(out)
    }

    fn identity(&self) -> String {
        format!("embedded:{}", self.model.sha256())
    }
}
