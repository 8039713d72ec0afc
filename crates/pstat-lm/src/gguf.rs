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
    /// Reading the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The GGUF file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the GGUF magic.
    #[error("{path}: not a GGUF file (it starts with {found:?}, a GGUF file starts with \"GGUF\")")]
    NotGguf {
        /// The GGUF file.
        path: PathBuf,
        /// The file's first (up to four) bytes, lossily as text.
        found: String,
    },
    /// The file ends before its header, metadata or tensors do.
    #[error("{path}: truncated GGUF file: {detail}")]
    Truncated {
        /// The GGUF file.
        path: PathBuf,
        /// What was cut short.
        detail: String,
    },
    /// The file's structure is invalid.
    #[error("{path}: malformed GGUF file: {detail}")]
    Malformed {
        /// The GGUF file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The architecture is not one this crate runs.
    #[error(
        "{path}: unsupported model architecture `{arch}` (supported: {})",
        Arch::SUPPORTED.join(", ")
    )]
    UnsupportedArch {
        /// The GGUF file.
        path: PathBuf,
        /// The `general.architecture` value.
        arch: String,
    },
    /// A required metadata key is absent.
    #[error("{path}: metadata key `{key}` is missing")]
    MissingKey {
        /// The GGUF file.
        path: PathBuf,
        /// The metadata key.
        key: String,
    },
    /// A metadata key has the wrong type.
    #[error("{path}: metadata key `{key}` should be {expected}, found {found}")]
    WrongType {
        /// The GGUF file.
        path: PathBuf,
        /// The metadata key.
        key: String,
        /// The type wanted, in words.
        expected: &'static str,
        /// The value found.
        found: String,
    },
    /// A tensor the model needs is absent.
    #[error("{path}: tensor `{name}` is missing")]
    MissingTensor {
        /// The GGUF file.
        path: PathBuf,
        /// The tensor's GGUF name.
        name: String,
    },
    /// A metadata value is out of the range the model can use.
    #[error("{path}: metadata key `{key}` {detail}")]
    OutOfRange {
        /// The GGUF file.
        path: PathBuf,
        /// The metadata key.
        key: String,
        /// Why the value is unusable.
        detail: String,
    },
}

/// Decoder architectures whose forward pass pstat implements (one file each in `model/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama and its relatives (Llama 2/3, Mistral, SmolLM): pre-norm, SiLU-gated MLP,
    /// interleaved RoPE, Llama 3's RoPE frequency factors.
    Llama,
    /// Qwen 2 (Qwen2.5): Llama layout plus q/k/v biases, NEOX RoPE.
    Qwen2,
    /// Gemma 1: Llama layout with GELU-tanh, scaled embeddings, NEOX RoPE.
    Gemma,
    /// Gemma 2: sandwich norms, attention and final logit soft-capping, alternating
    /// sliding-window layers.
    Gemma2,
    /// Gemma 3: Gemma 2 with q/k norms instead of attention soft-capping, local/global layers.
    Gemma3,
}

impl Arch {
    /// `general.architecture` values accepted, in the spelling GGUF uses.
    pub const SUPPORTED: [&'static str; 5] = ["llama", "qwen2", "gemma", "gemma2", "gemma3"];

    fn from_gguf(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            "gemma" => Some(Self::Gemma),
            "gemma2" => Some(Self::Gemma2),
            "gemma3" => Some(Self::Gemma3),
            _ => None,
        }
    }

    /// Gemma 1, 2 or 3: GELU-tanh, scaled embeddings, RMSNorm weights applied as `1 + w`.
    pub fn is_gemma(self) -> bool {
        matches!(self, Self::Gemma | Self::Gemma2 | Self::Gemma3)
    }

    /// The prefix of this architecture's metadata keys (`llama.block_count`, ...).
    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Gemma => "gemma",
            Self::Gemma2 => "gemma2",
            Self::Gemma3 => "gemma3",
        }
    }
}

