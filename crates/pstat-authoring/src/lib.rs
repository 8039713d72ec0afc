#![warn(missing_docs)]

//! How the statement data that the paper does not ship were made, and how every shipped
//! statement is checked against its domain's sentence template: the Fictional builder from the
//! curated tables ([`fictional`]), the Synthetic (Fi) generator ([`synthetic`], with Markov
//! names from [`markov`] filtered by the English [`lexicon`]), the four-statement pairing rule
//! ([`pairing`]) and the templates with their parser ([`template`]). A study only reads the
//! resulting CSVs (pstat-data); this crate is for `pstat data build-fictional | synthesize`
//! and the data tests.

pub mod fictional;
pub mod lexicon;
pub mod markov;
pub mod pairing;
pub mod synthetic;
pub mod template;
