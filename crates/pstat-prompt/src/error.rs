use std::path::PathBuf;

/// Everything that can go wrong while building, scoring or recording prompts.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// A condition's context source has fewer training statements than the K asked for (and
    /// fewer were not allowed).
    #[error(
        "condition `{condition}` needs K = {k} context statements but the training split of {domain} has only {available} of kinds [{kinds}] (ask for a smaller K, or allow fewer to record and use all {available}: `behavioral.k` and `behavioral.allow_fewer` in a run config, --k and --allow-fewer on the command line)"
    )]
    TooFewCandidates {
        /// Name of the condition Θ.
        condition: String,
        /// The domain the statements are drawn from.
        domain: String,
        /// The statement kinds drawn from, comma-separated.
        kinds: String,
        /// Statements wanted from this domain (its share of K).
        k: usize,
        /// Candidates its training split has.
        available: usize,
    },
    /// A domain's test split has no True statement to judge.
    #[error("no held-out True statements in the test split of {domain}")]
    NoTestStatements {
        /// The domain.
        domain: String,
    },
    /// The data set, its split or its conditions are missing something a study needs.
    #[error(transparent)]
    Data(#[from] pstat_data::DataError),
    /// An error of the language-model layer (e.g. an option left without a token of its own).
    #[error(transparent)]
    Lm(#[from] pstat_lm::LmError),
    /// Comparing judgments with the baseline's failed.
    #[error(transparent)]
    Stability(#[from] pstat_stability::StabilityError),
    /// A completion server is misconfigured, unreachable or answered something unusable.
    #[error("backend {url}: {message}")]
    Backend {
        /// The server URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A server did not return an option token's log-probability even among the largest top-n
    /// it was asked for.
    #[error(
        "backend {url}: option token {piece:?} (id {id}) is missing from the returned log-probabilities even among the top {top_n}; refusing to read it as p = 0"
    )]
    MissingOption {
        /// The server URL, with the name of the request in parentheses.
        url: String,
        /// The option token's id.
        id: u32,
        /// The option token's text.
        piece: String,
        /// The number of top log-probabilities last asked for.
        top_n: usize,
    },
    /// A tokenizer or chat template could not be loaded or used.
    #[error("{what}: {message}")]
    Tokenizer {
        /// Where it comes from (the model file).
        what: String,
        /// What went wrong.
        message: String,
    },
    /// The backend cannot do what the protocol needs (e.g. render a system turn).
    #[error("{0}")]
    Unsupported(String),
    /// A judgments or checkpoint file could not be written or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong (with the line, when parsing).
        message: String,
    },
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
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
