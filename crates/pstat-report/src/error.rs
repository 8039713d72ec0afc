use std::path::PathBuf;

/// Why a report could not be built. Every variant names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An input of the run folder is missing (`stability.csv`) or malformed.
    #[error("{path}: {message}")]
    Input {
        /// The input file.
        path: PathBuf,
        /// What is wrong with it (with its line, for a table).
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
    /// A figure could not be drawn or encoded.
    #[error("figure `{figure}`: {message}")]
    Figure {
        /// The figure's id (its file stem).
        figure: String,
        /// The drawing or encoding error.
        message: String,
    },
    /// The HTML template failed to render `report.html`.
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