/// Hyper-parameters of a decoder, read from GGUF metadata with llama.cpp's defaults where a key
/// is optional. Field names follow the usual transformer vocabulary; GGUF key in brackets.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    /// The architecture (`general.architecture`).
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
    /// Width of one value head (`attention.value_length`, default `hidden / n_heads`).
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
    /// Per-pair divisors of the RoPE frequencies (`rope_freqs.weight`: Llama 3's
    /// `rope_scaling` of type llama3), if any.
    pub rope_freq_factors: Option<Vec<f32>>,
    /// RoPE base of sliding-window layers (`rope.freq_base_swa`; Gemma 3: 10000, Gemma 2: the
    /// global base, when absent), if the model has such layers.
    pub rope_base_local: Option<f32>,
    /// RoPE position scale of sliding-window layers (Gemma 3: 1, Gemma 2: as global layers).
    pub rope_freq_scale_local: f32,
    /// RMSNorm epsilon (`attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Training context length (`context_length`): the longest sequence we accept.
    pub context_length: usize,
    /// Sliding-window width of local-attention layers (`attention.sliding_window`), if any.
    pub sliding_window: Option<usize>,
    /// With a sliding window: every `n`-th layer (1-based) attends globally, the others locally
    /// (`attention.sliding_window_pattern`; llama.cpp's defaults: Gemma 2: 2, Gemma 3: 6).
    pub sliding_window_pattern: Option<usize>,
    /// Multiplier of q·k before softmax.
    pub attn_scale: f32,
    /// Attention logits become `cap · tanh(logit / cap)` (`attn_logit_softcapping`, Gemma 2).
    pub attn_softcap: Option<f32>,
    /// Output logits become `cap · tanh(logit / cap)` (`final_logit_softcapping`, Gemma 2).
    pub final_softcap: Option<f32>,
    /// Multiplier applied to token embeddings (Gemma: sqrt(hidden)), if any.
    pub embed_scale: Option<f32>,
    /// How Gemma's GELU-tanh is evaluated: through llama.cpp's f16 table for GGUF files, in
    /// f32 as transformers does for Hugging Face folders, so each format matches its reference.
    pub gelu: Gelu,
    /// Rows of `token_embd.weight`.
    pub vocab_size: usize,
    /// True when the file has no `output.weight` and the LM head reuses `token_embd.weight`.
    pub tied_embeddings: bool,
}

