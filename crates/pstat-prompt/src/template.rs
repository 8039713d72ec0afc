//! The prompt of Section 4.4.2, verbatim:
//!
//! ```text
//! [optional belief context C_Θ, one statement per line]
//! Is the following statement correct?
//! [statement s]
//! a. The statement is true.
//! b. The statement is false.
//! c. The statement is neither true nor false.
//! The final answer is
//! ```
//!
//! A chat model gets everything but the last line as the user turn and "The final answer is"
//! as the start of its own (assistant) turn, which the template leaves open; a plain prompt is
//! the whole text as one string. The prompt ends without a trailing space so that the answer
//! letter is free to come with or without its leading space (both are scored).

/// The question line, between the context and the statement.
pub const QUESTION: &str = "Is the following statement correct?";
/// The three option lines, in label order.
pub const OPTION_LINES: [&str; 3] = [
    "a. The statement is true.",
    "b. The statement is false.",
    "c. The statement is neither true nor false.",
];
/// The option labels the model chooses between, in the order of [`OPTION_LINES`].
pub const LABELS: [&str; 3] = ["a", "b", "c"];
/// The last line: plain prompts end with it, chat prompts prefill it as the assistant's turn.
pub const PREFILL: &str = "The final answer is";

pub use pstat_tables::PromptFormat;

/// Which text and procedure the behavioral prompts follow: the paper's printed prompt
/// (Section 4.4.2, the default) or the one the authors' released code sends
/// (`response/prompt_templates.py` `ABC3Prompt` and `exp_zero_shot.py` of samanthadies/P-StaT).
/// A run config's top-level `protocol` key; another protocol is another study.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The printed prompt, contexts shuffled, BOS once.
    #[default]
    Paper,
    /// The released code's prompt: an introduction before the context, "Select one of the
    /// following options:", "Please respond with the corresponding letter.", a fact-checking
    /// system turn and the prefill "The final answer is " for chat models; contexts kept in
    /// file order; chat prompts tokenized with the tokenizer's BOS added again.
    Authors,
}

impl Protocol {
    /// The protocol's name in a run config: `paper` or `authors`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Paper => "paper",
            Protocol::Authors => "authors",
        }
    }

    /// Whether this is the paper's protocol (the default).
    pub fn is_paper(&self) -> bool {
        *self == Protocol::Paper
    }
}

/// The strings of the authors' released code (`exp_zero_shot.py` builds the question block,
/// `ABC3Prompt` of `response/prompt_templates.py` adds the options and the answer cue).
pub mod authors {
    /// Opens a non-empty belief context.
    pub const CONTEXT_INTRO: &str = "Let's say that you believe these statements:";
    /// Precedes the option lines.
    pub const SELECT: &str = "Select one of the following options:";
    /// Ends a plain prompt, with one trailing space.
    pub const PLAIN_CUE: &str =
        "Please respond with the corresponding letter. The final answer is ";
    /// The chat models' system turn (merged into the user turn, after a blank line, where
    /// the template has no system role).
    pub const SYSTEM: &str = "You are an expert in fact-checking. Your task is to assist the \
        user by answering questions based on your comprehensive knowledge. Please respond with \
        the corresponding letter.";
    /// The open assistant turn of chat models, with one trailing space.
    pub const PREFILL: &str = "The final answer is ";

    /// The question block: the introduced context (if any), the question and the statement.
    fn block(context: &[&str], statement: &str) -> String {
        let mut lines: Vec<&str> = Vec::new();
        if !context.is_empty() {
            lines.push(CONTEXT_INTRO);
            lines.extend(context);
        }
        lines.push(super::QUESTION);
        lines.push(statement);
        lines.join("\n")
    }

    /// The user turn of a chat prompt: the block, the options, and a final newline.
    pub fn user_turn(context: &[&str], statement: &str) -> String {
        format!(
            "{}\n{SELECT}\n{}\n",
            block(context, statement),
            super::OPTION_LINES.join("\n")
        )
    }

    /// A plain prompt: the block, the options and the answer cue.
    pub fn plain_text(context: &[&str], statement: &str) -> String {
        format!(
            "{}\n{SELECT}\n{}\n{PLAIN_CUE}",
            block(context, statement),
            super::OPTION_LINES.join("\n")
        )
    }
}

/// The belief context as the text before a statement: `protocol`'s context lines (the
/// authors' introduced by their opening line), each ending with a newline; empty for an empty
/// context. What the prompt puts before its question, and what the contextual stage puts
/// before each statement.
pub fn context_block(protocol: Protocol, context: &[&str]) -> String {
    if context.is_empty() {
        return String::new();
    }
    let mut lines: Vec<&str> = Vec::new();
    if protocol == Protocol::Authors {
        lines.push(authors::CONTEXT_INTRO);
    }
    lines.extend(context);
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The user turn: context lines, the question, the statement and the three options, joined by
/// single newlines (no trailing newline).
pub fn user_turn(context: &[&str], statement: &str) -> String {
    let mut lines: Vec<&str> = context.to_vec();
    lines.push(QUESTION);
    lines.push(statement);
    lines.extend(OPTION_LINES);
    lines.join("\n")
}

/// The whole prompt as one string: the user turn, a newline and [`PREFILL`].
pub fn plain_text(context: &[&str], statement: &str) -> String {
    format!("{}\n{PREFILL}", user_turn(context, statement))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_prompt_is_the_papers_text() {
        let text = plain_text(
            &["Paris is a city in France.", "Lyon is a city in France."],
            "The city of Rome is located in Italy.",
        );
        assert_eq!(
            text,
            "Paris is a city in France.\nLyon is a city in France.\n\
             Is the following statement correct?\n\
             The city of Rome is located in Italy.\n\
             a. The statement is true.\n\
             b. The statement is false.\n\
             c. The statement is neither true nor false.\n\
             The final answer is"
        );
    }

    #[test]
    fn without_context_the_question_comes_first() {
        let turn = user_turn(&[], "S.");
        assert!(turn.starts_with("Is the following statement correct?\nS.\na. "));
        assert!(turn.ends_with("neither true nor false."));
    }

    #[test]
    fn the_context_block_is_what_the_prompt_puts_before_its_question() {
        let context = ["A.", "B."];
        for protocol in [Protocol::Paper, Protocol::Authors] {
            let block = context_block(protocol, &context);
            let prompt = match protocol {
                Protocol::Paper => user_turn(&context, "S."),
                Protocol::Authors => authors::user_turn(&context, "S."),
            };
            assert!(
                prompt.starts_with(&format!("{block}{QUESTION}\n")),
                "{prompt}"
            );
            assert!(block.ends_with("B.\n"));
        }
        assert_eq!(context_block(Protocol::Paper, &[]), "");
    }

    #[test]
    fn formats_round_trip() {
        for f in [PromptFormat::Chat, PromptFormat::Plain] {
            assert_eq!(f.as_str().parse::<PromptFormat>().unwrap(), f);
        }
        assert!("json".parse::<PromptFormat>().is_err());
    }
}
