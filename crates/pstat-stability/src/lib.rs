//! Section 3.3 of the paper: compare the belief set of the baseline Θ0 with that of a
//! perturbation Θ over held-out True statements.
//!
//! - B_true(Θ0) = held-out True statements judged True under Θ0; B_not_true(Θ0) the rest.
//! - Retractions R = B_true(Θ0) \ B_true(Θ); expansions E = B_true(Θ) \ B_true(Θ0).
//! - ρ_R = |R| / |B_true(Θ0)|, ρ_E = |E| / |B_not_true(Θ0)|, each with a seeded percentile
//!   bootstrap interval over the held-out statements. An empty denominator makes a rate
//!   undefined (`None`), never 0.
//! - Beyond the paper: paired tests of ρ_R(Θa) − ρ_R(Θb) with Holm's correction per claim
//!   and sign tests across models ([`paired`]); the authors' across-model tables
//!   ([`aggregate`]); statement-level agreement of two instantiations' retractions
//!   ([`agreement`]).

#![warn(missing_docs)]

pub mod aggregate;
pub mod agreement;
pub mod belief;
pub mod paired;
pub mod table;

pub use aggregate::aggregate_across_models;
pub use agreement::{Agreement, retracted_by_all, retraction_agreement};
pub use belief::{BeliefComparison, Bootstrap, Judgments, Rate, StabilityError, compare};
pub use paired::{
    ALPHA, ComparisonFamilyRow, ComparisonRow, MCNEMAR_EXACT, PairedDifference, SignTest,
    SignTestRow, adjust_holm, comparison_families, comparison_row, family_of, holm, mcnemar_exact,
    paired_retraction_difference, sign_test, sign_tests_across_models, smallest_mcnemar_p,
};
pub use table::{MIN_BASELINE_TRUE, RowKey, StabilityRow, stability_row};