/// The evaluation of GELU-tanh (see [`ModelConfig::gelu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gelu {
    /// ggml's CPU path: the input rounded to f16 indexes a table of f16 results.
    F16Table,
    /// The formula in f32 (torch's `gelu(approximate="tanh")`).
    F32,
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
        if let Some(alignment) = declared_alignment(&mut reader, file_len)
            && !alignment.is_power_of_two()
        {
            return Err(GgufError::OutOfRange {
                path: path.to_path_buf(),
                key: "general.alignment".to_string(),
                detail: format!("is {alignment}; tensor data is aligned to a power of two"),
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

    /// The path the file was opened from.
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

    /// Whether the file holds a tensor of this name.
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
                detail: format!("tensor `{name}`: {}", candle_message(&e)),
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

    /// The decoder's hyper-parameters, with llama.cpp's defaults for optional keys (its
    /// `load_hparams` and each architecture's `load_arch_hparams`). A value the forward pass
    /// cannot run with is refused naming its key.
    pub fn config(&self) -> Result<ModelConfig, GgufError> {
        let arch = self.arch()?;
        let key = |suffix: &str| format!("{}.{suffix}", arch.gguf_name());
        let positive = |suffix: &str| -> Result<usize, GgufError> {
            let k = key(suffix);
            match self.get_usize(&k)? {
                0 => Err(self.out_of_range(&k, "is 0")),
                n => Ok(n),
            }
        };
        let n_layers = self.all_blocks_within(positive("block_count")?, &key("block_count"))?;
        let hidden = positive("embedding_length")?;
        let n_heads = positive("attention.head_count")?;
        let kv_key = key("attention.head_count_kv");
        let n_kv_heads = self.opt_usize(&kv_key)?.unwrap_or(n_heads);
        if n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
            return Err(self.out_of_range(
                &kv_key,
                &format!("is {n_kv_heads}: {n_heads} query heads cannot be grouped over it"),
            ));
        }
        let head_dim = self
            .opt_usize(&key("attention.key_length"))?
            .unwrap_or(hidden / n_heads);
        if head_dim < 2 || head_dim % 2 != 0 {
            return Err(self.out_of_range(
                &key("attention.key_length"),
                &format!("is {head_dim}: RoPE needs an even head width of at least 2"),
            ));
        }
        let value_head_dim = self
            .opt_usize(&key("attention.value_length"))?
            .unwrap_or(hidden / n_heads);
        if value_head_dim == 0 {
            return Err(self.out_of_range(&key("attention.value_length"), "is 0"));
        }
        let rope_dim = self
            .opt_usize(&key("rope.dimension_count"))?
            .unwrap_or(head_dim);
        let rope_dim_ok = if arch == Arch::Llama {
            // llama.cpp refuses a partial rotation for Llama.
            rope_dim == head_dim
        } else {
            rope_dim > 0 && rope_dim % 2 == 0 && rope_dim <= head_dim
        };
        if !rope_dim_ok {
            return Err(self.out_of_range(
                &key("rope.dimension_count"),
                &format!("is {rope_dim}, the heads are {head_dim} wide"),
            ));
        }
        let rope_base = self
            .positive_f32(&key("rope.freq_base"))?
            .unwrap_or(10_000.0);
        let rope_freq_scale = self.rope_freq_scale(&key)?;
        let gemma = arch.is_gemma();
        let window_key = key("attention.sliding_window");
        let (sliding_window, default_pattern) = match arch {
            // llama.cpp: Gemma 2 alternates local and global layers (window 4096 unless the
            // file says otherwise); Gemma 3 has local layers only when the file gives a window,
            // five local for one global by default.
            Arch::Gemma2 => match self.opt_usize(&window_key)? {
                Some(0) => return Err(self.out_of_range(&window_key, "is 0")),
                w => (Some(w.unwrap_or(4096)), 2),
            },
            Arch::Gemma3 => (self.opt_usize(&window_key)?.filter(|&w| w > 0), 6),
            // Llama-family files may carry a window (Mistral v0.1); llama.cpp ignores it.
            Arch::Llama | Arch::Qwen2 | Arch::Gemma => (None, 0),
        };
        let sliding_window_pattern = match sliding_window {
            Some(_) => Some(
                self.opt_usize(&key("attention.sliding_window_pattern"))?
                    .unwrap_or(default_pattern),
            ),
            None => None,
        };
        // Local layers: Gemma 3 rotates them with base 10000 (or the file's) and no scaling;
        // Gemma 2 like the global layers unless the file gives a base of their own.
        let (rope_base_local, rope_freq_scale_local) = match arch {
            Arch::Gemma2 => (
                Some(
                    self.positive_f32(&key("rope.freq_base_swa"))?
                        .unwrap_or(rope_base),
                ),
                rope_freq_scale,
            ),
            Arch::Gemma3 => (
                Some(
                    self.positive_f32(&key("rope.freq_base_swa"))?
                        .unwrap_or(10_000.0),
                ),
                1.0,
            ),
            _ => (None, 1.0),
        };
        let embd_dims = self.tensor_dims("token_embd.weight")?;
        let vocab_size = embd_dims.first().copied().unwrap_or(0);
        // llama.cpp scales q·k by 1/sqrt(key_length), except for the 27B Gemma 2 (46 blocks)
        // and Gemma 3 (62 blocks), which use 1/sqrt(hidden / heads) (gemma_pytorch's config).
        let gemma_27b = matches!((arch, n_layers), (Arch::Gemma2, 46) | (Arch::Gemma3, 62));
        let attn_scale = if gemma_27b {
            1.0 / ((hidden / n_heads) as f32).sqrt()
        } else {
            1.0 / (head_dim as f32).sqrt()
        };
        // Gemma 2 caps attention logits (50 by default) and final logits (30); Gemma 3 only
        // final logits, when the file says so.
        let attn_softcap = match arch {
            Arch::Gemma2 => Some(
                self.positive_f32(&key("attn_logit_softcapping"))?
                    .unwrap_or(50.0),
            ),
            _ => None,
        };
        let final_softcap = match arch {
            Arch::Gemma2 => Some(
                self.positive_f32(&key("final_logit_softcapping"))?
                    .unwrap_or(30.0),
            ),
            Arch::Gemma3 => self.positive_f32(&key("final_logit_softcapping"))?,
            _ => None,
        };
        let rope_freq_factors = if arch == Arch::Llama && self.has_tensor("rope_freqs.weight") {
            Some(self.rope_freq_factors(rope_dim)?)
        } else {
            None
        };
        Ok(ModelConfig {
            arch,
            n_layers,
            hidden,
            n_heads,
            n_kv_heads,
            head_dim,
            value_head_dim,
            ffn: positive("feed_forward_length")?,
            rope_dim,
            rope_base,
            rope_freq_scale,
            rope_freq_factors,
            rope_base_local,
            rope_freq_scale_local,
            rms_eps: self
                .positive_f32(&key("attention.layer_norm_rms_epsilon"))?
                .ok_or_else(|| GgufError::MissingKey {
                    path: self.path.clone(),
                    key: key("attention.layer_norm_rms_epsilon"),
                })?,
            context_length: positive("context_length")?,
            sliding_window,
            sliding_window_pattern,
            attn_scale,
            attn_softcap,
            final_softcap,
            embed_scale: gemma.then(|| (hidden as f32).sqrt()),
            gelu: Gelu::F16Table,
            vocab_size,
            tied_embeddings: !self.has_tensor("output.weight"),
        })
    }

    /// RoPE position scale from `rope.scaling.type` and `rope.scaling.factor` as llama.cpp
    /// reads them: linear unless the file says otherwise, 1 for `none`; YaRN and LongRoPE are
    /// refused rather than run unscaled.
    fn rope_freq_scale(&self, key: &dyn Fn(&str) -> String) -> Result<f32, GgufError> {
        let type_key = key("rope.scaling.type");
        let factor = match self.positive_f32(&key("rope.scaling.factor"))? {
            Some(f) => Some(f),
            None => self.positive_f32(&key("rope.scale_linear"))?,
        };
        match self.opt_str(&type_key)?.unwrap_or("linear") {
            "none" => Ok(1.0),
            "linear" => Ok(factor.map_or(1.0, |f| 1.0 / f)),
            other => Err(self.out_of_range(
                &type_key,
                &format!("is `{other}`: only linear RoPE scaling is supported"),
            )),
        }
    }

    /// Llama 3's per-pair RoPE frequency divisors (`rope_freqs.weight`, written by the converter
    /// for `rope_scaling.rope_type = llama3`).
    fn rope_freq_factors(&self, rope_dim: usize) -> Result<Vec<f32>, GgufError> {
        let name = "rope_freqs.weight";
        let bad = |detail: String| GgufError::Malformed {
            path: self.path.clone(),
            detail: format!("tensor `{name}`: {detail}"),
        };
        let factors = self
            .tensor(name, &Device::Cpu)?
            .dequantize(&Device::Cpu)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| bad(candle_message(&e)))?;
        if factors.len() != rope_dim / 2 {
            return Err(bad(format!(
                "{} values, expected {} (one per rotated pair)",
                factors.len(),
                rope_dim / 2
            )));
        }
        if let Some(f) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(bad(format!("holds {f}, factors must be positive")));
        }
        Ok(factors)
    }

    /// An optional float key that must be finite and > 0 when present.
    fn positive_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        match self.opt_f32(key)? {
            // Normal, not only finite: the inverse of a subnormal scale is infinite.
            Some(v) if !(v.is_normal() && v > 0.0) => {
                Err(self.out_of_range(key, &format!("is {v}, must be a positive number")))
            }
            v => Ok(v),
        }
    }

    /// `n_layers`, once no tensor lies in a block beyond it. llama.cpp refuses a file with
    /// tensors it does not load; here the one case that would otherwise run silently: blocks
    /// beyond `block_count` (`key`).
    fn all_blocks_within(&self, n_layers: usize, key: &str) -> Result<usize, GgufError> {
        let beyond = self
            .content
            .tensor_infos
            .keys()
            .filter_map(|name| name.strip_prefix("blk.")?.split('.').next()?.parse().ok())
            .filter(|&block: &usize| block >= n_layers)
            .max();
        match beyond {
            Some(block) => Err(self.out_of_range(
                key,
                &format!(
                    "is {n_layers}, but the file stores tensors of block {block} (`blk.{block}.*`)"
                ),
            )),
            None => Ok(n_layers),
        }
    }

    fn out_of_range(&self, key: &str, detail: &str) -> GgufError {
        GgufError::OutOfRange {
            path: self.path.clone(),
            key: key.to_string(),
            detail: detail.to_string(),
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

    /// A bool key.
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

    /// A string key, `None` when absent (a wrong type is still an error).
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        self.optional(key, Self::get_str)
    }

    /// A non-negative integer key, `None` when absent (a wrong type is still an error).
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, GgufError> {
        self.optional(key, Self::get_usize)
    }

    /// A float key, `None` when absent (a wrong type is still an error).
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        self.optional(key, Self::get_f32)
    }

    /// A bool key, `None` when absent (a wrong type is still an error).
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

    /// Every tensor's data lies inside the file, computed without overflow: a header whose
    /// dimensions multiply past 2^64 could otherwise wrap to a size the file holds.
    fn check_tensor_extents(&self, file_len: u64) -> Result<(), GgufError> {
        for (name, info) in &self.content.tensor_infos {
            let malformed = |detail: String| GgufError::Malformed {
                path: self.path.clone(),
                detail: format!("tensor `{name}` {detail}"),
            };
            let dims = info.shape.dims();
            let elems = dims
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
                .ok_or_else(|| malformed(format!("has dimensions {dims:?}, too many elements")))?;
            let block = info.ggml_dtype.block_size() as u64;
            if elems % block != 0 {
                return Err(malformed(format!(
                    "has {elems} elements, not whole {:?} blocks of {block}",
                    info.ggml_dtype
                )));
            }
            let end = (elems / block)
                .checked_mul(info.ggml_dtype.type_size() as u64)
                .and_then(|bytes| bytes.checked_add(info.offset))
                .and_then(|end| end.checked_add(self.content.tensor_data_offset))
                .ok_or_else(|| {
                    malformed(format!(
                        "at offset {} with dimensions {dims:?} ends past 2^64 bytes",
                        info.offset
                    ))
                })?;
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

/// `general.alignment` as the header declares it, read ahead of candle's parser, which divides
/// by it unchecked (a 0 panics). Only the integer types candle takes count (others leave its
/// default of 32). `None` also when the metadata cannot be walked: candle then says what is
/// wrong with it.
fn declared_alignment(reader: &mut BufReader<File>, file_len: u64) -> Option<u64> {
    let mut walk = MetadataWalk { reader, file_len };
    let mut magic_and_version = [0u8; 8];
    walk.reader.read_exact(&mut magic_and_version).ok()?;
    let v1 = magic_and_version[4..] == 1u32.to_le_bytes();
    let _tensors = walk.count(v1)?;
    for _ in 0..walk.count(v1)? {
        let key_len = walk.count(v1)?;
        let key = walk.bytes(key_len)?;
        let value_type = walk.u32()?;
        if key == b"general.alignment" {
            let width = match value_type {
                0..=5 => fixed_width(value_type)?,
                _ => return None,
            };
            let raw = walk.bytes(width)?;
            let mut le = [0u8; 8];
            le[..raw.len()].copy_from_slice(&raw);
            let value = u64::from_le_bytes(le);
            let negative = value_type % 2 == 1 && raw[raw.len() - 1] & 0x80 != 0;
            return (!negative).then_some(value);
        }
        walk.skip_value(value_type, v1, 0)?;
    }
    None
}

/// A reader over GGUF metadata that refuses lengths beyond the file.
struct MetadataWalk<'r> {
    reader: &'r mut BufReader<File>,
    file_len: u64,
}

impl MetadataWalk<'_> {
    fn u32(&mut self) -> Option<u32> {
        let mut b = [0u8; 4];
        self.reader.read_exact(&mut b).ok()?;
        Some(u32::from_le_bytes(b))
    }

    /// A count or length: u32 in version 1, u64 since.
    fn count(&mut self, v1: bool) -> Option<u64> {
        let n = if v1 {
            u64::from(self.u32()?)
        } else {
            let mut b = [0u8; 8];
            self.reader.read_exact(&mut b).ok()?;
            u64::from_le_bytes(b)
        };
        (n <= self.file_len).then_some(n)
    }

    fn bytes(&mut self, n: u64) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(n).ok().filter(|&n| n <= 4096)?];
        self.reader.read_exact(&mut buf).ok()?;
        Some(buf)
    }

    fn skip(&mut self, n: u64) -> Option<()> {
        (n <= self.file_len).then_some(())?;
        self.reader.seek_relative(n as i64).ok()
    }

    /// Skips one value of GGUF type `value_type`; arrays nest at most a few levels.
    fn skip_value(&mut self, value_type: u32, v1: bool, depth: usize) -> Option<()> {
        if let Some(width) = fixed_width(value_type) {
            return self.skip(width);
        }
        match value_type {
            8 => {
                let len = self.count(v1)?;
                self.skip(len)
            }
            9 if depth < 4 => {
                let element = self.u32()?;
                let len = self.count(v1)?;
                if let Some(width) = fixed_width(element) {
                    return self.skip(len.checked_mul(width)?);
                }
                // Strings and arrays: each reads its length, so a count beyond what the file
                // holds ends at its end.
                for _ in 0..len {
                    self.skip_value(element, v1, depth + 1)?;
                }
                Some(())
            }
            _ => None,
        }
    }
}

