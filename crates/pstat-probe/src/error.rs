/// Why a probe could not be fitted, scored, read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The caller's data or parameters cannot be used (names the field and value).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The data are valid but the fit has no well-defined answer (e.g. no support vectors of
    /// one class), so there is no probe to return.
    #[error("degenerate fit: {0}")]
    Degenerate(String),
    /// A probe or bag file could not be read, parsed or written.
    #[error("{path}: {message}")]
    File {
        /// The file's path, as given.
        path: String,
        /// What went wrong (the I/O error or what is malformed).
        message: String,
    },
}

/// This crate's result type, with [`ProbeError`] as the error.
pub type Result<T> = std::result::Result<T, ProbeError>;

pub(crate) fn invalid<T>(message: impl Into<String>) -> Result<T> {
    Err(ProbeError::Invalid(message.into()))
}
