//! Opening a GGUF file: header and metadata through candle's reader, plus the checks candle
//! leaves out (magic, truncated tensor data, supported architecture), typed metadata access, and
//! the [`ModelConfig`] the forward pass is built from. Every error names the file.

use candle_core::Device;
use candle_core::quantized::QTensor;
use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

/// Problems with a GGUF file. Each variant names the file, so a user with several models on the
/// command line knows which one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a GGUF file (it starts with {found:?}, a GGUF file starts with \"GGUF\")")]
    NotGguf { path: PathBuf, found: String },
    #[error("{path}: truncated GGUF file: {detail}")]
    Truncated { path: PathBuf, detail: String },
    #[error("{path}: malformed GGUF file: {detail}")]
    Malformed { path: PathBuf, detail: String },
    #[error(
        "{path}: unsupported model architecture `{arch}` (supported: {})",
        Arch::SUPPORTED.join(", ")
    )]
    UnsupportedArch { path: PathBuf, arch: String },
    #[error("{path}: metadata key `{key}` is missing")]
    MissingKey { path: PathBuf, key: String },
    #[error("{path}: metadata key `{key}` should be {expected}, found {found}")]
    WrongType {
        path: PathBuf,
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("{path}: tensor `{name}` is missing")]
    MissingTensor { path: PathBuf, name: String },
}

/// Decoder architectures whose forward pass pstat implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama and its relatives (Mistral, SmolLM): pre-norm, SiLU-gated MLP, interleaved RoPE.
    Llama,
    /// Gemma 3: scaled embeddings, q/k norms, sandwich norms, GELU-tanh, local/global layers.
    Gemma3,
    /// Qwen 2: Llama layout plus q/k/v biases, NEOX RoPE.
    Qwen2,
}

impl Arch {
    /// `general.architecture` values accepted, in the spelling GGUF uses.
    pub const SUPPORTED: [&'static str; 3] = ["llama", "gemma3", "qwen2"];

    fn from_gguf(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "gemma3" => Some(Self::Gemma3),
            "qwen2" => Some(Self::Qwen2),
            _ => None,
        }
    }

    /// The prefix of this architecture's metadata keys (`llama.block_count`, ...).
    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Gemma3 => "gemma3",
            Self::Qwen2 => "qwen2",
        }
    }
}

/// Hyper-parameters of a decoder, read from GGUF metadata with llama.cpp's defaults where a key
/// is optional. Field names follow the usual transformer vocabulary; GGUF key in brackets.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    pub arch: Arch,
    /// Decoder blocks (`block_count`).
    pub n_layers: usize,
    /// Residual-stream width (`embedding_length`).
    pub hidden: usize,
    /// Query heads (`attention.head_count`).
    pub n_heads: usize,
    /// Key/value heads (`attention.head_count_kv`, default `n_heads`).
    pub n_kv_heads: usize,
    /// Width of one query/key head (`attention.key_length`, default `hidden / n_heads`).
    pub head_dim: usize,
    /// Width of one value head (`attention.value_length`, default `head_dim`).
    pub value_head_dim: usize,
    /// MLP inner width (`feed_forward_length`).
    pub ffn: usize,
    /// Dimensions of each head that RoPE rotates (`rope.dimension_count`, default `head_dim`).
    pub rope_dim: usize,
    /// RoPE base of full-attention layers (`rope.freq_base`, default 10000).
    pub rope_base: f32,
    /// RoPE position scale of full-attention layers: 1 / `rope.scaling.factor` for linear
    /// scaling, 1 otherwise.
    pub rope_freq_scale: f32,
    /// RoPE base of sliding-window layers (Gemma 3: 10000, llama.cpp's fixed value), if any.
    pub rope_base_local: Option<f32>,
    /// RMSNorm epsilon (`attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Training context length (`context_length`): the longest sequence we accept.
    pub context_length: usize,
    /// Sliding-window width of local-attention layers (`attention.sliding_window`), if any.
    pub sliding_window: Option<usize>,
    /// With a sliding window: every `n`-th layer (1-based) attends globally, the others locally
    /// (Gemma 3: 6, llama.cpp's default when the file does not say).
    pub sliding_window_pattern: Option<usize>,
    /// Multiplier of q·k before softmax.
    pub attn_scale: f32,
    /// Multiplier applied to token embeddings (Gemma: sqrt(hidden)), if any.
    pub embed_scale: Option<f32>,
    /// Rows of `token_embd.weight`.
    pub vocab_size: usize,
    /// True when the file has no `output.weight` and the LM head reuses `token_embd.weight`.
    pub tied_embeddings: bool,
}

