//! Typed values of the key columns: each has one spelling, used in configs, on the command
//! line and in the tables. Variants are declared in the order of their spellings, so values
//! sort as the tables' text does.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A value that is not one of a key column's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}` (expected {})", expected.join(", "))]
pub struct UnknownValue {
    /// The key column, e.g. `probe` or `prompt format`.
    pub what: &'static str,
    /// The text that was given.
    pub value: String,
    /// The column's spellings, in order.
    pub expected: &'static [&'static str],
}

macro_rules! key_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal, { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in the order of the spellings.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The value's one spelling, as in the tables, configs and command line.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue {
                        what: $what,
                        value: other.to_string(),
                        expected: &[$($text),+],
                    }),
                }
            }
        }
    };
}

key_enum!(
    /// How a perturbation is applied: to a probe on hidden states, or as a prompt context.
    Instantiation, "instantiation", {
        /// The model's answer to the prompt, with Θ as its belief context.
        Behavioral = "behavioral",
        /// The baseline probe (trained without context) reading the hidden states of each
        /// statement after Θ's belief context (beyond the paper).
        Contextual = "contextual",
        /// A probe retrained on hidden states with Θ's labels.
        Representational = "representational",
    }
);

key_enum!(
    /// What judges a statement: a retrained probe, or the model's answer to the prompt. The
    /// default exists only so that a [`crate::StabilityRow`] can be built field by field.
    #[derive(Default)]
    Probe, "probe", {
        /// The difference-of-class-means direction (Appendix J).
        MassMean = "mass_mean",
        /// The behavioral judgment (the model's answer).
        Prompt = "prompt",
        /// The paper's sparse-aware multiple-instance SVM.
        #[default]
        Sawmil = "sawmil",
    }
);

key_enum!(
    /// Which context the behavioral baseline Θ0 gets: none (the paper), or K True training
    /// statements (Appendix G's alternative baseline).
    Baseline, "baseline", {
        /// No context (the paper's baseline).
        Empty = "empty",
        /// K True training statements of the domain (Appendix G).
        True = "true",
    }
);

key_enum!(
    /// How a prompt reaches the model.
    PromptFormat, "prompt format", {
        /// User turn + assistant prefill through the model's chat template (the paper's
        /// choice for chat-tuned models).
        Chat = "chat",
        /// The whole text as one string after the tokenizer's usual BOS.
        Plain = "plain",
    }
);

impl Probe {
    /// The probes retrained on hidden states (the representational and contextual
    /// instantiations), in the order a run's units, figures and tables take them: the primary
    /// probe first.
    pub const REPRESENTATIONAL: &[Probe] = &[Probe::Sawmil, Probe::MassMean];

    /// The paper's primary probe: the one Fig. 3, the layer robustness (Fig. A4) and the
    /// clustering read; every other representational probe is a robustness check (Fig. A7).
    pub const PRIMARY: Probe = Probe::Sawmil;

    /// The representational probes other than the primary one, in their order: the
    /// robustness checks of the probe (Fig. A7 for Mass-Mean).
    pub fn secondary() -> impl Iterator<Item = Probe> {
        Probe::REPRESENTATIONAL
            .iter()
            .copied()
            .filter(|&p| p != Probe::PRIMARY)
    }

    /// Whether the probe is retrained on hidden states (not the behavioral judgment).
    pub fn is_representational(self) -> bool {
        Probe::REPRESENTATIONAL.contains(&self)
    }

    /// The probe's name in the paper, as the report writes it.
    pub fn title(self) -> &'static str {
        match self {
            Probe::MassMean => "Mass-Mean",
            Probe::Prompt => "prompt",
            Probe::Sawmil => "sAwMIL",
        }
    }
}

/// Baselines smaller than this make a retraction rate too noisy to mean anything; such rows
/// are flagged in the table and the report, and `auto` prompts such a chat model in plain.
pub const MIN_BASELINE_TRUE: usize = 20;

impl PromptFormat {
    /// The `auto` rule for a chat model: chat (the paper prompts chat models in chat) unless
    /// its chat-format empty baseline judges fewer than [`MIN_BASELINE_TRUE`] held-out True
    /// statements True, then plain. A small chat model can answer "c" to every chat-formatted
    /// question (SmolLM2-135M: B_true = 0), and rates against an empty belief set say nothing.
    pub fn auto(chat_baseline_true: usize) -> PromptFormat {
        if chat_baseline_true >= MIN_BASELINE_TRUE {
            PromptFormat::Chat
        } else {
            PromptFormat::Plain
        }
    }
}

/// The main context size of a behavioral study: the largest K (the paper's K = 100; the
/// smaller ones are robustness checks). `None` when no K is given.
pub fn main_k(ks: impl IntoIterator<Item = usize>) -> Option<usize> {
    ks.into_iter().max()
}

/// Defaults only so that a [`crate::StabilityRow`] can be built field by field; every writer
/// sets both columns.
impl Default for Instantiation {
    fn default() -> Self {
        Instantiation::Representational
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_in_text_and_serde() {
        for p in Probe::ALL {
            assert_eq!(p.as_str().parse::<Probe>().unwrap(), *p);
            assert_eq!(
                serde_json::to_string(p).unwrap(),
                format!("\"{}\"", p.as_str())
            );
        }
        assert!(Probe::PRIMARY.is_representational());
        assert!(!Probe::Prompt.is_representational());
        let err = "mass-mean".parse::<Probe>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown probe `mass-mean` (expected mass_mean, prompt, sawmil)"
        );
    }
}
