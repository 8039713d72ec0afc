//! Conventions every stage shares for what it writes: files appear whole or not at all
//! (written to a temporary sibling, then renamed), and every artifact can carry a
//! [`Manifest`] naming the config, data and model that made it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Write `bytes` to `path` atomically: a crash or Ctrl-C leaves either the old file or the
/// new one, never a truncated file. Parent folders are created.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serialize `value` as pretty JSON (trailing newline) and write it atomically.
pub fn write_json_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// A JSON record that carries the sha256 of its own content: what a run reads back to decide
/// that a unit is done. Serializing after parsing gives the same bytes (floats round-trip), so
/// the check needs no second file.
#[derive(Serialize, Deserialize)]
struct Checked<T> {
    content_sha256: String,
    record: T,
}

/// Why a record read back from disk is not used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Corrupt {
    pub path: PathBuf,
    pub reason: String,
}

/// Writes `record` atomically with the sha256 of its JSON form ([`read_checked_json`] checks it).
pub fn write_checked_json<T: Serialize>(path: &Path, record: &T) -> std::io::Result<()> {
    let content = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    write_json_atomic(
        path,
        &Checked {
            content_sha256: sha256_hex(&content),
            record,
        },
    )
}

/// The record at `path`; `Ok(None)` when there is none. A file that does not parse, or whose
/// content no longer matches its hash (garbled in place, edited by hand), is [`Corrupt`]: the
/// caller moves it aside ([`move_aside`]) and recomputes it, never uses it.
pub fn read_checked_json<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, Corrupt> {
    let corrupt = |reason: String| Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(corrupt(format!("unreadable: {e}"))),
    };
    let checked: Checked<T> =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("not a valid record: {e}")))?;
    let content = serde_json::to_vec(&checked.record).map_err(|e| corrupt(e.to_string()))?;
    if sha256_hex(&content) != checked.content_sha256 {
        return Err(corrupt(
            "content does not match its recorded sha256 (damaged on disk)".into(),
        ));
    }
    Ok(Some(checked.record))
}

/// Moves a damaged file aside to `<path>.corrupt` (replacing an older one) so that the caller
/// can recompute it while the damaged bytes stay available for inspection. Returns the new path.
pub fn move_aside(path: &Path) -> std::io::Result<PathBuf> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".corrupt");
    let aside = PathBuf::from(aside);
    std::fs::rename(path, &aside)?;
    Ok(aside)
}

/// A temporary path next to `path` (same filesystem, so the rename is atomic). The process id
/// keeps two concurrent writers from sharing a temp file.
pub fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// The program that writes artifacts: its git commit, whether its sources differed from that
/// commit, and the size of its thread pool. The `pstat` binary sets it once at start-up from
/// what its build script read from git; code that never sets it (library tests) records
/// [`Build::unknown`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// Full commit hash, or `unknown` outside a git checkout.
    pub commit: String,
    /// `None` when git could not tell.
    pub dirty: Option<bool>,
    /// Worker threads of the global rayon pool (`--threads`).
    pub threads: usize,
}

impl Build {
    pub fn unknown() -> Self {
        Build {
            commit: "unknown".into(),
            dirty: None,
            threads: 0,
        }
    }
}

static BUILD: OnceLock<Build> = OnceLock::new();

/// Record the running program's build for every later [`Manifest`]; the first call wins.
pub fn set_build(build: Build) {
    let _ = BUILD.set(build);
}

/// The build set by [`set_build`], or [`Build::unknown`].
pub fn build() -> Build {
    BUILD.get().cloned().unwrap_or_else(Build::unknown)
}

fn unknown_commit() -> String {
    "unknown".into()
}

/// Provenance written beside (or inside) every artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub pstat_version: String,
    /// Git commit of the build ([`Build`]); manifests written before it was recorded read as
    /// `unknown`.
    #[serde(default = "unknown_commit")]
    pub git_commit: String,
    /// Whether the build's sources differed from `git_commit`; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dirty: Option<bool>,
    /// Worker threads of the writing process (0 = not recorded).
    #[serde(default)]
    pub threads: usize,
    /// sha256 of the canonical (serialized) run config.
    pub config_hash: String,
    /// sha256 of the data files used.
    pub data_hash: String,
    /// sha256 of the GGUF file, when a model was involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
    /// Kernels that ran the model (`LanguageModel::kernel_isa`): the f32 kernels' SIMD family,
    /// plus `q8 <instruction set>` under the q8 precision. Machines with another family
    /// reproduce the results only up to float rounding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_isa: Option<String>,
    pub seed: u64,
    /// What this artifact is, e.g. `stability`, `activations city_locations layer 15`.
    pub artifact: String,
}

impl Manifest {
    pub fn new(artifact: impl Into<String>, config_hash: &str, data_hash: &str, seed: u64) -> Self {
        let build = build();
        Manifest {
            pstat_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: build.commit,
            git_dirty: build.dirty,
            threads: build.threads,
            config_hash: config_hash.to_string(),
            data_hash: data_hash.to_string(),
            model_sha256: None,
            kernel_isa: None,
            seed,
            artifact: artifact.into(),
        }
    }

    pub fn with_model(mut self, sha256: &str, kernel_isa: &str) -> Self {
        self.model_sha256 = Some(sha256.to_string());
        self.kernel_isa = Some(kernel_isa.to_string());
        self
    }

    /// `stability.csv` → `stability.csv.manifest.json`.
    pub fn path_for(artifact: &Path) -> PathBuf {
        let mut name = artifact.file_name().unwrap_or_default().to_os_string();
        name.push(".manifest.json");
        artifact.with_file_name(name)
    }

    pub fn write_beside(&self, artifact: &Path) -> std::io::Result<()> {
        write_json_atomic(&Self::path_for(artifact), self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_checked_record_round_trips_and_same_size_damage_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("unit.json");
        assert!(read_checked_json::<Vec<f64>>(&path).unwrap().is_none());
        let record = vec![0.1, 1.0 / 3.0, 2.5e-7];
        write_checked_json(&path, &record).unwrap();
        assert_eq!(read_checked_json::<Vec<f64>>(&path).unwrap(), Some(record));
        // One digit changed in place: same size, still valid JSON, wrong content.
        let text = std::fs::read_to_string(&path).unwrap();
        let garbled = text.replacen("2.5e-7", "2.6e-7", 1);
        assert_eq!(garbled.len(), text.len());
        std::fs::write(&path, garbled).unwrap();
        let err = read_checked_json::<Vec<f64>>(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unit.json") && err.contains("sha256"), "{err}");
        std::fs::write(&path, &text.as_bytes()[..text.len() / 2]).unwrap();
        let err = read_checked_json::<Vec<f64>>(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid record"), "{err}");
        let aside = move_aside(&path).unwrap();
        assert!(!path.exists() && aside.ends_with("unit.json.corrupt"));
    }

    #[test]
    fn manifests_carry_the_build_and_read_older_ones() {
        set_build(Build {
            commit: "0123abc".into(),
            dirty: Some(true),
            threads: 3,
        });
        let m = Manifest::new("stability", "c", "d", 42);
        assert_eq!(
            (m.git_commit.as_str(), m.git_dirty, m.threads),
            ("0123abc", Some(true), 3)
        );
        let older = r#"{"pstat_version": "0.1.0", "config_hash": "c", "data_hash": "d",
            "seed": 42, "artifact": "stability"}"#;
        let m: Manifest = serde_json::from_str(older).unwrap();
        assert_eq!(
            (m.git_commit.as_str(), m.git_dirty, m.threads),
            ("unknown", None, 0)
        );
    }
}