impl ModelConfig {
    /// Whether decoder block `layer` (0-based) uses sliding-window attention.
    pub fn is_sliding(&self, layer: usize) -> bool {
        match (self.sliding_window, self.sliding_window_pattern) {
            (Some(_), Some(pattern)) => !(layer + 1).is_multiple_of(pattern),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// An opened GGUF file: parsed header and metadata; tensors are read on demand.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    content: Content,
}

impl GgufFile {
    /// Reads the header and metadata of `path` and checks that every tensor's data lies inside
    /// the file, so a truncated download is reported here rather than half-way through loading.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut reader = BufReader::new(File::open(path).map_err(io)?);
        let file_len = reader.get_ref().metadata().map_err(io)?.len();
        let mut magic = [0u8; 4];
        let read = read_up_to(&mut reader, &mut magic).map_err(io)?;
        if &magic[..read] != b"GGUF" {
            if read < 4 && b"GGUF".starts_with(&magic[..read]) {
                return Err(GgufError::Truncated {
                    path: path.to_path_buf(),
                    detail: format!("only {file_len} bytes"),
                });
            }
            return Err(GgufError::NotGguf {
                path: path.to_path_buf(),
                found: String::from_utf8_lossy(&magic[..read]).into_owned(),
            });
        }
        reader.rewind().map_err(io)?;
        let content = Content::read(&mut reader).map_err(|e| header_error(path, &e))?;
        let file = Self {
            path: path.to_path_buf(),
            content,
        };
        file.check_tensor_extents(file_len)?;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Metadata and tensor shapes that did not come from a GGUF file: a Hugging Face folder's
    /// config.json translated to GGUF keys (see [`crate::hf`]), so that one [`Self::config`]
    /// reads both formats. `path` names the file the values came from; tensors are not readable.
    pub fn from_metadata(
        path: PathBuf,
        metadata: HashMap<String, Value>,
        tensor_dims: HashMap<String, Vec<usize>>,
    ) -> Self {
        let tensor_infos = tensor_dims
            .into_iter()
            .map(|(name, dims)| {
                let info = candle_core::quantized::gguf_file::TensorInfo {
                    ggml_dtype: candle_core::quantized::GgmlDType::F32,
                    shape: dims.into(),
                    offset: 0,
                };
                (name, info)
            })
            .collect();
        Self {
            path,
            content: Content {
                magic: candle_core::quantized::gguf_file::VersionedMagic::GgufV3,
                metadata,
                tensor_infos,
                tensor_data_offset: 0,
            },
        }
    }

    /// All metadata key/value pairs, as candle parsed them.
    pub fn metadata(&self) -> &HashMap<String, Value> {
        &self.content.metadata
    }

    /// candle's parsed header, for code that loads tensors in bulk.
    pub fn content(&self) -> &Content {
        &self.content
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Dimensions of tensor `name`, outermost first (candle's order, reverse of ggml's).
    pub fn tensor_dims(&self, name: &str) -> Result<&[usize], GgufError> {
        self.content
            .tensor_infos
            .get(name)
            .map(|info| info.shape.dims())
            .ok_or_else(|| GgufError::MissingTensor {
                path: self.path.clone(),
                name: name.to_string(),
            })
    }

    /// A fresh buffered reader on the file, for [`GgufFile::tensor_with`] in loops.
    pub fn reader(&self) -> Result<BufReader<File>, GgufError> {
        File::open(&self.path)
            .map(BufReader::new)
            .map_err(|source| GgufError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Reads tensor `name` (quantized as stored).
    pub fn tensor(&self, name: &str, device: &Device) -> Result<QTensor, GgufError> {
        self.tensor_with(&mut self.reader()?, name, device)
    }

    /// Reads tensor `name` through an already open reader of this file.
    pub fn tensor_with<R: Read + Seek>(
        &self,
        reader: &mut R,
        name: &str,
        device: &Device,
    ) -> Result<QTensor, GgufError> {
        if !self.has_tensor(name) {
            return Err(GgufError::MissingTensor {
                path: self.path.clone(),
                name: name.to_string(),
            });
        }
        self.content
            .tensor(reader, name, device)
            .map_err(|e| GgufError::Malformed {
                path: self.path.clone(),
                detail: format!("tensor `{name}`: {e}"),
            })
    }

    /// `general.architecture`, checked against the architectures pstat implements.
    pub fn arch(&self) -> Result<Arch, GgufError> {
        let name = self.get_str("general.architecture")?;
        Arch::from_gguf(name).ok_or_else(|| GgufError::UnsupportedArch {
            path: self.path.clone(),
            arch: name.to_string(),
        })
    }

    /// The decoder's hyper-parameters, with llama.cpp's defaults for optional keys.
    pub fn config(&self) -> Result<ModelConfig, GgufError> {
        let arch = self.arch()?;
        let key = |suffix: &str| format!("{}.{suffix}", arch.gguf_name());
        let n_layers = self.get_usize(&key("block_count"))?;
        let hidden = self.get_usize(&key("embedding_length"))?;
        let n_heads = self.get_usize(&key("attention.head_count"))?;
        if n_heads == 0 {
            return Err(self.malformed(format!("{} is 0", key("attention.head_count"))));
        }
        let n_kv_heads = self
            .opt_usize(&key("attention.head_count_kv"))?
            .unwrap_or(n_heads);
        if n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
            return Err(self.malformed(format!(
                "{n_heads} query heads cannot be grouped over {n_kv_heads} key/value heads"
            )));
        }
        let head_dim = self
            .opt_usize(&key("attention.key_length"))?
            .unwrap_or(hidden / n_heads);
        let value_head_dim = self
            .opt_usize(&key("attention.value_length"))?
            .unwrap_or(head_dim);
        let rope_scaling_linear = self.opt_str(&key("rope.scaling.type"))? == Some("linear");
        let rope_freq_scale = match self.opt_f32(&key("rope.scaling.factor"))? {
            Some(factor) if rope_scaling_linear && factor > 0.0 => 1.0 / factor,
            _ => 1.0,
        };
        let sliding_window = self.opt_usize(&key("attention.sliding_window"))?;
        let gemma = arch == Arch::Gemma3;
        let embd_dims = self.tensor_dims("token_embd.weight")?;
        let vocab_size = embd_dims.first().copied().unwrap_or(0);
        // llama.cpp: Gemma 3 below 27B scales attention by 1/sqrt(key_length).
        let attn_scale = match self.opt_f32(&key("attention.query_pre_attn_scalar"))? {
            Some(scalar) => 1.0 / scalar.sqrt(),
            None => 1.0 / (head_dim as f32).sqrt(),
        };
        Ok(ModelConfig {
            arch,
            n_layers,
            hidden,
            n_heads,
            n_kv_heads,
            head_dim,
            value_head_dim,
            ffn: self.get_usize(&key("feed_forward_length"))?,
            rope_dim: self
                .opt_usize(&key("rope.dimension_count"))?
                .unwrap_or(head_dim),
            rope_base: self.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            rope_freq_scale,
            rope_base_local: gemma.then_some(10_000.0),
            rms_eps: self.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            context_length: self.get_usize(&key("context_length"))?,
            sliding_window,
            sliding_window_pattern: match sliding_window {
                Some(_) if gemma => Some(
                    self.opt_usize(&key("attention.sliding_window_pattern"))?
                        .unwrap_or(6),
                ),
                _ => None,
            },
            attn_scale,
            embed_scale: gemma.then(|| (hidden as f32).sqrt()),
            vocab_size,
            tied_embeddings: !self.has_tensor("output.weight"),
        })
    }

    fn malformed(&self, detail: String) -> GgufError {
        GgufError::Malformed {
            path: self.path.clone(),
            detail,
        }
    }

    fn value(&self, key: &str) -> Result<&Value, GgufError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| GgufError::MissingKey {
                path: self.path.clone(),
                key: key.to_string(),
            })
    }

    fn wrong_type(&self, key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::WrongType {
            path: self.path.clone(),
            key: key.to_string(),
            expected,
            found: format!("{:?}", found.value_type()),
        }
    }

    /// A string-valued key.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.value(key)? {
            Value::String(s) => Ok(s),
            other => Err(self.wrong_type(key, "a string", other)),
        }
    }

