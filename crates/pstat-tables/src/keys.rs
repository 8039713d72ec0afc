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
    pub what: &'static str,
    pub value: String,
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
            pub const ALL: &[$name] = &[$($name::$variant),+];

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
        Behavioral = "behavioral",
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
        Empty = "empty",
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
        let err = "mass-mean".parse::<Probe>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown probe `mass-mean` (expected mass_mean, prompt, sawmil)"
        );
    }
}
