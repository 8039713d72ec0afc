#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The caller's data or parameters cannot be used (names the field and value).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The data are valid but the fit has no well-defined answer (e.g. no support vectors of
    /// one class), so there is no probe to return.
    #[error("degenerate fit: {0}")]
    Degenerate(String),
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

pub type Result<T> = std::result::Result<T, ProbeError>;

pub(crate) fn invalid<T>(message: impl Into<String>) -> Result<T> {
    Err(ProbeError::Invalid(message.into()))
}
