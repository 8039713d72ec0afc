//! The seam between prompts and a model: a [`PromptCodec`] turns prompt text into token ids
//! (tokenizer + chat template), an [`OptionScorer`] returns p(a), p(b), p(c) as the next token
//! after each prompt. The embedded runtime and HTTP servers implement the scorer; tests use a
//! fake one.

use crate::error::PromptError;
use crate::template::{LABELS, PREFILL, PromptFormat, Protocol, authors, plain_text, user_turn};
use pstat_lm::extract::shared_prefix_len;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A model's tokenizer and chat template, as far as prompting needs them. `Sync`: a unit's
/// prompts are tokenized on every worker at once.
pub trait PromptCodec: Sync {
    /// The exact string a chat model reads: `user` as the only user turn through the chat
    /// template, then an open assistant turn that starts with `prefill` (no end-of-turn).
    fn render_chat(&self, user: &str, prefill: &str) -> Result<String, PromptError>;
    /// As [`PromptCodec::render_chat`] with a system turn before the user turn; where the
    /// template has no system role, `system`, a blank line and `user` as one user turn (the
    /// authors' rule for such models).
    fn render_chat_with_system(
        &self,
        system: &str,
        user: &str,
        prefill: &str,
    ) -> Result<String, PromptError> {
        let _ = (system, user, prefill);
        Err(PromptError::Unsupported(
            "this backend cannot render a system turn (protocol = \"authors\")".into(),
        ))
    }
    /// Token ids of a rendered chat prompt as the authors' code makes them: the tokenizer's
    /// special tokens added to the rendered text even where the template wrote BOS itself
    /// (two BOS for such templates).
    fn encode_prompt_with_bos(&self, rendered: &str) -> Result<Vec<u32>, PromptError> {
        let _ = rendered;
        Err(PromptError::Unsupported(
            "this backend cannot tokenize the authors' way (protocol = \"authors\")".into(),
        ))
    }
    /// Token ids of a rendered prompt: the tokenizer's usual BOS, then the text with special
    /// tokens (template markers) recognised.
    fn encode_prompt(&self, rendered: &str) -> Result<Vec<u32>, PromptError>;
    /// Token ids of `text` as `tokenizer.encode` returns them (usual special tokens included),
    /// the input of the option-id rule.
    fn encode_option(&self, text: &str) -> Result<Vec<u32>, PromptError>;
    /// The text of one token, as a server reports it in its log-probabilities.
    fn piece(&self, id: u32) -> Result<String, PromptError>;
}

/// Renders the prompt of one statement under one context, as the paper prints it.
pub fn render(
    codec: &dyn PromptCodec,
    format: PromptFormat,
    context: &[&str],
    statement: &str,
) -> Result<String, PromptError> {
    render_as(codec, Protocol::Paper, format, context, statement)
}

/// Renders the prompt of one statement under one context in `protocol`'s text.
pub fn render_as(
    codec: &dyn PromptCodec,
    protocol: Protocol,
    format: PromptFormat,
    context: &[&str],
    statement: &str,
) -> Result<String, PromptError> {
    match (protocol, format) {
        (Protocol::Paper, PromptFormat::Chat) => {
            codec.render_chat(&user_turn(context, statement), PREFILL)
        }
        (Protocol::Paper, PromptFormat::Plain) => Ok(plain_text(context, statement)),
        (Protocol::Authors, PromptFormat::Chat) => codec.render_chat_with_system(
            authors::SYSTEM,
            &authors::user_turn(context, statement),
            authors::PREFILL,
        ),
        (Protocol::Authors, PromptFormat::Plain) => Ok(authors::plain_text(context, statement)),
    }
}

/// The token ids counted for a, b and c (notes §7.3: "L" and " L" encoded with special tokens,
/// ids shared between labels dropped), with their texts for servers that key by text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionTokens {
    /// Per option (a, b, c), the token ids whose probabilities are summed into it; no id is
    /// shared between options.
    pub ids: Vec<Vec<u32>>,
    /// The text of each id of `ids`, in the same shape.
    pub pieces: Vec<Vec<String>>,
}

impl OptionTokens {
    /// Encode "a", " a", "b", " b", "c", " c" with `codec` and keep each option's ids that no
    /// other option has; fails when the codec does or an option is left without an id.
    pub fn new(codec: &dyn PromptCodec) -> Result<Self, PromptError> {
        let labels: Vec<String> = LABELS.iter().map(|l| l.to_string()).collect();
        let mut encoded = Vec::new();
        for label in &labels {
            encoded.push((label.clone(), codec.encode_option(label)?));
            encoded.push((
                format!(" {label}"),
                codec.encode_option(&format!(" {label}"))?,
            ));
        }
        let lookup = |text: &str| {
            encoded
                .iter()
                .find(|(t, _)| t == text)
                .map(|(_, ids)| ids.clone())
                .unwrap_or_default()
        };
        let ids = pstat_lm::option_token_ids(&labels, lookup)?;
        let pieces = ids
            .iter()
            .map(|group| group.iter().map(|&id| codec.piece(id)).collect())
            .collect::<Result<_, _>>()?;
        Ok(OptionTokens { ids, pieces })
    }
}

