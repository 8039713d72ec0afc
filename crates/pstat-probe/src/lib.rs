#![warn(missing_docs)]
//! Truth probes on per-token activations (paper §3.2, §4.2, Appendices B.1.4 and J).
//!
//! - [`SawMilParams`]: the sAwMIL probe (two-stage sparse-aware MIL SVM) with its C search.
//! - [`MassMeanParams`]: the Mass-Mean probe on last tokens.
//! - Both fit a [`TrainingSet`] into a [`TrainedProbe`] through [`ProbeParams::fit`]; a
//!   probe scores a statement's bag of token rows and saves as safetensors.
//! - [`readout`]: the registry of the representational probes ([`Probe::REPRESENTATIONAL`]),
//!   the one place that maps each to its module. A new probe is its variant of [`Probe`], its
//!   module implementing [`ProbeParams`], its arm in [`readout`] and its settings in the run
//!   config; the study, the costs and the report read every registered probe alike.
//! - [`gaussian_noise_bags`]: the Noise condition's matched Gaussian activation sequences.
//! - [`auc`]: the veracity-layer criterion.
//!
//! Pure Rust, no tensor library: the QP is solved in primal w-space ([`qp`]).

pub mod bags;
/// The crate's error type, [`ProbeError`].
pub mod error;
pub mod linalg;
pub mod massmean;
pub mod metrics;
pub mod milfile;
pub mod noise;
pub mod perturbation;
pub mod probe;
pub mod qp;
pub mod sawmil;
pub use sawmil::search;
pub mod standardize;

pub use bags::{Bags, KNOWN_POSITIVES, TrainingSet};
pub use error::{ProbeError, Result};
pub use massmean::MassMeanParams;
pub use metrics::{auc, average_precision};
pub use noise::{gaussian_noise_bags, noise_count};
pub use probe::{CSetting, NoiseFloorRefit, ProbeParams, Readout, SearchedC, TrainedProbe};
pub use pstat_tables::Probe;
pub use sawmil::{SawMilParams, SawMilReport};
pub use standardize::Standardizer;

/// How a registered probe's statement score reads a bag, by its key column value; `None` for
/// [`Probe::Prompt`], the behavioral judgment, which is no trained probe. The match has an arm
/// per variant, so a variant added to [`Probe`] is not compiled until it is registered here.
pub fn readout(probe: Probe) -> Option<Readout> {
    match probe {
        Probe::MassMean => Some(massmean::READOUT),
        Probe::Prompt => None,
        Probe::Sawmil => Some(sawmil::READOUT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registered_probes_are_the_representational_ones() {
        for &probe in Probe::ALL {
            assert_eq!(
                readout(probe).is_some(),
                probe.is_representational(),
                "{probe}"
            );
        }
    }
}
