#![warn(missing_docs)]
//! The tables of a run folder. Every file a run writes for people and for the report has
//! exactly one Rust type here, used by its writer, by the report and by the tests; the
//! helpers read and write them. This crate has no model runtime, so the report does
//! not pull one in.
//!
//! | file                        | type                  |
//! |-----------------------------|-----------------------|
//! | `stability.csv`             | [`StabilityRow`]      |
//! | `comparisons.csv`           | [`ComparisonRow`]     |
//! | `comparison_families.csv`   | [`ComparisonFamilyRow`] |
//! | `agreement.csv`             | [`AgreementRow`]      |
//! | `across_models.csv`         | [`AcrossModelRow`]    |
//! | `across_model_pairs.csv`    | [`AcrossModelPairRow`] |
//! | `sign_tests.csv`            | [`SignTestRow`]       |
//! | `across_models.json`        | [`AcrossModels`]      |
//! | `answers.csv`               | [`AnswerRow`]         |
//! | `resamples.csv`             | [`ResampleRow`]       |
//! | `familiarity.csv`           | [`FamiliarityRow`]    |
//! | `distances.csv`             | [`DistanceRow`]       |
//! | `bigram_rank_frequency.csv` | [`BigramRankRow`]     |
//! | `bigram_distances.csv`      | [`BigramDistanceRow`] |
//! | `clusters.csv`              | [`ClusterRow`]        |
//! | `themes.csv`                | [`ThemeRow`]          |
//! | `relabelled_bags.csv`       | [`RelabelledRow`]     |
//! | `layers.json`               | [`LayerChoice`]       |
//! | `decisions.json`            | [`Decisions`]         |

mod across;
mod agreement;
mod io;
pub mod keys;
mod rows;

pub use across::*;
pub use agreement::AgreementRow;
pub use io::{
    TableError, read_csv, read_json, read_table, read_table_opt, write_csv, write_json, write_table,
};
pub use keys::{
    Baseline, Instantiation, MIN_BASELINE_TRUE, Probe, PromptFormat, UnknownValue, main_k,
};
pub use rows::*;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A CSV table of the run folder.
pub trait Table: Serialize + DeserializeOwned + Clone {
    /// Its file name in the run folder.
    const FILE: &'static str;
    /// Written as a header-only file when there are no rows (readers still see the columns);
    /// `None`: no rows, no file, so readers see "not computed" rather than an empty table.
    const EMPTY_HEADER: Option<&'static [&'static str]> = None;
}
