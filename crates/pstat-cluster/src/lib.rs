#![warn(missing_docs)]

//! Retraction clustering (paper §4.5, Appendix I): PCA → UMAP → HDBSCAN over a hyperparameter
//! grid scored by Algorithm 1. Numerics only: the contrastive prompts and the labeler that
//! names each cluster are pstat-contrast's.
//!
//! Everything is single-threaded and seeded (ChaCha8), so a seed fixes every output exactly.

mod eigen;
pub mod grid;
pub mod hdbscan;
pub mod input;
mod knn;
pub mod matrix;
pub mod metrics;
pub mod mixture;
pub mod pca;
pub mod umap;

pub use grid::{ConfigScore, Grid, GridResult, PipelineConfig, run_grid};
pub use hdbscan::{HdbscanParams, hdbscan};
pub use matrix::Matrix;
pub use metrics::{adjusted_rand_index, silhouette};
pub use pca::pca_scores;
pub use umap::{UmapParams, umap_embed};

/// Why points could not be clustered.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The values do not fill the matrix they are said to form.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A NaN or infinity among the values.
    #[error("non-finite value {value} at row {row}, column {col}")]
    NonFinite {
        /// 0-based row (point) of the first such value.
        row: usize,
        /// 0-based column (feature).
        col: usize,
        /// The value.
        value: f64,
    },
    /// An input file that cannot be read or is malformed; the message names the file.
    #[error("input: {0}")]
    Input(String),
}
