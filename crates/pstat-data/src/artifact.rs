//! Conventions every stage shares for what it writes: files appear whole or not at all
//! (written to a temporary sibling, then renamed), and every artifact can carry a
//! [`Manifest`] naming the config, data and model that made it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The sha256 of `bytes` as 64 lowercase hex digits.
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

/// A JSON record that carries the sha256 of its own content and of its role: what a run
/// reads back to decide that a unit is done. The role names what the record is (for a run's
/// records, its path inside the run folder, which spells the unit's key), so a valid record
/// copied over another unit's fails its check instead of standing in for it. Serializing after
/// parsing gives the same bytes (floats round-trip), so the check needs no second file.
///
/// `files` vouches for the files written beside the record before it (a unit's manifest,
/// its `probe.json`, its saved probes, the per-statement lines behind a summary): name (in the
/// record's folder) → sha256. Nobody else reads them back, so the record's check is what
/// keeps an edited or damaged one from outliving a rerun.
#[derive(Serialize, Deserialize)]
struct Checked<T> {
    role: String,
    content_sha256: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    files: BTreeMap<String, String>,
    record: T,
}

/// Why a record read back from disk is not used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Corrupt {
    /// The record's file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// The sha256 a checked record carries: of its role, a NUL, and its JSON content.
fn role_hash(role: &str, content: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(role.as_bytes());
    hasher.update([0u8]);
    hasher.update(content);
    hex::encode(hasher.finalize())
}

/// The hash of a checked record: its role, and its content with the files it vouches for.
fn record_hash<T: Serialize>(
    role: &str,
    record: &T,
    files: &BTreeMap<String, String>,
) -> serde_json::Result<String> {
    let content = if files.is_empty() {
        serde_json::to_vec(record)?
    } else {
        serde_json::to_vec(&(record, files))?
    };
    Ok(role_hash(role, &content))
}

/// Writes `record` atomically with its role, the sha256 of each of `files` (written beside it,
/// in its folder) and the sha256 of all of them ([`read_checked_json`] checks them).
pub fn write_checked_json<T: Serialize>(
    path: &Path,
    role: &str,
    record: &T,
    files: &[PathBuf],
) -> std::io::Result<()> {
    let mut vouched = BTreeMap::new();
    for file in files {
        let name = file
            .file_name()
            .filter(|_| file.parent() == path.parent())
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "{} is not beside {}",
                    file.display(),
                    path.display()
                ))
            })?;
        let bytes = std::fs::read(file)?;
        vouched.insert(name.to_string_lossy().into_owned(), sha256_hex(&bytes));
    }
    write_json_atomic(
        path,
        &Checked {
            role: role.to_string(),
            content_sha256: record_hash(role, record, &vouched).map_err(std::io::Error::other)?,
            files: vouched,
            record,
        },
    )
}

/// The bytes at `path`, `None` when there is no file; a file that exists but cannot be read is
/// [`Corrupt`].
fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>, Corrupt> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Corrupt {
            path: path.to_path_buf(),
            reason: format!("unreadable: {e}"),
        }),
    }
}

/// The record at `path` written for `role`; `Ok(None)` when there is none. A file that does
/// not parse, whose content no longer matches its hash (garbled in place, edited by hand) or
/// that was written for another role (copied from another unit) is [`Corrupt`]: the caller
/// moves it aside ([`move_aside`]) and recomputes it, never uses it.
pub fn read_checked_json<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
    role: &str,
) -> Result<Option<T>, Corrupt> {
    let corrupt = |reason: String| Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let Some(bytes) = read_if_present(path)? else {
        return Ok(None);
    };
    let checked: Checked<T> =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("not a valid record: {e}")))?;
    let hash = record_hash(&checked.role, &checked.record, &checked.files)
        .map_err(|e| corrupt(e.to_string()))?;
    if hash != checked.content_sha256 {
        return Err(corrupt(
            "content does not match its recorded sha256 (damaged on disk)".into(),
        ));
    }
    if checked.role != role {
        return Err(corrupt(format!(
            "is the record of `{}`, not of `{role}` (copied from elsewhere)",
            checked.role
        )));
    }
    for (name, sha256) in &checked.files {
        let file = path.with_file_name(name);
        let reason = match std::fs::read(&file) {
            Ok(bytes) if sha256_hex(&bytes) == *sha256 => continue,
            Ok(_) => format!(
                "does not match the sha256 {} records for it (damaged or edited)",
                path.display()
            ),
            Err(e) => format!("unreadable ({e}), though {} vouches for it", path.display()),
        };
        return Err(Corrupt { path: file, reason });
    }
    Ok(Some(checked.record))
}

