use std::path::PathBuf;

/// Errors from reading or validating user-supplied data. Every variant names where the
/// problem is (file, line, field) so a user can fix it without reading our code.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A CSV file that does not parse (bad quoting, a row with the wrong number of fields).
    #[error("{path}, line {line}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line (1 is the header).
        line: u64,
        /// The CSV reader's message.
        message: String,
    },
    /// A CSV field with a value that is not allowed (an empty statement, a flag that is not
    /// true/false, …).
    #[error("{path}, line {line}, field `{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// 1-based line (1 is the header).
        line: u64,
        /// The column's name.
        field: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A CSV file whose header lacks a column every row needs.
    #[error("{path}: missing required column `{column}` (columns present: {present})")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The missing column.
        column: String,
        /// The columns the header has, comma-separated.
        present: String,
    },
    /// Anything else wrong with the data or its configuration (a missing file, an unknown
    /// condition, impossible split fractions, …); the message says what and where.
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
    /// [`DataError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}
