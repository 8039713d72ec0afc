#![warn(missing_docs)]

//! The part of P-StaT that needs no language model: which statements exist ([`Statement`]),
//! how they are loaded from the bundled CSVs ([`load`]), how they are split ([`split`]), what
//! each perturbation Θ labels True ([`condition`]), and the small I/O conventions every later
//! stage shares ([`artifact`]: atomic writes and content hashes).

pub mod activations;
pub mod artifact;
pub mod condition;
/// Errors for user-supplied data ([`DataError`]) and malformed files.
pub mod error;
pub mod load;
pub mod split;
/// Statements and their classification: domains, the kinds of Table 1 and the
/// True/False/Neither labels of the trilemma.
pub mod statement;
pub mod stats;
pub mod vllm;

pub use condition::{Condition, ConditionSet, ContextSource};
pub use error::DataError;
pub use load::{DataRoot, Dataset, load_all, load_domain};
pub use split::{Split, SplitAssignment, SplitConfig};
pub use statement::{Domain, Kind, Label, Statement};