/// Serializes `value` (a JSON object) as pretty JSON with one more top-level field,
/// `content_sha256`, the sha256 of `role`, a NUL and the value's compact JSON; other readers
/// of the format see the value's own fields unchanged. [`read_sealed_json`] checks it.
pub fn write_sealed_json<T: Serialize>(path: &Path, role: &str, value: &T) -> std::io::Result<()> {
    let content = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let mut object = serde_json::to_value(value).map_err(std::io::Error::other)?;
    let Some(fields) = object.as_object_mut() else {
        return Err(std::io::Error::other(
            "a sealed record must be a JSON object",
        ));
    };
    fields.insert(
        "content_sha256".into(),
        serde_json::Value::String(role_hash(role, &content)),
    );
    write_json_atomic(path, &object)
}

/// The value at `path` written by [`write_sealed_json`] for `role`; `Ok(None)` when absent.
/// One that does not parse, has no `content_sha256`, or whose content (edited in place, even
/// into other valid JSON of the same size) or role does not match it is [`Corrupt`].
pub fn read_sealed_json<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
    role: &str,
) -> Result<Option<T>, Corrupt> {
    let corrupt = |reason: String| Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let Some(bytes) = read_if_present(path)? else {
        return Ok(None);
    };
    let mut object: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("not valid JSON: {e}")))?;
    let recorded = object
        .as_object_mut()
        .and_then(|fields| fields.remove("content_sha256"))
        .and_then(|v| v.as_str().map(str::to_string))
        .ok_or_else(|| corrupt("has no content_sha256".into()))?;
    let value: T =
        serde_json::from_value(object).map_err(|e| corrupt(format!("not a valid record: {e}")))?;
    let content = serde_json::to_vec(&value).map_err(|e| corrupt(e.to_string()))?;
    if role_hash(role, &content) != recorded {
        return Err(corrupt(format!(
            "content does not match its recorded sha256 (edited or damaged on disk, or not the record of `{role}`)"
        )));
    }
    Ok(Some(value))
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
    /// What a program that never called [`set_build`] records: commit `unknown`, dirtiness
    /// unknown, 0 threads.
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
    /// The version of the pstat crates that wrote it.
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
    /// The run's random seed.
    pub seed: u64,
    /// What this artifact is, e.g. `stability`, `activations city_locations layer 15`.
    pub artifact: String,
    /// sha256 of the artifact's bytes, for the run folder's tables: a reader checks them
    /// against it ([`Manifest::verify_beside`]). Absent for artifacts checked otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
}