    /// A non-negative integer key of any GGUF integer width.
    pub fn get_usize(&self, key: &str) -> Result<usize, GgufError> {
        let value = self.value(key)?;
        let n = match *value {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        };
        n.and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.wrong_type(key, "a non-negative integer", value))
    }

    /// A float key (f32 or f64 in the file).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        match *self.value(key)? {
            Value::F32(v) => Ok(v),
            Value::F64(v) => Ok(v as f32),
            ref other => Err(self.wrong_type(key, "a float", other)),
        }
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match *self.value(key)? {
            Value::Bool(v) => Ok(v),
            ref other => Err(self.wrong_type(key, "a bool", other)),
        }
    }

    /// An array key.
    pub fn get_array(&self, key: &str) -> Result<&[Value], GgufError> {
        match self.value(key)? {
            Value::Array(v) => Ok(v),
            other => Err(self.wrong_type(key, "an array", other)),
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        self.optional(key, Self::get_str)
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, GgufError> {
        self.optional(key, Self::get_usize)
    }

    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        self.optional(key, Self::get_f32)
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        self.optional(key, Self::get_bool)
    }

    /// `None` when the key is absent; a type error when present with the wrong type.
    fn optional<'a, T>(
        &'a self,
        key: &str,
        get: impl Fn(&'a Self, &str) -> Result<T, GgufError>,
    ) -> Result<Option<T>, GgufError> {
        if self.content.metadata.contains_key(key) {
            get(self, key).map(Some)
        } else {
            Ok(None)
        }
    }

    fn check_tensor_extents(&self, file_len: u64) -> Result<(), GgufError> {
        for (name, info) in &self.content.tensor_infos {
            let elems = info.shape.elem_count() as u64;
            let block = info.ggml_dtype.block_size() as u64;
            let bytes = elems / block * info.ggml_dtype.type_size() as u64;
            let end = self.content.tensor_data_offset + info.offset + bytes;
            if end > file_len {
                return Err(GgufError::Truncated {
                    path: self.path.clone(),
                    detail: format!(
                        "tensor `{name}` ends at byte {end} but the file has {file_len} bytes"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// candle reports a header that runs past the end of the file as an I/O "unexpected end of
/// file" or as a length exceeding the remaining bytes; both mean truncation.
fn header_error(path: &Path, err: &candle_core::Error) -> GgufError {
    let detail = err.to_string();
    let truncated = detail.contains("failed to fill whole buffer")
        || detail.contains("remaining")
        || detail.to_lowercase().contains("end of file");
    if truncated {
        GgufError::Truncated {
            path: path.to_path_buf(),
            detail: format!("header cut short ({detail})"),
        }
    } else {
        GgufError::Malformed {
            path: path.to_path_buf(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;
    use candle_core::quantized::{GgmlDType, gguf_file};

    /// A tiny GGUF with the given architecture and one f32 embedding of `vocab` × 8.
    fn write_tiny(path: &Path, arch: &str, vocab: usize) {
        let embd = Tensor::zeros((vocab, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let embd = QTensor::quantize(&embd, GgmlDType::F32).unwrap();
        let s = |v: &str| Value::String(v.to_string());
        let arch_v = s(arch);
        let entries: Vec<(String, Value)> = vec![
            (format!("{arch}.block_count"), Value::U32(2)),
            (format!("{arch}.embedding_length"), Value::U32(8)),
            (format!("{arch}.attention.head_count"), Value::U32(2)),
            (format!("{arch}.attention.head_count_kv"), Value::U32(1)),
            (format!("{arch}.feed_forward_length"), Value::U32(16)),
            (
                format!("{arch}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-6),
            ),
            (format!("{arch}.context_length"), Value::U64(64)),
            (format!("{arch}.attention.sliding_window"), Value::U32(4)),
        ];
        let mut metadata: Vec<(&str, &Value)> = vec![("general.architecture", &arch_v)];
        metadata.extend(entries.iter().map(|(k, v)| (k.as_str(), v)));
        let mut file = File::create(path).unwrap();
        gguf_file::write(&mut file, &metadata, &[("token_embd.weight", &embd)]).unwrap();
    }

    #[test]
    fn reads_config_with_gemma3_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny(&path, "gemma3", 10);
        let cfg = GgufFile::open(&path).unwrap().config().unwrap();
        assert_eq!(cfg.arch, Arch::Gemma3);
        assert_eq!(
            (cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.n_kv_heads),
            (2, 8, 2, 1)
        );
        assert_eq!(
            (cfg.head_dim, cfg.ffn, cfg.vocab_size, cfg.context_length),
            (4, 16, 10, 64)
        );
        assert_eq!(cfg.sliding_window_pattern, Some(6));
        assert_eq!(cfg.rope_base_local, Some(10_000.0));
        assert!(cfg.tied_embeddings);
        assert!(cfg.is_sliding(0) && !cfg.is_sliding(5) && cfg.is_sliding(6));
        assert_eq!(cfg.embed_scale, Some(8f32.sqrt()));
    }

    #[test]
    fn unsupported_architecture_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bert.gguf");
        write_tiny(&path, "bert", 10);
        let err = GgufFile::open(&path)
            .unwrap()
            .config()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bert.gguf") && err.contains("`bert`") && err.contains("gemma3"),
            "{err}"
        );
    }

    #[test]
    fn truncated_tensor_data_is_detected_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.gguf");
        write_tiny(&path, "llama", 1000);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
        let err = GgufFile::open(&path).unwrap_err();
        assert!(matches!(err, GgufError::Truncated { .. }), "{err}");
        std::fs::write(&path, &bytes[..40]).unwrap();
        let err = GgufFile::open(&path).unwrap_err();
        assert!(matches!(err, GgufError::Truncated { .. }), "{err}");
        std::fs::write(&path, &bytes[..2]).unwrap();
        assert!(matches!(
            GgufFile::open(&path).unwrap_err(),
            GgufError::Truncated { .. }
        ));
    }

    #[test]
    fn non_gguf_and_missing_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.gguf");
        std::fs::write(&path, "hello world").unwrap();
        let err = GgufFile::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("notes.gguf") && err.contains("not a GGUF file"),
            "{err}"
        );
        let missing = dir.path().join("absent.gguf");
        let err = GgufFile::open(&missing).unwrap_err().to_string();
        assert!(err.contains("absent.gguf"), "{err}");
    }

    #[test]
    fn wrong_metadata_type_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny(&path, "llama", 4);
        let file = GgufFile::open(&path).unwrap();
        let err = file.get_str("llama.block_count").unwrap_err().to_string();
        assert!(
            err.contains("llama.block_count") && err.contains("a string"),
            "{err}"
        );
        assert!(file.opt_usize("llama.nothing").unwrap().is_none());
    }
}
