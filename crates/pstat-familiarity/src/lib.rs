//! Is a statement type familiar, or only lexically alike? The analyses of Fig. 2 and
//! Appendix H:
//! - [`bigram`]: character-bigram statistics of the entity strings (Fig. 2 a–c);
//! - [`distance`]: within-group distances of veracity-layer representations (Fig. 2 d);
//! - [`object_tokens`]: Fam(s), the mean object-token probability (Fig. 2 e, Tables A6–A8);
//! - [`summary`]: per-kind means with bootstrap intervals, as written to CSV.

#![warn(missing_docs)]

pub mod bigram;
pub mod distance;
pub mod object_tokens;
pub mod summary;