impl Manifest {
    /// A manifest for `artifact` from this build ([`build`]), with no model.
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
            content_sha256: None,
        }
    }

    /// The same, vouching for the artifact's `bytes`.
    pub fn with_content(mut self, bytes: &[u8]) -> Self {
        self.content_sha256 = Some(sha256_hex(bytes));
        self
    }

    /// Checks `bytes`, read from `artifact`, against the sha256 its manifest vouches for. A
    /// file without a manifest, or whose manifest vouches for no content, passes: it was not
    /// written by a run that records it. `Err`: why the bytes are not the run's.
    pub fn verify_beside(artifact: &Path, bytes: &[u8]) -> Result<(), String> {
        let path = Self::path_for(artifact);
        let Ok(text) = std::fs::read(&path) else {
            return Ok(());
        };
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| format!("its manifest {} does not parse: {e}", path.display()))?;
        match manifest.content_sha256 {
            Some(expected) if expected != sha256_hex(bytes) => Err(format!(
                "does not match the sha256 {} vouches for (edited or damaged; `pstat run` into the folder writes it again)",
                path.display()
            )),
            _ => Ok(()),
        }
    }

    /// The same, naming the model's GGUF sha256 and the kernels that ran it.
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

    /// Writes the manifest atomically as pretty JSON at [`Self::path_for`]`(artifact)`.
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
        assert!(read_checked_json::<Vec<f64>>(&path, "u").unwrap().is_none());
        let record = vec![0.1, 1.0 / 3.0, 2.5e-7];
        let beside = dir.path().join("probe.json");
        std::fs::write(&beside, "{\"c\": 0.1}").unwrap();
        write_checked_json(&path, "u", &record, std::slice::from_ref(&beside)).unwrap();
        assert_eq!(
            read_checked_json::<Vec<f64>>(&path, "u").unwrap(),
            Some(record)
        );
        // A valid record of another role (another unit's, copied over this one's) is refused.
        let err = read_checked_json::<Vec<f64>>(&path, "v")
            .unwrap_err()
            .to_string();
        assert!(err.contains("record of `u`, not of `v`"), "{err}");
        // A file it vouches for, edited (same size) or gone: named, the record not used.
        std::fs::write(&beside, "{\"c\": 0.7}").unwrap();
        let err = read_checked_json::<Vec<f64>>(&path, "u").unwrap_err();
        assert_eq!(err.path, beside);
        std::fs::remove_file(&beside).unwrap();
        assert!(read_checked_json::<Vec<f64>>(&path, "u").is_err());
        std::fs::write(&beside, "{\"c\": 0.1}").unwrap();
        // One digit changed in place: same size, still valid JSON, wrong content.
        let text = std::fs::read_to_string(&path).unwrap();
        let garbled = text.replacen("2.5e-7", "2.6e-7", 1);
        assert_eq!(garbled.len(), text.len());
        std::fs::write(&path, garbled).unwrap();
        let err = read_checked_json::<Vec<f64>>(&path, "u")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unit.json") && err.contains("sha256"), "{err}");
        std::fs::write(&path, &text.as_bytes()[..text.len() / 2]).unwrap();
        let err = read_checked_json::<Vec<f64>>(&path, "u")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid record"), "{err}");
        let aside = move_aside(&path).unwrap();
        assert!(!path.exists() && aside.ends_with("unit.json.corrupt"));
    }

    #[test]
    fn a_sealed_value_keeps_its_fields_and_refuses_an_edit_of_the_same_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("split.json");
        let value = serde_json::json!({"train": ["a1", "b2"], "test": ["c3"]});
        assert!(
            read_sealed_json::<serde_json::Value>(&path, "s")
                .unwrap()
                .is_none()
        );
        write_sealed_json(&path, "s", &value).unwrap();
        assert_eq!(
            read_sealed_json::<serde_json::Value>(&path, "s").unwrap(),
            Some(value)
        );
        // Other readers see the fields as before.
        let plain: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(plain["test"][0], "c3");
        // Two ids swapped: same size, valid JSON, another split.
        let text = std::fs::read_to_string(&path).unwrap();
        let swapped = text
            .replace("a1", "XX")
            .replace("c3", "a1")
            .replace("XX", "c3");
        assert_eq!(swapped.len(), text.len());
        std::fs::write(&path, swapped).unwrap();
        let err = read_sealed_json::<serde_json::Value>(&path, "s")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("split.json") && err.contains("sha256"),
            "{err}"
        );
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