/// The prompts of one unit (one context, many statements), tokenized, with the length of the
/// token prefix they all share: computed once, then every statement continues it.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPrompts {
    /// The full prompt texts, one per statement.
    pub texts: Vec<String>,
    /// Each prompt's token ids, in the order of `texts`.
    pub tokens: Vec<Vec<u32>>,
    /// Leading tokens identical in every prompt; every prompt keeps at least one token after
    /// it, so each has a suffix whose last position predicts the answer.
    pub shared: usize,
}

impl EncodedPrompts {
    /// Tokenizes full prompts and takes their longest common token prefix. Tokenizing whole
    /// prompts (rather than prefix and suffix apart) keeps merges across the boundary exact.
    pub fn new(codec: &dyn PromptCodec, texts: Vec<String>) -> Result<Self, PromptError> {
        Self::for_protocol(codec, texts, Protocol::Paper, PromptFormat::Plain)
    }

    /// As [`EncodedPrompts::new`], tokenized as `protocol` does for `format`: the authors'
    /// chat prompts get the tokenizer's BOS even after the template's.
    pub fn for_protocol(
        codec: &dyn PromptCodec,
        texts: Vec<String>,
        protocol: Protocol,
        format: PromptFormat,
    ) -> Result<Self, PromptError> {
        let encode = |t: &String| match (protocol, format) {
            (Protocol::Authors, PromptFormat::Chat) => codec.encode_prompt_with_bos(t),
            _ => codec.encode_prompt(t),
        };
        // Each prompt holds the whole context, so tokenizing a unit's prompts is seconds of
        // work; they are independent and keep their order.
        let tokens: Vec<Vec<u32>> = texts.par_iter().map(encode).collect::<Result<_, _>>()?;
        let shared = shared_prefix_len(&tokens);
        Ok(EncodedPrompts {
            texts,
            tokens,
            shared,
        })
    }

    /// Number of prompts.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are no prompts.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The shared token prefix (the first prompt's first `shared` tokens; empty when there are
    /// no prompts).
    pub fn prefix(&self) -> &[u32] {
        self.tokens.first().map_or(&[], |t| &t[..self.shared])
    }

    /// Each prompt's tokens after the shared prefix.
    pub fn suffixes(&self) -> Vec<Vec<u32>> {
        self.tokens
            .iter()
            .map(|t| t[self.shared..].to_vec())
            .collect()
    }
}

/// p(a), p(b), p(c) after one prompt, and the mass on every other token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OptionProbs {
    /// p(a), p(b), p(c), in label order.
    pub p: [f64; 3],
    /// 1 − (p(a) + p(b) + p(c)): the probability of every other token.
    pub leftover: f64,
}

impl OptionProbs {
    /// From the three options' probabilities; the leftover is what they leave of 1.
    pub fn from_probs(p: [f64; 3]) -> Self {
        OptionProbs {
            p,
            leftover: 1.0 - p.iter().sum::<f64>(),
        }
    }

    /// argmax over a, b, c (ties go to the earlier label, as numpy's argmax does).
    pub fn answer(&self) -> Answer {
        let best = (1..3).fold(0, |best, i| if self.p[i] > self.p[best] { i } else { best });
        Answer::ALL[best]
    }
}

/// The chosen option; a is True, b and c are Not True.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// a. "The statement is true." (judged True)
    A,
    /// b. "The statement is false." (Not True)
    B,
    /// c. "The statement is neither true nor false." (Not True)
    C,
}

impl Answer {
    /// a, b, c in label order.
    pub const ALL: [Answer; 3] = [Answer::A, Answer::B, Answer::C];

    /// Whether the answer judges the statement True (only a does).
    pub fn judged_true(self) -> bool {
        self == Answer::A
    }
}

/// Scores prompts: the next-token probabilities of the answer options after each prompt.
pub trait OptionScorer {
    /// One [`OptionProbs`] per prompt, in order. `progress(n)` is called as each batch of `n`
    /// prompts is done.
    fn score(
        &mut self,
        prompts: &EncodedPrompts,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<OptionProbs>, PromptError>;

    /// What produced the scores (model file hash or server address and model), recorded with
    /// the judgments so a resumed run never mixes backends.
    fn identity(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_is_the_argmax_and_only_a_is_true() {
        let p = OptionProbs::from_probs([0.2, 0.1, 0.3]);
        assert_eq!(p.answer(), Answer::C);
        assert!((p.leftover - 0.4).abs() < 1e-12);
        assert!(!p.answer().judged_true());
        assert_eq!(OptionProbs::from_probs([0.3, 0.3, 0.1]).answer(), Answer::A);
        assert!(Answer::A.judged_true() && !Answer::B.judged_true());
    }
}
