//! Reading and writing tables. Writes are atomic (a reader never sees half a
//! file); a malformed file is an error naming the file and the line.

use crate::Table;
use pstat_data::artifact::write_atomic;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Why a table or JSON file of the run folder could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The file could not be read, written or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The file's contents do not parse as the table's type, or the rows could not be
    /// written as CSV.
    #[error("{}{}: {message}", path.display(), line.map_or(String::new(), |l| format!(", line {l}")))]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line of the file (in a CSV the header is line 1); empty when writing.
        line: Option<usize>,
        /// What the CSV or JSON parser said.
        message: String,
    },
}

impl TableError {
    fn format(path: &Path, line: Option<usize>, message: impl ToString) -> Self {
        TableError::Format {
            path: path.to_path_buf(),
            line,
            message: message.to_string(),
        }
    }
}

/// Every row of the CSV at `path`.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, TableError> {
    let bytes = std::fs::read(path).map_err(|source| TableError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    pstat_data::artifact::Manifest::verify_beside(path, &bytes)
        .map_err(|message| TableError::format(path, None, message))?;
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e| TableError::format(path, Some(i + 2), e)))
        .collect()
}

/// Rows as CSV with a header (serde field names), written atomically.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), TableError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer
            .serialize(row)
            .map_err(|e| TableError::format(path, None, e))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| TableError::format(path, None, e))?;
    write_atomic(path, &bytes).map_err(|source| TableError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The table `T` of the run folder `dir`.
pub fn read_table<T: Table>(dir: &Path) -> Result<Vec<T>, TableError> {
    read_csv(&dir.join(T::FILE))
}

/// The table `T` of `dir`, or `None` when the run did not write it.
pub fn read_table_opt<T: Table>(dir: &Path) -> Result<Option<Vec<T>>, TableError> {
    let path = dir.join(T::FILE);
    if !path.is_file() {
        return Ok(None);
    }
    read_csv(&path).map(Some)
}

/// Writes the table `T` of `dir` (see [`Table::EMPTY_HEADER`] for no rows).
pub fn write_table<T: Table>(dir: &Path, rows: &[T]) -> Result<(), TableError> {
    let path = dir.join(T::FILE);
    if rows.is_empty() {
        return match T::EMPTY_HEADER {
            Some(columns) => {
                let mut bytes = columns.join(",");
                bytes.push('\n');
                write_atomic(&path, bytes.as_bytes())
            }
            None if path.exists() => std::fs::remove_file(&path),
            None => Ok(()),
        }
        .map_err(|source| TableError::Io { path, source });
    }
    write_csv(&path, rows)
}

/// A JSON file of the run folder.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, TableError> {
    let bytes = std::fs::read(path).map_err(|source| TableError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    pstat_data::artifact::Manifest::verify_beside(path, &bytes)
        .map_err(|message| TableError::format(path, None, message))?;
    serde_json::from_slice(&bytes).map_err(|e| TableError::format(path, Some(e.line()), e))
}

/// Pretty JSON, written atomically.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), TableError> {
    pstat_data::artifact::write_json_atomic(path, value).map_err(|source| TableError::Io {
        path: path.to_path_buf(),
        source,
    })
}
