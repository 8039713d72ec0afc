//! Small file helpers of the run stages: every write is atomic, and a unit's result file is
//! what marks it done.

use anyhow::Context;
use pstat_data::artifact::write_atomic;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// A finished unit's result, or `None` when the file is absent or unreadable (then the unit
/// is recomputed; a half-written file cannot exist because writes are atomic).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text).ok())
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
