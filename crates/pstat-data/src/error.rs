use std::path::PathBuf;

/// Errors from reading or validating user-supplied data. Every variant names where the
/// problem is (file, line, field) so a user can fix it without reading our code.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Csv {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{path}, line {line}, field `{field}`: {message}")]
    Field {
        path: PathBuf,
        line: u64,
        field: String,
        message: String,
    },
    #[error("{path}: missing required column `{column}` (columns present: {present})")]
    MissingColumn {
        path: PathBuf,
        column: String,
        present: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Bytes that do not form the file they claim to be (truncated, foreign, or failing their
/// content hash); the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

/// A name outside a closed set (a domain, kind or relation); the message lists the valid ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownName(pub String);

impl DataError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}