/// Bytes of a GGUF scalar type; `None` for strings, arrays and unknown types.
fn fixed_width(value_type: u32) -> Option<u64> {
    match value_type {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
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
/// A candle error's message without the backtrace candle appends to it when RUST_BACKTRACE is
/// set: pstat's errors are one line.
pub(crate) fn candle_message(err: &impl std::fmt::Display) -> String {
    let text = err.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

fn header_error(path: &Path, err: &candle_core::Error) -> GgufError {
    let detail = candle_message(err);
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
        write_tiny_with(path, arch, vocab, Vec::new());
    }

    /// [`write_tiny`] with `overrides` replacing or adding metadata entries (keys without the
    /// architecture prefix).
    fn write_tiny_with(path: &Path, arch: &str, vocab: usize, overrides: Vec<(&str, Value)>) {
        let embd = Tensor::zeros((vocab, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let embd = QTensor::quantize(&embd, GgmlDType::F32).unwrap();
        let s = |v: &str| Value::String(v.to_string());
        let arch_v = s(arch);
        let mut entries: Vec<(String, Value)> = vec![
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
        for (key, value) in overrides {
            let key = if key.starts_with("general.") {
                key.to_string()
            } else {
                format!("{arch}.{key}")
            };
            entries.retain(|(k, _)| *k != key);
            entries.push((key, value));
        }
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
    fn reads_gemma2_defaults_and_llama_ignores_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        let overrides = vec![
            ("block_count", Value::U32(46)),
            ("attention.key_length", Value::U32(8)),
        ];
        write_tiny_with(&path, "gemma2", 10, overrides);
        let cfg = GgufFile::open(&path).unwrap().config().unwrap();
        assert_eq!(
            (cfg.sliding_window, cfg.sliding_window_pattern),
            (Some(4), Some(2))
        );
        assert!(cfg.is_sliding(0) && !cfg.is_sliding(1) && cfg.is_sliding(2));
        assert_eq!(
            (cfg.attn_softcap, cfg.final_softcap),
            (Some(50.0), Some(30.0))
        );
        assert_eq!(cfg.rope_base_local, Some(cfg.rope_base));
        // 46 blocks is the 27B model: q·k scaled by 1/sqrt(hidden / heads), not 1/sqrt(key_length).
        assert_eq!(cfg.attn_scale, 1.0 / 4f32.sqrt());
        write_tiny(&path, "llama", 10);
        let cfg = GgufFile::open(&path).unwrap().config().unwrap();
        assert_eq!(
            (cfg.sliding_window, cfg.attn_softcap, cfg.embed_scale),
            (None, None, None)
        );
    }

    #[test]
    fn out_of_range_fields_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.gguf");
        let s = |v: &str| Value::String(v.to_string());
        // (architecture, metadata overrides, the key the error must name)
        type Case = (&'static str, Vec<(&'static str, Value)>, &'static str);
        let cases: Vec<Case> = vec![
            (
                "llama",
                vec![("block_count", Value::U32(0))],
                "llama.block_count",
            ),
            (
                "llama",
                vec![("attention.head_count_kv", Value::U32(3))],
                "llama.attention.head_count_kv",
            ),
            (
                "qwen2",
                vec![("attention.key_length", Value::U32(5))],
                "qwen2.attention.key_length",
            ),
            (
                "llama",
                vec![("rope.dimension_count", Value::U32(2))],
                "llama.rope.dimension_count",
            ),
            (
                "llama",
                vec![("rope.scaling.type", s("yarn"))],
                "llama.rope.scaling.type",
            ),
            (
                "llama",
                vec![("rope.scaling.factor", Value::F32(1e-40))],
                "llama.rope.scaling.factor",
            ),
            (
                "gemma2",
                vec![("attn_logit_softcapping", Value::F32(-1.0))],
                "gemma2.attn_logit_softcapping",
            ),
            (
                "gemma2",
                vec![("attention.sliding_window", Value::U32(0))],
                "gemma2.attention.sliding_window",
            ),
            (
                "gemma",
                vec![("attention.layer_norm_rms_epsilon", Value::F32(f32::NAN))],
                "gemma.attention.layer_norm_rms_epsilon",
            ),
        ];
        for (arch, overrides, key) in cases {
            write_tiny_with(&path, arch, 10, overrides);
            let err = GgufFile::open(&path)
                .unwrap()
                .config()
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("odd.gguf")
                    && err.contains(&format!("`{key}`"))
                    && !err.contains('\n'),
                "{err}"
            );
        }
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

    /// A header that candle would divide by (alignment 0), or one llama.cpp refuses (not a
    /// power of two), is an error naming the key.
    #[test]
    fn an_alignment_that_is_not_a_power_of_two_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aligned.gguf");
        for (alignment, accepted) in [
            (Value::U32(0), false),
            (Value::U8(3), false),
            (Value::U16(64), true),
            (Value::I32(-8), true),
            (Value::String("zero".into()), true),
        ] {
            write_tiny_with(
                &path,
                "llama",
                4,
                vec![
                    ("general.alignment", alignment.clone()),
                    ("general.name", Value::String("x".repeat(100))),
                    ("attention.head_count", Value::U32(2)),
                ],
            );
            match GgufFile::open(&path) {
                Ok(_) => assert!(accepted, "{alignment:?} accepted"),
                Err(err) => {
                    let err = err.to_string();
                    assert!(!accepted, "{alignment:?}: {err}");
                    assert!(
                        err.contains("aligned.gguf") && err.contains("`general.alignment`"),
                        "{err}"
                    );
                }
            }
        }
    }

    /// Dimensions whose product wraps past 2^64 to the size the file holds are refused at
    /// open, not loaded as a vocabulary of 2^61 tokens.
    #[test]
    fn dimensions_that_overflow_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wrap.gguf");
        write_tiny(&path, "llama", 1000);
        let mut bytes = std::fs::read(&path).unwrap();
        let name = b"token_embd.weight";
        let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len();
        // n_dims (u32) = 2, then ne0 = 8 and ne1 = 1000 (u64 each): 8·(2^61 + 1000) wraps to
        // 8·1000.
        assert_eq!(bytes[at..at + 4], 2u32.to_le_bytes());
        assert_eq!(bytes[at + 12..at + 20], 1000u64.to_le_bytes());
        bytes[at + 12..at + 20].copy_from_slice(&((1u64 << 61) + 1000).to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let err = GgufFile::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("wrap.gguf") && err.contains("token_embd.weight"),
            "{err}"
        );
    }

    /// Tensors of a block beyond `block_count` would be left out silently: refused.
    #[test]
    fn blocks_beyond_the_block_count_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extra.gguf");
        let norm = Tensor::zeros(8, candle_core::DType::F32, &Device::Cpu).unwrap();
        let norm = QTensor::quantize(&norm, GgmlDType::F32).unwrap();
        let arch = Value::String("llama".into());
        let metadata: Vec<(&str, &Value)> = vec![
            ("general.architecture", &arch),
            ("llama.block_count", &Value::U32(2)),
            ("llama.embedding_length", &Value::U32(8)),
            ("llama.attention.head_count", &Value::U32(2)),
        ];
        let mut file = File::create(&path).unwrap();
        gguf_file::write(&mut file, &metadata, &[("blk.2.attn_norm.weight", &norm)]).unwrap();
        let err = GgufFile::open(&path)
            .unwrap()
            .config()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("extra.gguf")
                && err.contains("llama.block_count")
                && err.contains("block 2"),
            "{err}"
        );
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
