//! Is a statement type familiar, or only lexically alike? The analyses of Fig. 2 and
//! Appendix H: character-bigram statistics of the entity strings ([`bigram`]).

pub mod bigram;
