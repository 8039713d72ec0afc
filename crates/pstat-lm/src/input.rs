//! How a statement is fed to a model to read its activations (notes §3.2): a base model reads
//! BOS + statement; a chat model reads the statement as the only user message, rendered by its
//! own chat template without a generation prompt (so the bag ends with the end-of-turn tokens,
//! as upstream).

use crate::chat::{ChatError, ChatTemplate, Message};
use crate::runtime::{LanguageModel, LmError};
use crate::tokenizer::{Tokenizer, TokenizerError};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
/// Why a statement could not be encoded for a model.
pub enum InputError {
    /// Reading or rendering the chat template failed.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// Loading the tokenizer or tokenizing failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The model failed.
    #[error(transparent)]
    Lm(#[from] LmError),
    /// Reading the GGUF file failed.
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
}

/// A model's tokenizer and, for a chat model, its chat template: read once from the model's
/// GGUF file or Hugging Face folder and shared by everything that turns text into its tokens
/// (the statement encoder, the prompt codec).
pub struct ModelText {
    /// The model's tokenizer.
    pub tokenizer: Tokenizer,
    /// The model's chat template; `None` for a base model.
    pub chat: Option<ChatTemplate>,
}

impl ModelText {
    /// Reads the tokenizer and, when the model has one, the chat template at `path`.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let tokenizer = Tokenizer::load(path)?;
        let chat = match ChatTemplate::load(path, &tokenizer) {
            Ok(t) => Some(t),
            Err(ChatError::NoTemplate(_)) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(ModelText { tokenizer, chat })
    }
}

/// Turns statements into a model's input tokens: as the only user turn of its chat template
/// when it has one, else as BOS followed by the statement.
pub struct StatementEncoder {
    text: Arc<ModelText>,
    signature: String,
}

impl StatementEncoder {
    /// Chat format when the model (GGUF or Hugging Face folder) has a chat template, plain
    /// otherwise.
    pub fn for_model(lm: &LanguageModel) -> Result<Self, InputError> {
        Self::new(Arc::new(ModelText::load(lm.path())?))
    }

    /// The encoder over a model's already loaded tokenizer and chat template.
    pub fn new(text: Arc<ModelText>) -> Result<Self, InputError> {
        let signature = match &text.chat {
            None => "plain: BOS + statement".to_string(),
            Some(t) => {
                // The template's rendering of a fixed message identifies it.
                let probe = t.render(&[Message::new("user", "x")], false)?;
                let digest = pstat_data::artifact::sha256_hex(probe.as_bytes());
                format!(
                    "chat: statement as the only user turn, template {}",
                    &digest[..16]
                )
            }
        };
        Ok(StatementEncoder { text, signature })
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.text.tokenizer
    }

    /// The model's chat template; `None` for a base model (plain format).
    pub fn chat(&self) -> Option<&ChatTemplate> {
        self.text.chat.as_ref()
    }

    /// Token ids fed for `statement` when reading activations.
    pub fn encode(&self, statement: &str) -> Result<Vec<u32>, InputError> {
        match &self.text.chat {
            Some(t) => {
                let rendered = t.render(&[Message::new("user", statement)], false)?;
                Ok(t.tokenize(&self.text.tokenizer, &rendered)?)
            }
            None => Ok(self.text.tokenizer.encode(statement, true, false)?),
        }
    }

    /// [`StatementEncoder::encode`] with the index range of the tokens that come from the
    /// statement's own text: no BOS, no chat-template tokens, no end-of-turn. A token that
    /// straddles the statement's first or last byte counts as the statement's.
    pub fn encode_with_statement_span(
        &self,
        statement: &str,
    ) -> Result<(Vec<u32>, Range<usize>), InputError> {
        let (tokens, text) = match &self.text.chat {
            Some(t) => {
                let rendered = t.render(&[Message::new("user", statement)], false)?;
                let start = rendered.find(statement).ok_or_else(|| {
                    ChatError::Template {
                        path: "chat template".into(),
                        message: format!(
                            "the rendered user turn does not contain the statement {statement:?} verbatim"
                        ),
                    }
                })?;
                (
                    t.tokenize_with_offsets(&self.text.tokenizer, &rendered)?,
                    start..start + statement.len(),
                )
            }
            None => (
                self.text
                    .tokenizer
                    .encode_with_offsets(statement, true, false)?,
                0..statement.len(),
            ),
        };
        let own: Vec<usize> = tokens
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| !r.is_empty() && r.start < text.end && r.end > text.start)
            .map(|(i, _)| i)
            .collect();
        let span = match (own.first(), own.last()) {
            (Some(&a), Some(&b)) => a..b + 1,
            _ => 0..0,
        };
        Ok((tokens.into_iter().map(|(id, _)| id).collect(), span))
    }

    /// The statement as the model reads it plainly (BOS + statement, whatever the model's
    /// kind), with each token's byte range in `statement`: the familiarity analysis's input.
    pub fn encode_plain_with_offsets(
        &self,
        statement: &str,
    ) -> Result<Vec<(u32, Range<usize>)>, InputError> {
        let mut tokens = self
            .text
            .tokenizer
            .encode_with_offsets(statement, true, false)?;
        // Models whose metadata says not to add BOS (SmolLM2) still get one when they have it:
        // Appendix H scores every statement token, and the first needs a context.
        if let Some(bos) = self.text.tokenizer.bos_id()
            && tokens.first().map(|t| t.0) != Some(bos)
        {
            tokens.insert(0, (bos, 0..0));
        }
        Ok(tokens)
    }

    /// Names the input format, for cache keys and provenance.
    pub fn signature(&self) -> String {
        self.signature.clone()
    }
}
