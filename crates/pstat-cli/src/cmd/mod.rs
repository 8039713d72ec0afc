//! One module per subcommand. Each exposes clap argument types and a `run` function.
pub mod activations;
pub mod cluster;
pub mod data;
pub mod generate;
pub mod hidden;
pub mod merge;
pub mod models;
pub mod prompt;
pub mod report;
pub mod run;
pub mod sawmil;
pub mod score;
pub mod stage;
pub mod tokenize;
