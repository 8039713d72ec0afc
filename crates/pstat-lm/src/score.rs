//! Next-token probabilities of answer options for a batch of prompts (`pstat score`).
//!
//! Each option's probability is the summed probability of the token ids of "L" and " L" that
//! no other option shares (the upstream collector's rule, [`option_token_ids`]). A chat prompt
//! is the user turn of the model's chat template (its default system prompt included) and
//! `prefill` starts the assistant turn; otherwise `prefill` is appended to the prompt. The
//! longest token prefix shared by all prompts is computed once and reused, and prompts with
//! the same options are scored together.

use crate::chat::{ChatError, ChatTemplate, Message};
use crate::runtime::{LanguageModel, LmError, option_token_ids};
use crate::tokenizer::{Tokenizer, TokenizerError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One prompt: `{"prompt": "...", "options": ["a","b","c"], "chat": false, "prefill": "..."}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionPrompt {
    /// The prompt text (the user turn when `chat`).
    pub prompt: String,
    /// The answer options, at least two; each is scored as the next token.
    pub options: Vec<String>,
    /// Render the prompt as the only user turn of the model's chat template (default false:
    /// the plain text, with the tokenizer's usual special tokens).
    #[serde(default)]
    pub chat: bool,
    /// Text the answer starts with (the open assistant turn when `chat`); default empty.
    #[serde(default)]
    pub prefill: String,
}

/// Its answer: `{"logprobs": [...], "argmax": i, "option_ids": [[...]], "leftover": p}`.
#[derive(Debug, Clone, Serialize)]
pub struct ScoredPrompt {
    /// ln Σ p(id) over each option's token ids, in option order.
    pub logprobs: Vec<f64>,
    /// Index of the most probable option.
    pub argmax: usize,
    /// The token ids counted for each option ([`crate::runtime::option_token_ids`]).
    pub option_ids: Vec<Vec<u32>>,
    /// 1 − Σ of the options' probabilities: the mass on every other token.
    pub leftover: f64,
}

/// Why prompts could not be scored; [`ScoreError::prompt`] names the prompt where it is one.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// A prompt has fewer than two options.
    #[error("`options` needs at least two entries")]
    TooFewOptions {
        /// The prompt's index.
        index: usize,
    },
    /// An option is empty: it has no token to score.
    #[error("option {option} is empty")]
    EmptyOption {
        /// The prompt's index.
        index: usize,
        /// The option's index (0-based).
        option: usize,
    },
    /// Loading or rendering the chat template for a chat prompt failed.
    // The inner error is the message, not a source: a source would be printed again after it
    // in an error chain.
    #[error("{error}")]
    Chat {
        /// The prompt's index.
        index: usize,
        /// The chat template's error.
        error: ChatError,
    },
    /// Tokenizing a prompt or one of its options failed.
    #[error("{error}")]
    Tokenize {
        /// The prompt's index.
        index: usize,
        /// The tokenizer's error.
        error: TokenizerError,
    },
    /// A prompt, rendered and tokenized, does not fit the model's context.
    #[error("the prompt is {len} tokens, longer than the model's context of {context} tokens")]
    TooLong {
        /// The prompt's index.
        index: usize,
        /// Its length in tokens.
        len: usize,
        /// The model's context length.
        context: usize,
    },
    /// A prompt's options cannot be told apart by their token ids.
    #[error("{error}")]
    Options {
        /// The first prompt with these options.
        index: usize,
        /// Which option has no token id of its own.
        error: LmError,
    },
    /// Loading the tokenizer failed.
    #[error(transparent)]
    Load(#[from] TokenizerError),
    /// Loading or running the model failed.
    #[error(transparent)]
    Model(#[from] LmError),
}

impl ScoreError {
    /// The prompt (0-based) the error is about, if it is about one.
    pub fn prompt(&self) -> Option<usize> {
        match self {
            ScoreError::TooFewOptions { index }
            | ScoreError::EmptyOption { index, .. }
            | ScoreError::Chat { index, .. }
            | ScoreError::Tokenize { index, .. }
            | ScoreError::TooLong { index, .. }
            | ScoreError::Options { index, .. } => Some(*index),
            ScoreError::Load(_) | ScoreError::Model(_) => None,
        }
    }
}

/// Scores `prompts` on the model at `path` (its tokenizer and, for chat prompts, its chat
/// template), in input order.
pub fn score_prompts(
    lm: &LanguageModel,
    path: &Path,
    prompts: &[OptionPrompt],
) -> Result<Vec<ScoredPrompt>, ScoreError> {
    if let Some(index) = prompts.iter().position(|p| p.options.len() < 2) {
        return Err(ScoreError::TooFewOptions { index });
    }
    for (index, p) in prompts.iter().enumerate() {
        if let Some(option) = p.options.iter().position(String::is_empty) {
            return Err(ScoreError::EmptyOption { index, option });
        }
    }
    let tokenizer = Tokenizer::load(path)?;
    let mut template: Option<ChatTemplate> = None;
    let mut sequences = Vec::with_capacity(prompts.len());
    for (index, p) in prompts.iter().enumerate() {
        let chat_err = |error| ScoreError::Chat { index, error };
        let ids = if p.chat {
            if template.is_none() {
                template = Some(ChatTemplate::load(path, &tokenizer).map_err(chat_err)?);
            }
            let chat = template.as_ref().expect("template was just loaded");
            let user = [Message::new("user", &p.prompt)];
            let rendered = if p.prefill.is_empty() {
                chat.render(&user, true)
            } else {
                chat.render_with_prefill(&user, &p.prefill)
            };
            chat.tokenize(&tokenizer, &rendered.map_err(chat_err)?)
                .map_err(chat_err)?
        } else {
            tokenizer
                .encode(&format!("{}{}", p.prompt, p.prefill), true, false)
                .map_err(|error| ScoreError::Tokenize { index, error })?
        };
        let context = lm.config().context_length;
        if ids.len() > context {
            let len = ids.len();
            return Err(ScoreError::TooLong {
                index,
                len,
                context,
            });
        }
        sequences.push(ids);
    }
    let shared = crate::extract::shared_prefix_len(&sequences);
    let prefix = if shared > 0 {
        Some(lm.prefix(&sequences[0][..shared])?)
    } else {
        None
    };
    let mut groups: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
    for (i, p) in prompts.iter().enumerate() {
        groups.entry(p.options.as_slice()).or_default().push(i);
    }
    let mut results: Vec<Option<ScoredPrompt>> = vec![None; prompts.len()];
    for (options, members) in groups {
        let mut encode_err = None;
        let option_ids = option_token_ids(options, |o| {
            tokenizer.encode(o, true, false).unwrap_or_else(|e| {
                encode_err.get_or_insert(e);
                Vec::new()
            })
        });
        if let Some(error) = encode_err {
            return Err(ScoreError::Tokenize {
                index: members[0],
                error,
            });
        }
        let option_ids = option_ids.map_err(|error| ScoreError::Options {
            index: members[0],
            error,
        })?;
        let suffixes: Vec<Vec<u32>> = members
            .iter()
            .map(|&i| sequences[i][shared..].to_vec())
            .collect();
        let scores = lm.score_options(prefix.as_ref(), &suffixes, &option_ids)?;
        for (&i, s) in members.iter().zip(scores) {
            results[i] = Some(ScoredPrompt {
                logprobs: s.logprobs,
                argmax: s.argmax,
                option_ids: option_ids.clone(),
                leftover: s.leftover,
            });
        }
    }
    Ok(results.into_iter().flatten().collect())
}
