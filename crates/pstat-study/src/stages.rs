//! The stages of a run, in the order it executes them. The plan and the shards read their
//! units from here ([`crate::Stage::units`]); nothing below imports it.

use crate::behavioral::Behavioral;
use crate::clustering::Clustering;
use crate::contextual::Contextual;
use crate::familiarity::Familiarity;
use crate::representational::Representational;
use crate::stage::Stage;

/// The stages in the order a run executes them.
pub const STAGES: [&dyn Stage; 5] = [
    &Representational,
    &Behavioral,
    &Contextual,
    &Familiarity,
    &Clustering,
];
