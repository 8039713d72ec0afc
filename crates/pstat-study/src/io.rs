//! Small file helpers of the run stages: every write is atomic and names its file when it
//! fails, a unit's result file is what marks it done, and a result that cannot be read back is
//! moved aside and recomputed, never used.

use crate::progress::Progress;
use anyhow::Context;
use pstat_data::artifact::{
    Manifest, move_aside, read_checked_json, write_atomic, write_checked_json, write_json_atomic,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// A finished unit's result, or `None` when the file is absent. A file that does not parse
/// (damaged on disk: writes are atomic, so a crash cannot leave half a file) is named in a
/// warning and moved aside to `<file>.corrupt`, so the unit is recomputed.
pub fn read_json<T: DeserializeOwned>(
    path: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<T>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match serde_json::from_slice(&bytes) {
        Ok(value) => Ok(Some(value)),
        Err(e) => {
            let aside =
                move_aside(path).with_context(|| format!("moving {} aside", path.display()))?;
            progress.note(&format!(
                "warning: {}: unreadable ({e}); moved to {} and recomputed",
                path.display(),
                aside.display()
            ));
            Ok(None)
        }
    }
}

/// A unit's record that carries its own content hash ([`write_record`]), or `None` when
/// absent. A record that does not parse or no longer matches its hash (garbled in place) is
/// named in a warning, moved aside to `<file>.corrupt` and recomputed by the caller.
pub fn read_record<T: Serialize + DeserializeOwned>(
    path: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<T>> {
    match read_checked_json(path) {
        Ok(record) => Ok(record),
        Err(corrupt) => {
            let aside =
                move_aside(path).with_context(|| format!("moving {} aside", path.display()))?;
            progress.note(&format!(
                "warning: {corrupt}; moved to {} and recomputed",
                aside.display()
            ));
            Ok(None)
        }
    }
}

/// Writes a unit's record with its content hash ([`read_record`] checks it).
pub fn write_record<T: Serialize>(path: &Path, record: &T) -> anyhow::Result<()> {
    write_checked_json(path, record).with_context(|| format!("writing {}", path.display()))
}

/// Pretty JSON, written atomically.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> anyhow::Result<()> {
    write_json_atomic(path, value).with_context(|| format!("writing {}", path.display()))
}

/// The manifest of `artifact`, beside it.
pub fn write_manifest(manifest: &Manifest, artifact: &Path) -> anyhow::Result<()> {
    let path = Manifest::path_for(artifact);
    manifest
        .write_beside(artifact)
        .with_context(|| format!("writing {}", path.display()))
}

/// JSON lines, one value per line.
pub fn write_jsonl<T: Serialize>(path: &Path, rows: &[T]) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut bytes, row)?;
        bytes.push(b'\n');
    }
    write_atomic(path, &bytes).with_context(|| format!("writing {}", path.display()))
}
