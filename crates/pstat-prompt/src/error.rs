use std::path::PathBuf;

/// Everything that can go wrong while building, scoring or recording prompts.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error(
        "condition `{condition}` needs K = {k} context statements but the training split of {domain} has only {available} of kinds [{kinds}] (use a smaller --k, or --allow-fewer to record and use all {available})"
    )]
    TooFewCandidates {
        condition: String,
        domain: String,
        kinds: String,
        k: usize,
        available: usize,
    },
    #[error("no held-out True statements in the test split of {domain}")]
    NoTestStatements { domain: String },
    #[error(transparent)]
    Data(#[from] pstat_data::DataError),
    #[error(transparent)]
    Lm(#[from] pstat_lm::LmError),
    #[error(transparent)]
    Stability(#[from] pstat_stability::StabilityError),
    #[error("backend {url}: {message}")]
    Backend { url: String, message: String },
    #[error(
        "backend {url}: option token {piece:?} (id {id}) is missing from the returned log-probabilities even among the top {top_n}; refusing to read it as p = 0"
    )]
    MissingOption {
        url: String,
        id: u32,
        piece: String,
        top_n: usize,
    },
    #[error("{what}: {message}")]
    Tokenizer { what: String, message: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl PromptError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        PromptError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
