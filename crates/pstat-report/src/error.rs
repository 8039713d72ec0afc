use std::path::PathBuf;

/// Why a report could not be built. Every variant names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("figure `{figure}`: {message}")]
    Figure { figure: String, message: String },
    #[error("rendering report.html: {0}")]
    Template(#[from] minijinja::Error),
}

impl ReportError {
    pub(crate) fn input(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        ReportError::Input {
            path: path.into(),
            message: message.to_string(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }
}
