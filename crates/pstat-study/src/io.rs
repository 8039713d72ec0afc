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

/// What a record of the run folder is: its path inside the folder (the nearest folder above
/// it that holds a `config.toml`), `/`-separated, e.g.
/// `smollm2-135m-instruct/city_locations/representational/sawmil/layer_20/unit.json`. The path
/// spells the unit's key (model, domain, stage, probe, layer, condition, draw), so the hash a
/// record carries covers which unit it belongs to, and a folder moved or merged elsewhere keeps
/// its records valid. A path in no run folder (library tests) is its own role.
pub fn role_of(path: &Path) -> String {
    let inside = path
        .ancestors()
        .skip(1)
        .find(|dir| dir.join("config.toml").is_file())
        .and_then(|run| path.strip_prefix(run).ok())
        .unwrap_or(path);
    inside
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A unit's record that carries its own content hash ([`write_record`]), or `None` when
/// absent. A record that does not parse, no longer matches its hash (garbled in place) or
/// belongs to another unit (copied over this one's) is named in a warning, moved aside to
/// `<file>.corrupt` and recomputed by the caller.
pub fn read_record<T: Serialize + DeserializeOwned>(
    path: &Path,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<T>> {
    match read_checked_json(path, &role_of(path)) {
        Ok(record) => Ok(record),
        // A file the record vouches for that is gone: the unit is recomputed, which writes it.
        Err(corrupt) if !corrupt.path.exists() => {
            progress.note(&format!("warning: {corrupt}; the unit is recomputed"));
            Ok(None)
        }
        Err(corrupt) => {
            let aside = move_aside(&corrupt.path)
                .with_context(|| format!("moving {} aside", corrupt.path.display()))?;
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
    write_record_vouching(path, record, &[])
}

/// [`write_record`] for a record that also vouches for `files`, written beside it first (its
/// manifest, saved probes, per-statement lines): a rerun that finds one of them edited,
/// damaged or gone names it and recomputes the unit, which writes them all again.
pub fn write_record_vouching<T: Serialize>(
    path: &Path,
    record: &T,
    files: &[std::path::PathBuf],
) -> anyhow::Result<()> {
    write_checked_json(path, &role_of(path), record, files)
        .with_context(|| format!("writing {}", path.display()))
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
