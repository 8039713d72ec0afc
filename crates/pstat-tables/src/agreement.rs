//! `agreement.csv` (beyond the paper): whether two instantiations of one Θ retract the same
//! held-out True statements.

use crate::Table;
use crate::keys::Instantiation;
use serde::{Deserialize, Serialize};

/// One row of `agreement.csv`: the retraction sets of instantiations `a` and `b` of one
/// (model, domain, Θ) compared statement by statement, in the main configurations (sAwMIL at
/// the veracity layer; the prompt at the main K against the empty baseline, main format).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgreementRow {
    /// The model's name in the run folder.
    pub model: String,
    /// The domain.
    pub domain: String,
    /// The perturbation Θ.
    pub condition: String,
    /// The first instantiation compared.
    pub a: Instantiation,
    /// The second instantiation compared.
    pub b: Instantiation,
    /// Held-out True statements both instantiations judged.
    pub n: usize,
    /// |R_a|.
    pub retracted_a: usize,
    /// |R_b|.
    pub retracted_b: usize,
    /// |R_a ∩ R_b|.
    pub retracted_both: usize,
    /// |R_a ∩ R_b| / |R_a ∪ R_b|; empty when neither retracts anything.
    pub jaccard: Option<f64>,
    /// The Jaccard index's 2.5% bootstrap percentile.
    pub jaccard_lo: Option<f64>,
    /// The Jaccard index's 97.5% bootstrap percentile.
    pub jaccard_hi: Option<f64>,
    /// Cohen's κ of the two "retracted" indicators over the `n` statements; empty when both
    /// are constant and equal (κ is 0/0).
    pub kappa: Option<f64>,
    /// κ's 2.5% bootstrap percentile.
    pub kappa_lo: Option<f64>,
    /// κ's 97.5% bootstrap percentile.
    pub kappa_hi: Option<f64>,
    /// Ids of the statements both retract, `;`-separated in held-out order.
    pub retracted_by_both: String,
}

impl Table for AgreementRow {
    const FILE: &'static str = "agreement.csv";
}
