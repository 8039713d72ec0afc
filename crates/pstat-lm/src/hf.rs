//! Hugging Face model folders: `config.json`, the weights in `model.safetensors` or in shards
//! listed by `model.safetensors.index.json`, `tokenizer.json` and (for chat models)
//! `tokenizer_config.json` or `chat_template.jinja`.
//!
//! The folder is read the way llama.cpp's `convert_hf_to_gguf.py` would convert it, so the
//! forward pass runs unchanged and a folder gives the same numbers as its GGUF conversion:
//!
//! - config.json fields become the GGUF metadata keys the converter writes
//!   (`num_hidden_layers` → `<arch>.block_count`, ...), and [`GgufFile::config`] reads them;
//! - tensor names are mapped (`model.layers.3.self_attn.q_proj.weight` → `blk.3.attn_q.weight`);
//! - Llama's q/k rows are permuted as the converter's `LlamaModel.permute` does (RoPE on
//!   adjacent pairs instead of halves);
//! - Gemma's norm weights get the `1 +` its RMSNorm applies (`GemmaModel`, `Gemma2Model`,
//!   `Gemma3Model.norm_shift`), computed in f32 as Hugging Face does;
//! - the multimodal `Gemma3ForConditionalGeneration` is read as its language model:
//!   `text_config` and the `language_model` tensors; the vision tower's tensors are never read.
//!
//! Weights keep their stored type (F32, F16 or BF16). Layer L of pstat's residual stream is
//! `hidden_states[L]` of transformers' `output_hidden_states=True` (0 = embeddings) for
//! L < n_layers; transformers' last entry has the final norm applied, pstat's layer n_layers
//! does not.

use crate::gguf::{Arch, Gelu, GgufError, GgufFile, ModelConfig};
use crate::weights::{RawTensor, SourceError, TensorSource};
use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::safetensors::MmapedSafetensors;
use half::{bf16, f16};
use safetensors::Dtype as safetensors_dtype;
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The model's configuration file in a Hugging Face folder.
pub const CONFIG: &str = "config.json";
/// The tokenizer file in a Hugging Face folder.
pub const TOKENIZER: &str = "tokenizer.json";
/// The tokenizer configuration file (special tokens, chat template) in a Hugging Face
/// folder.
pub const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// The stand-alone chat template file in a Hugging Face folder.
pub const CHAT_TEMPLATE: &str = "chat_template.jinja";
const SINGLE: &str = "model.safetensors";
const INDEX: &str = "model.safetensors.index.json";

/// Problems with a Hugging Face folder; each names the file and, where there is one, the field
/// or tensor.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    #[error(
        "{0}: missing (a Hugging Face model folder holds config.json, tokenizer.json and \
         model.safetensors or model.safetensors.index.json with its shards)"
    )]
    /// A file the folder needs is absent (the field is its path).
    Missing(PathBuf),
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file does not parse.
    #[error("{path}: not valid JSON: {detail}")]
    Json {
        /// The file at fault.
        path: PathBuf,
        /// The parser's error.
        detail: String,
    },
    /// A JSON field is missing, of the wrong type or out of range.
    #[error("{path}: field `{field}` {detail}")]
    Field {
        /// The file at fault.
        path: PathBuf,
        /// The field's name.
        field: String,
        /// What is wrong with it.
        detail: String,
    },
    #[error(
        "{path}: field `architectures`: `{arch}` is not supported (supported: {})",
        SUPPORTED.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
    )]
    /// `architectures` names a model class this crate does not run.
    UnsupportedArch {
        /// The file at fault.
        path: PathBuf,
        /// The class named.
        arch: String,
    },
    /// The safetensors weights are unreadable or inconsistent.
    #[error("{path}: {detail}")]
    Weights {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// `architectures[0]` values of config.json and the GGUF architecture each converts to.
const SUPPORTED: &[(&str, Arch)] = &[
    ("LlamaForCausalLM", Arch::Llama),
    (MISTRAL, Arch::Llama),
    ("Qwen2ForCausalLM", Arch::Qwen2),
    ("GemmaForCausalLM", Arch::Gemma),
    ("Gemma2ForCausalLM", Arch::Gemma2),
    ("Gemma3ForCausalLM", Arch::Gemma3),
    ("Gemma3ForConditionalGeneration", Arch::Gemma3),
];

/// The one Llama-layout class whose config's `sliding_window` transformers applies.
const MISTRAL: &str = "MistralForCausalLM";

/// The multimodal Gemma 3 checkpoint: its language model's settings live under `text_config`
/// and its tensors under one of [`TEXT_MODEL_PREFIXES`]; the vision tower is not read.
const CONDITIONAL_GENERATION: &str = "Gemma3ForConditionalGeneration";

/// Where multimodal checkpoints keep the language model's `model.*` tensors (older
/// transformers wrote `language_model.model.*`, newer ones `model.language_model.*`), each
/// with the `lm_head.weight` name that goes with it.
const TEXT_MODEL_PREFIXES: [(&str, &str); 2] = [
    ("language_model.model.", "language_model.lm_head.weight"),
    ("model.language_model.", "lm_head.weight"),
];

/// Whether `path` is a Hugging Face folder rather than a GGUF file: any directory is treated as
/// one, so that a folder missing its files gets a message saying which.
pub fn is_folder(path: &Path) -> bool {
    path.is_dir()
}

/// Reads a JSON file of the folder.
pub fn read_json(path: &Path) -> Result<Json, HfError> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            HfError::Missing(path.to_path_buf())
        } else {
            HfError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    serde_json::from_str(&text).map_err(|e| HfError::Json {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// config.json (or its `text_config` section), with typed, range-checked field access.
struct Config {
    path: PathBuf,
    json: Json,
    /// Prefix of the section's fields in error messages (`text_config.` or empty).
    section: &'static str,
}

impl Config {
    fn field_error(&self, field: &str, detail: impl Into<String>) -> HfError {
        HfError::Field {
            path: self.path.clone(),
            field: format!("{}{field}", self.section),
            detail: detail.into(),
        }
    }

    fn get(&self, field: &str) -> Option<&Json> {
        self.json.get(field).filter(|v| !v.is_null())
    }

    /// A positive integer field, or `default` when absent.
    fn count_or(&self, field: &str, default: Option<usize>) -> Result<usize, HfError> {
        match self.get(field) {
            None => default.ok_or_else(|| self.field_error(field, "is missing")),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Ok(n as usize),
                _ => {
                    Err(self.field_error(field, format!("should be a positive integer, found {v}")))
                }
            },
        }
    }

    fn count(&self, field: &str) -> Result<usize, HfError> {
        self.count_or(field, None)
    }

    /// A positive float field, or `default` when absent.
    fn positive_or(&self, field: &str, default: Option<f64>) -> Result<f64, HfError> {
        match self.get(field) {
            None => default.ok_or_else(|| self.field_error(field, "is missing")),
            Some(v) => match v.as_f64() {
                Some(x) if runs_as_f32(x) => Ok(x),
                _ => Err(self.field_error(
                    field,
                    format!("should be a positive number in f32's range, found {v}"),
                )),
            },
        }
    }

    fn str_or<'a>(&'a self, field: &str, default: &'a str) -> Result<&'a str, HfError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v
                .as_str()
                .ok_or_else(|| self.field_error(field, format!("should be a string, found {v}"))),
        }
    }

    fn bool_or(&self, field: &str, default: bool) -> Result<bool, HfError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| {
                self.field_error(field, format!("should be true or false, found {v}"))
            }),
        }
    }

    /// Refuses a field whose value changes the computation in a way pstat does not implement.
    fn require(&self, field: &str, ok: bool, what: &str) -> Result<(), HfError> {
        if ok {
            Ok(())
        } else {
            let found = self
                .get(field)
                .map_or("absent".to_string(), Json::to_string);
            Err(self.field_error(field, format!("is {found}: {what}")))
        }
    }
}

/// How a tensor of the folder becomes the tensor the forward pass reads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Transform {
    None,
    /// The converter's `LlamaModel.permute` over `heads` heads: within each head, row
    /// `h · d/2 + i` moves to `2i + h`.
    PermuteRope {
        heads: usize,
    },
    /// Gemma's RMSNorm multiplies by `1 + w`.
    AddOne,
}

struct Mapped {
    hf_name: String,
    transform: Transform,
}

/// An opened Hugging Face folder: its config as GGUF metadata and its weights.
pub struct HfFolder {
    dir: PathBuf,
    /// config.json translated to GGUF keys, with every mapped tensor's shape.
    view: GgufFile,
    overrides: Overrides,
    /// Names of the HF architecture (`LlamaForCausalLM`, ...).
    hf_arch: String,
    weights: SafeTensors,
}

impl HfFolder {
    /// Reads config.json, checks the architecture and every field pstat uses, and opens the
    /// weight files, checking that they hold every tensor the model needs.
    pub fn open(dir: &Path) -> Result<Self, HfError> {
        let config_path = dir.join(CONFIG);
        let config = Config {
            json: read_json(&config_path)?,
            path: config_path,
            section: "",
        };
        let hf_arch = match config.get("architectures") {
            Some(Json::Array(names)) => match names.first() {
                Some(Json::String(name)) => name.clone(),
                _ => {
                    return Err(config.field_error(
                        "architectures",
                        "should start with the model class's name (e.g. [\"LlamaForCausalLM\"])",
                    ));
                }
            },
            Some(other) => {
                return Err(config.field_error(
                    "architectures",
                    format!("should be a list (e.g. [\"LlamaForCausalLM\"]), found {other}"),
                ));
            }
            None => {
                return Err(config.field_error(
                    "architectures",
                    "is missing (expected e.g. [\"LlamaForCausalLM\"])",
                ));
            }
        };
        let arch = SUPPORTED
            .iter()
            .find(|(name, _)| *name == hf_arch)
            .map(|&(_, arch)| arch)
            .ok_or_else(|| HfError::UnsupportedArch {
                path: config.path.clone(),
                arch: hf_arch.clone(),
            })?;
        let multimodal = hf_arch == CONDITIONAL_GENERATION;
        let config = if multimodal {
            match config.json.get("text_config") {
                Some(text @ Json::Object(_)) => Config {
                    json: text.clone(),
                    path: config.path.clone(),
                    section: "text_config.",
                },
                _ => {
                    return Err(config.field_error(
                        "text_config",
                        format!("is missing: {hf_arch} keeps the language model's settings there"),
                    ));
                }
            }
        } else {
            config
        };
        // The model's identity hashes the tokenizer with the weights: say it is missing here,
        // not as an I/O error half-way through loading.
        if !dir.join(TOKENIZER).is_file() {
            return Err(HfError::Missing(dir.join(TOKENIZER)));
        }
        let (metadata, shape, overrides) = translate(&config, arch, &hf_arch)?;
        let weights = SafeTensors::open(dir)?;
        let mut names = tensor_map(&shape, arch);
        if shape.tied {
            names.remove("output.weight");
        }
        if multimodal {
            text_model_names(&mut names, &weights);
        }
        let mut tensor_dims = HashMap::new();
        for (gguf_name, mapped) in &names {
            tensor_dims.insert(gguf_name.clone(), weights.dims(&mapped.hf_name)?);
        }
        weights.all_accounted_for(&names, &config, multimodal)?;
        let vocab = tensor_dims["token_embd.weight"][0];
        if let Some(v) = config.get("vocab_size")
            && v.as_u64() != Some(vocab as u64)
        {
            return Err(config.field_error(
                "vocab_size",
                format!("is {v}, but model.embed_tokens.weight has {vocab} rows"),
            ));
        }
        let view = GgufFile::from_metadata(config.path.clone(), metadata, tensor_dims);
        Ok(Self {
            dir: dir.to_path_buf(),
            view,
            overrides,
            hf_arch,
            weights: weights.with_names(names),
        })
    }

    /// The decoder's hyper-parameters as transformers runs the folder: the GGUF conversion's,
    /// with Llama 3's RoPE divisors, Gemma 2/3's `query_pre_attn_scalar`, Mistral's window
    /// and GELU in f32.
    pub fn config(&self) -> Result<ModelConfig, GgufError> {
        let mut config = self.view.config()?;
        config.rope_freq_factors = self.overrides.rope_freq_factors.clone();
        if let Some(scale) = self.overrides.attn_scale {
            config.attn_scale = scale;
        }
        if let Some(window) = self.overrides.sliding_window {
            config.sliding_window = Some(window);
        }
        config.gelu = Gelu::F32;
        Ok(config)
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// config.json as GGUF metadata: [`GgufFile::config`] gives the decoder's hyper-parameters.
    pub fn metadata(&self) -> &GgufFile {
        &self.view
    }

    /// `architectures[0]` of config.json.
    pub fn hf_arch(&self) -> &str {
        &self.hf_arch
    }

    /// The weights, by GGUF tensor name.
    pub fn tensors(&mut self) -> &mut dyn TensorSource {
        &mut self.weights
    }

    /// Every file the model is made of, for its fingerprint: config, tokenizer, weights.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.dir.join(CONFIG), self.dir.join(TOKENIZER)];
        files.extend(self.weights.files.iter().cloned());
        files
    }

    /// Stored type of the weight matrices (that of `model.embed_tokens.weight`).
    pub fn weight_type(&self) -> &'static str {
        self.weights.dtype_name("token_embd.weight")
    }

    /// Bytes the text model's weights take once loaded, from the safetensors headers alone:
    /// matrices in their stored type, vectors as f32 (as the forward pass keeps them). Tensors
    /// the model does not read (a vision tower) are not counted.
    pub fn weight_bytes(&self) -> u64 {
        self.weights.loaded_bytes()
    }
}

/// Where transformers computes a folder differently from the GGUF conversion llama.cpp runs;
/// [`HfFolder::config`] applies these over the metadata's config.
struct Overrides {
    /// Llama 3's RoPE divisors, which a GGUF carries as a tensor (`rope_freqs.weight`).
    rope_freq_factors: Option<Vec<f32>>,
    /// Gemma 2/3's q·k scale from `query_pre_attn_scalar`.
    attn_scale: Option<f32>,
    /// Mistral's window over every layer.
    sliding_window: Option<usize>,
}

/// What the tensor map needs to know about the model's shape.
struct Shape {
    n_layers: usize,
    n_heads: usize,
    n_kv_heads: usize,
    tied: bool,
}

/// The GGUF metadata `convert_hf_to_gguf.py` writes for `config`, after checking every field
/// pstat reads or refuses.
fn translate(
    config: &Config,
    arch: Arch,
    hf_arch: &str,
) -> Result<(HashMap<String, Value>, Shape, Overrides), HfError> {
    let a = arch.gguf_name();
    let gemma = arch.is_gemma();
    let mut meta: HashMap<String, Value> = HashMap::new();
    let mut put = |key: &str, value: Value| {
        meta.insert(format!("{a}.{key}"), value);
    };
    let u32_of = |field: &str, n: usize| -> Result<Value, HfError> {
        u32::try_from(n)
            .map(Value::U32)
            .map_err(|_| config.field_error(field, format!("is {n}, too large")))
    };
    let mut sliding_window = None;
    let n_layers = config.count("num_hidden_layers")?;
    let hidden = config.count("hidden_size")?;
    let n_heads = config.count("num_attention_heads")?;
    let n_kv_heads = config.count_or("num_key_value_heads", Some(n_heads))?;
    if n_heads % n_kv_heads != 0 {
        return Err(config.field_error(
            "num_key_value_heads",
            format!("is {n_kv_heads}: {n_heads} query heads cannot be grouped over it"),
        ));
    }
    let head_dim = match (config.get("head_dim"), gemma) {
        (Some(_), _) => config.count("head_dim")?,
        // The Gemma configs' default (transformers' GemmaConfig, Gemma2Config,
        // Gemma3TextConfig).
        (None, true) => 256,
        (None, false) => {
            if hidden % n_heads != 0 {
                return Err(config.field_error(
                    "num_attention_heads",
                    format!("is {n_heads}, which does not divide hidden_size {hidden}"),
                ));
            }
            hidden / n_heads
        }
    };
    if head_dim % 2 != 0 {
        return Err(config.field_error(
            "head_dim",
            format!("is {head_dim}: RoPE needs an even head size"),
        ));
    }
    put("block_count", u32_of("num_hidden_layers", n_layers)?);
    put("embedding_length", u32_of("hidden_size", hidden)?);
    put(
        "attention.head_count",
        u32_of("num_attention_heads", n_heads)?,
    );
    put(
        "attention.head_count_kv",
        u32_of("num_key_value_heads", n_kv_heads)?,
    );
    put("attention.key_length", u32_of("head_dim", head_dim)?);
    put("attention.value_length", u32_of("head_dim", head_dim)?);
    put(
        "feed_forward_length",
        u32_of("intermediate_size", config.count("intermediate_size")?)?,
    );
    let default_context = match arch {
        Arch::Gemma3 => Some(131_072),
        Arch::Gemma | Arch::Gemma2 => Some(8192),
        Arch::Llama | Arch::Qwen2 => None,
    };
    let context = config.count_or("max_position_embeddings", default_context)?;
    put(
        "context_length",
        u32_of("max_position_embeddings", context)?,
    );
    let eps = config.positive_or("rms_norm_eps", gemma.then_some(1e-6))?;
    put("attention.layer_norm_rms_epsilon", Value::F32(eps as f32));
    let (global_rope, local_rope) = rope_settings(config, arch)?;
    put("rope.freq_base", Value::F32(global_rope.theta as f32));
    let mut rope_freq_factors = None;
    match global_rope.scaling {
        RopeScaling::None => {}
        RopeScaling::Linear(factor) => {
            put("rope.scaling.type", Value::String("linear".into()));
            put("rope.scaling.factor", Value::F32(factor as f32));
        }
        RopeScaling::Llama3 { .. } => {
            // The per-pair divisors apply to every RoPE table of the model, so only to models
            // whose layers share one RoPE.
            if matches!(arch, Arch::Gemma2 | Arch::Gemma3) {
                return Err(config.field_error(
                    global_rope.field,
                    format!("asks for llama3 RoPE scaling, which is not implemented for {a}"),
                ));
            }
            rope_freq_factors = Some(global_rope.llama3_divisors(head_dim));
        }
    }
    match (arch, &local_rope) {
        (Arch::Gemma2 | Arch::Gemma3, None) => {
            // Gemma 2 rotates its local layers as its global ones; Gemma 3 (transformers
            // 4.x) with `rope_local_base_freq` and no scaling.
            if arch == Arch::Gemma3 {
                let base = config.positive_or("rope_local_base_freq", Some(10_000.0))?;
                put("rope.freq_base_swa", Value::F32(base as f32));
            }
        }
        (Arch::Gemma2 | Arch::Gemma3, Some(local)) => {
            // pstat's local layers take the global scaling (Gemma 2) or none (Gemma 3).
            let scaling_ok = if arch == Arch::Gemma2 {
                local.scaling == global_rope.scaling
            } else {
                local.scaling == RopeScaling::None
            };
            if !scaling_ok {
                return Err(config.field_error(
                    local.field,
                    format!(
                        "asks for {:?}: {a}'s sliding-window layers are implemented with {}",
                        local.scaling,
                        if arch == Arch::Gemma2 {
                            "the full-attention layers' RoPE scaling"
                        } else {
                            "no RoPE scaling"
                        }
                    ),
                ));
            }
            put("rope.freq_base_swa", Value::F32(local.theta as f32));
        }
        (_, Some(local))
            if (local.theta, &local.scaling) != (global_rope.theta, &global_rope.scaling) =>
        {
            return Err(config.field_error(
                local.field,
                format!("differs from the full-attention RoPE: {a} has no sliding-window layers with a RoPE of their own"),
            ));
        }
        (_, Some(_)) => {}
        (_, None) => {}
    }
    let partial = config.positive_or("partial_rotary_factor", Some(1.0))?;
    config.require(
        "partial_rotary_factor",
        partial == 1.0,
        "RoPE is implemented over whole heads",
    )?;
    if let Some(dtype) = config.get("dtype").or_else(|| config.get("torch_dtype")) {
        let field = if config.get("dtype").is_some() {
            "dtype"
        } else {
            "torch_dtype"
        };
        config.require(
            field,
            matches!(
                dtype.as_str(),
                Some("float32" | "float16" | "bfloat16" | "auto")
            ),
            "weights are read as float32, float16 or bfloat16",
        )?;
    }
    let activation = config.str_or(
        "hidden_activation",
        config.str_or(
            "hidden_act",
            if gemma { "gelu_pytorch_tanh" } else { "silu" },
        )?,
    )?;
    let expected_activation = if gemma { "gelu_pytorch_tanh" } else { "silu" };
    // Gemma 1 configs say `hidden_act: "gelu"`, yet transformers and llama.cpp both run the
    // tanh approximation for them.
    let accepted =
        activation == expected_activation || (arch == Arch::Gemma && activation == "gelu");
    config.require(
        if config.get("hidden_activation").is_some() {
            "hidden_activation"
        } else {
            "hidden_act"
        },
        accepted,
        &format!("this architecture is implemented with {expected_activation}"),
    )?;
    match arch {
        Arch::Llama => {
            config.require(
                "attention_bias",
                !config.bool_or("attention_bias", false)?,
                "attention biases are not implemented for llama",
            )?;
            config.require(
                "mlp_bias",
                !config.bool_or("mlp_bias", false)?,
                "MLP biases are not implemented",
            )?;
            // Mistral (v0.1) windows every layer (transformers' Llama never), llama.cpp ignores it.
            if hf_arch == MISTRAL && config.get("sliding_window").is_some() {
                sliding_window = Some(config.count("sliding_window")?);
            }
            all_full_attention(config, n_layers, sliding_window.is_some())?;
        }
        Arch::Qwen2 => {
            config.require(
                "use_sliding_window",
                !config.bool_or("use_sliding_window", false)?,
                "sliding-window attention is not implemented for qwen2",
            )?;
            all_full_attention(config, n_layers, false)?;
        }
        Arch::Gemma3 => {
            let window = config.count("sliding_window")?;
            put(
                "attention.sliding_window",
                u32_of("sliding_window", window)?,
            );
            put(
                "attention.sliding_window_pattern",
                u32_of(
                    "sliding_window_pattern",
                    window_pattern(config, n_layers, 6)?,
                )?,
            );
            config.require(
                "attn_logit_softcapping",
                config.get("attn_logit_softcapping").is_none(),
                "attention-logit soft-capping is not implemented for gemma3",
            )?;
            if config.get("final_logit_softcapping").is_some() {
                let cap = config.positive_or("final_logit_softcapping", None)?;
                put("final_logit_softcapping", Value::F32(cap as f32));
            }
        }
        Arch::Gemma => {
            config.require(
                "attention_bias",
                !config.bool_or("attention_bias", false)?,
                "attention biases are not implemented for gemma",
            )?;
        }
        Arch::Gemma2 => {
            // The converter reads these three without defaults (`Gemma2Model.set_gguf_parameters`).
            let window = config.count("sliding_window")?;
            put(
                "attention.sliding_window",
                u32_of("sliding_window", window)?,
            );
            config.require(
                "layer_types",
                window_pattern(config, n_layers, 2)? == 2,
                "gemma2 alternates local and global layers, starting with a local one",
            )?;
            for field in ["attn_logit_softcapping", "final_logit_softcapping"] {
                let cap = config.positive_or(field, None)?;
                put(field, Value::F32(cap as f32));
            }
        }
    }
    let attn_scale = match arch {
        Arch::Gemma2 | Arch::Gemma3 => {
            config.require(
                "attention_bias",
                !config.bool_or("attention_bias", false)?,
                &format!("attention biases are not implemented for {a}"),
            )?;
            config.require(
                "use_bidirectional_attention",
                !config.bool_or("use_bidirectional_attention", false)?,
                "attention is implemented as causal",
            )?;
            // transformers scales q·k by query_pre_attn_scalar^-1/2 (256 when absent, the
            // config classes' default); llama.cpp infers it from the block count instead.
            let scalar = config.positive_or("query_pre_attn_scalar", Some(256.0))?;
            Some((1.0 / scalar.sqrt()) as f32)
        }
        _ => None,
    };
    let tied = config.bool_or("tie_word_embeddings", gemma)?;
    meta.insert("general.architecture".into(), Value::String(a.into()));
    if let Some(name) = config.get("_name_or_path").and_then(Json::as_str) {
        meta.insert("general.name".into(), Value::String(name.into()));
    }
    Ok((
        meta,
        Shape {
            n_layers,
            n_heads,
            n_kv_heads,
            tied,
        },
        Overrides {
            rope_freq_factors,
            attn_scale,
            sliding_window,
        },
    ))
}

/// Refuses `layer_types` (transformers 5) naming sliding-window layers for an architecture
/// whose layers all attend alike: fully, or (`windowed`) all through the one window.
fn all_full_attention(config: &Config, n_layers: usize, windowed: bool) -> Result<(), HfError> {
    let Some(types) = config.get("layer_types") else {
        return Ok(());
    };
    let expected = if windowed {
        "sliding_attention"
    } else {
        "full_attention"
    };
    let ok = types
        .as_array()
        .is_some_and(|t| t.len() == n_layers && t.iter().all(|t| t.as_str() == Some(expected)));
    config.require(
        "layer_types",
        ok,
        &format!("every one of the {n_layers} layers is implemented as {expected}"),
    )
}

/// One RoPE as transformers computes it: base and scaling, with the config field it came from.
#[derive(Debug, Clone)]
struct RopeSetting {
    field: &'static str,
    theta: f64,
    scaling: RopeScaling,
}

#[derive(Debug, Clone, PartialEq)]
enum RopeScaling {
    None,
    /// Positions divided by the factor.
    Linear(f64),
    /// Llama 3's: low frequencies divided by `factor`, high ones kept, a smooth ramp between.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_context: f64,
    },
}

impl RopeSetting {
    /// Llama 3's divisor of each rotated pair's frequency, as transformers'
    /// `_compute_llama3_parameters` (and the GGUF converter's `rope_freqs.weight`) computes them.
    fn llama3_divisors(&self, rope_dim: usize) -> Vec<f32> {
        let RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_context,
        } = self.scaling
        else {
            unreachable!("called for llama3 scaling only")
        };
        let low_freq_wavelen = original_context / low_freq_factor;
        let high_freq_wavelen = original_context / high_freq_factor;
        (0..rope_dim / 2)
            .map(|i| {
                let freq = 1.0 / self.theta.powf((2 * i) as f64 / rope_dim as f64);
                let wavelen = 2.0 * std::f64::consts::PI / freq;
                let divisor = if wavelen < high_freq_wavelen {
                    1.0
                } else if wavelen > low_freq_wavelen {
                    factor
                } else {
                    let smooth = (original_context / wavelen - low_freq_factor)
                        / (high_freq_factor - low_freq_factor);
                    1.0 / ((1.0 - smooth) / factor + smooth)
                };
                divisor as f32
            })
            .collect()
    }
}

/// The RoPE types pstat implements, by transformers' `rope_type` names.
const ROPE_TYPES: &str = "default, linear, llama3";

/// The global RoPE and, where the config gives one, the sliding-window layers' own, from either
/// layout transformers writes:
/// - 4.x: top-level `rope_theta` and `rope_scaling` (Gemma 3: `rope_local_base_freq` for the
///   local layers, read by the caller);
/// - 5.x: `rope_parameters`, one setting with its `rope_theta`, or (Gemma 3) one per layer type
///   under `full_attention` and `sliding_attention`.
///
/// Every field that changes the rotation is read; a type or parameter pstat does not implement
/// is an error naming it, never a fallback to the default.
fn rope_settings(
    config: &Config,
    arch: Arch,
) -> Result<(RopeSetting, Option<RopeSetting>), HfError> {
    let default_theta = if arch == Arch::Gemma3 { 1e6 } else { 1e4 };
    let Some(params) = config.get("rope_parameters") else {
        let theta = config.positive_or("rope_theta", Some(default_theta))?;
        let global = match config.get("rope_scaling") {
            Some(scaling) => rope_setting(config, "rope_scaling", scaling, Some(theta))?,
            None => RopeSetting {
                field: "rope_theta",
                theta,
                scaling: RopeScaling::None,
            },
        };
        return Ok((global, None));
    };
    // A 4.x field next to the 5.x ones must not say something else.
    config.require(
        "rope_scaling",
        config.get("rope_scaling").is_none(),
        "rope_parameters holds the RoPE settings; a second place for them is ambiguous",
    )?;
    let per_type = ["full_attention", "sliding_attention"]
        .iter()
        .any(|t| params.get(t).is_some());
    let (global, local) = if per_type {
        let global = match params.get("full_attention") {
            Some(p) => rope_setting(config, "rope_parameters.full_attention", p, None)?,
            None => {
                return Err(config.field_error(
                    "rope_parameters.full_attention",
                    "is missing (rope_parameters is given per layer type)",
                ));
            }
        };
        let local = params
            .get("sliding_attention")
            .map(|p| rope_setting(config, "rope_parameters.sliding_attention", p, None))
            .transpose()?;
        (global, local)
    } else {
        (rope_setting(config, "rope_parameters", params, None)?, None)
    };
    if let Some(theta) = config.get("rope_theta")
        && theta.as_f64() != Some(global.theta)
    {
        return Err(config.field_error(
            "rope_theta",
            format!(
                "is {theta}: differs from {}.rope_theta = {}",
                global.field, global.theta
            ),
        ));
    }
    Ok((global, local))
}

/// One RoPE object (`rope_scaling` of 4.x, an entry of `rope_parameters` of 5.x); `theta` is
/// given for 4.x, where the base lives outside the object.
/// Whether a positive setting survives the model's f32 arithmetic: a value that rounds to 0,
/// to a subnormal (whose inverse is infinite) or to infinity would be refused later under its
/// GGUF key instead of the config's field.
fn runs_as_f32(x: f64) -> bool {
    x > 0.0 && (x as f32).is_normal()
}

fn rope_setting(
    config: &Config,
    field: &'static str,
    params: &Json,
    theta: Option<f64>,
) -> Result<RopeSetting, HfError> {
    let bad = |key: &str, detail: String| config.field_error(&format!("{field}.{key}"), detail);
    if !params.is_object() {
        return Err(config.field_error(field, format!("should be an object, found {params}")));
    }
    let number = |key: &str| -> Result<f64, HfError> {
        match params.get(key) {
            None | Some(Json::Null) => Err(bad(key, "is missing".into())),
            Some(v) => v.as_f64().filter(|&x| runs_as_f32(x)).ok_or_else(|| {
                bad(
                    key,
                    format!("should be a positive number in f32's range, found {v}"),
                )
            }),
        }
    };
    let theta = match theta {
        Some(theta) => theta,
        None => number("rope_theta")?,
    };
    let type_key = if params.get("rope_type").is_some() {
        "rope_type"
    } else {
        "type"
    };
    let kind = match params.get(type_key) {
        None | Some(Json::Null) => "default",
        Some(v) => v
            .as_str()
            .ok_or_else(|| bad(type_key, format!("should be a string, found {v}")))?,
    };
    if let Some(v) = params.get("partial_rotary_factor").filter(|v| !v.is_null())
        && v.as_f64() != Some(1.0)
    {
        return Err(bad(
            "partial_rotary_factor",
            format!("is {v}: RoPE is implemented over whole heads"),
        ));
    }
    let scaling = match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear(number("factor")?),
        "llama3" => {
            let (low, high) = (number("low_freq_factor")?, number("high_freq_factor")?);
            if high <= low {
                return Err(bad(
                    "high_freq_factor",
                    format!("is {high}, it must exceed low_freq_factor {low}"),
                ));
            }
            RopeScaling::Llama3 {
                factor: number("factor")?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_context: number("original_max_position_embeddings")?,
            }
        }
        other => {
            return Err(bad(
                type_key,
                format!("is `{other}`: pstat implements the RoPE types {ROPE_TYPES}"),
            ));
        }
    };
    Ok(RopeSetting {
        field,
        theta,
        scaling,
    })
}

/// Gemma 2/3's local/global layout as a period: `layer_types` (newer configs) or
/// `sliding_window_pattern` (older ones, else `default`); layer i is global when (i + 1) is a
/// multiple of it.
fn window_pattern(config: &Config, n_layers: usize, default: usize) -> Result<usize, HfError> {
    let Some(types) = config.get("layer_types") else {
        return config.count_or("sliding_window_pattern", Some(default));
    };
    let types: Vec<&str> = types
        .as_array()
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    if types.len() != n_layers {
        return Err(config.field_error(
            "layer_types",
            format!(
                "lists {} layers, num_hidden_layers is {n_layers}",
                types.len()
            ),
        ));
    }
    let pattern = types
        .iter()
        .position(|t| *t == "full_attention")
        .map_or(n_layers + 1, |i| i + 1);
    let fits = types.iter().enumerate().all(|(i, t)| {
        let global = (i + 1) % pattern == 0;
        *t == if global {
            "full_attention"
        } else {
            "sliding_attention"
        }
    });
    config.require(
        "layer_types",
        fits,
        "global layers must recur with a fixed period",
    )?;
    Ok(pattern)
}

/// GGUF tensor name → Hugging Face tensor and transform, for every tensor the forward pass of
/// `arch` reads (`output.weight` included; callers drop it for tied embeddings).
fn tensor_map(shape: &Shape, arch: Arch) -> HashMap<String, Mapped> {
    let plain = |hf: &str| Mapped {
        hf_name: hf.to_string(),
        transform: Transform::None,
    };
    let norm = |hf: String| Mapped {
        hf_name: hf,
        transform: if arch.is_gemma() {
            Transform::AddOne
        } else {
            Transform::None
        },
    };
    let mut map = HashMap::new();
    map.insert(
        "token_embd.weight".into(),
        plain("model.embed_tokens.weight"),
    );
    map.insert("output.weight".into(), plain("lm_head.weight"));
    map.insert(
        "output_norm.weight".into(),
        norm("model.norm.weight".into()),
    );
    let permute = arch == Arch::Llama;
    for i in 0..shape.n_layers {
        let hf = |t: &str| format!("model.layers.{i}.{t}");
        let mut put = |gguf: &str, hf_name: String, transform: Transform| {
            map.insert(format!("blk.{i}.{gguf}"), Mapped { hf_name, transform });
        };
        let rope = |heads| {
            if permute {
                Transform::PermuteRope { heads }
            } else {
                Transform::None
            }
        };
        put(
            "attn_q.weight",
            hf("self_attn.q_proj.weight"),
            rope(shape.n_heads),
        );
        put(
            "attn_k.weight",
            hf("self_attn.k_proj.weight"),
            rope(shape.n_kv_heads),
        );
        put(
            "attn_v.weight",
            hf("self_attn.v_proj.weight"),
            Transform::None,
        );
        put(
            "attn_output.weight",
            hf("self_attn.o_proj.weight"),
            Transform::None,
        );
        put(
            "ffn_gate.weight",
            hf("mlp.gate_proj.weight"),
            Transform::None,
        );
        put("ffn_up.weight", hf("mlp.up_proj.weight"), Transform::None);
        put(
            "ffn_down.weight",
            hf("mlp.down_proj.weight"),
            Transform::None,
        );
        let n = norm(hf("input_layernorm.weight"));
        put("attn_norm.weight", n.hf_name, n.transform);
        match arch {
            Arch::Llama => {
                put(
                    "ffn_norm.weight",
                    hf("post_attention_layernorm.weight"),
                    Transform::None,
                );
            }
            Arch::Qwen2 => {
                put(
                    "ffn_norm.weight",
                    hf("post_attention_layernorm.weight"),
                    Transform::None,
                );
                put("attn_q.bias", hf("self_attn.q_proj.bias"), Transform::None);
                put("attn_k.bias", hf("self_attn.k_proj.bias"), Transform::None);
                put("attn_v.bias", hf("self_attn.v_proj.bias"), Transform::None);
            }
            Arch::Gemma => {
                put(
                    "ffn_norm.weight",
                    hf("post_attention_layernorm.weight"),
                    Transform::AddOne,
                );
            }
            Arch::Gemma2 | Arch::Gemma3 => {
                for (gguf, name) in [
                    (
                        "post_attention_norm.weight",
                        "post_attention_layernorm.weight",
                    ),
                    ("ffn_norm.weight", "pre_feedforward_layernorm.weight"),
                    ("post_ffw_norm.weight", "post_feedforward_layernorm.weight"),
                ] {
                    put(gguf, hf(name), Transform::AddOne);
                }
                if arch == Arch::Gemma3 {
                    put(
                        "attn_q_norm.weight",
                        hf("self_attn.q_norm.weight"),
                        Transform::AddOne,
                    );
                    put(
                        "attn_k_norm.weight",
                        hf("self_attn.k_norm.weight"),
                        Transform::AddOne,
                    );
                }
            }
        }
    }
    map
}

/// Moves the names of a text-only map to where a multimodal checkpoint keeps them: the first
/// of [`TEXT_MODEL_PREFIXES`] whose embedding the weights hold (the first when none does, so
/// that the missing-tensor error names a layout that exists).
fn text_model_names(names: &mut HashMap<String, Mapped>, weights: &SafeTensors) {
    let (prefix, head) = TEXT_MODEL_PREFIXES
        .into_iter()
        .find(|(prefix, _)| weights.has_hf(&format!("{prefix}embed_tokens.weight")))
        .unwrap_or(TEXT_MODEL_PREFIXES[0]);
    for mapped in names.values_mut() {
        mapped.hf_name = match mapped.hf_name.strip_prefix("model.") {
            Some(rest) => format!("{prefix}{rest}"),
            None => head.to_string(),
        };
    }
}

/// The safetensors files of a folder, each tensor found through the index (or the single file).
struct SafeTensors {
    files: Vec<PathBuf>,
    mapped: Vec<MmapedSafetensors>,
    /// Hugging Face tensor name → index into `files`.
    routing: HashMap<String, usize>,
    /// The file that routed the names: the index, or the single file.
    router: PathBuf,
    /// GGUF name → Hugging Face tensor (set once the architecture's map is known).
    names: HashMap<String, Mapped>,
}

impl SafeTensors {
    fn open(dir: &Path) -> Result<Self, HfError> {
        let index_path = dir.join(INDEX);
        let single = dir.join(SINGLE);
        let (files, listed, router): (Vec<PathBuf>, Option<HashMap<String, String>>, PathBuf) =
            if index_path.is_file() {
                let index = read_json(&index_path)?;
                let map = index
                    .get("weight_map")
                    .and_then(Json::as_object)
                    .ok_or_else(|| HfError::Field {
                        path: index_path.clone(),
                        field: "weight_map".into(),
                        detail: "is missing or not an object".into(),
                    })?;
                let mut listed = HashMap::new();
                let mut shards = BTreeSet::new();
                for (name, file) in map {
                    let file = file.as_str().ok_or_else(|| HfError::Field {
                        path: index_path.clone(),
                        field: format!("weight_map.{name}"),
                        detail: "should be a file name".into(),
                    })?;
                    if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                        return Err(HfError::Field {
                            path: index_path.clone(),
                            field: format!("weight_map.{name}"),
                            detail: format!("names `{file}`, not a file of the folder"),
                        });
                    }
                    shards.insert(file.to_string());
                    listed.insert(name.clone(), file.to_string());
                }
                let files = shards.into_iter().map(|f| dir.join(f)).collect();
                (files, Some(listed), index_path)
            } else if single.is_file() {
                (vec![single.clone()], None, single)
            } else {
                return Err(HfError::Missing(single));
            };
        let mut mapped = Vec::with_capacity(files.len());
        for file in &files {
            if !file.is_file() {
                return Err(HfError::Weights {
                    path: router.clone(),
                    detail: format!("shard {} is missing", file.display()),
                });
            }
            // SAFETY: the mapping is only read, while the model loads; like every mmap reader
            // (llama.cpp included) we rely on no other process truncating the file meanwhile.
            let st = unsafe { MmapedSafetensors::new(file) }.map_err(|e| HfError::Weights {
                path: file.clone(),
                detail: format!("not a readable safetensors file: {e}"),
            })?;
            mapped.push(st);
        }
        let mut routing = HashMap::new();
        match listed {
            None => {
                for (name, _) in mapped[0].tensors() {
                    routing.insert(name, 0);
                }
            }
            // The index is the authority: each tensor it lists must be in the shard it names.
            Some(listed) => {
                for (name, file) in listed {
                    let at = files
                        .iter()
                        .position(|f| f.file_name().is_some_and(|n| n == file.as_str()))
                        .expect("every listed shard is in `files`");
                    if mapped[at].get(&name).is_err() {
                        return Err(HfError::Weights {
                            path: files[at].clone(),
                            detail: format!(
                                "tensor `{name}` listed in {INDEX} is not in this shard"
                            ),
                        });
                    }
                    routing.insert(name, at);
                }
            }
        }
        Ok(Self {
            files,
            mapped,
            routing,
            router,
            names: HashMap::new(),
        })
    }

    fn with_names(mut self, names: HashMap<String, Mapped>) -> Self {
        self.names = names;
        self
    }

    /// Refuses tensors the model would not read: a config with fewer layers than the weights,
    /// an `lm_head.weight` next to tied embeddings, anything else unknown. Tensors transformers
    /// also skips are allowed: RoPE buffers of old checkpoints and, in a multimodal checkpoint,
    /// the vision tower and its projector.
    fn all_accounted_for(
        &self,
        names: &HashMap<String, Mapped>,
        config: &Config,
        multimodal: bool,
    ) -> Result<(), HfError> {
        let read: BTreeSet<&str> = names.values().map(|m| m.hf_name.as_str()).collect();
        let skipped = |name: &str| {
            name.ends_with(".rotary_emb.inv_freq")
                || (multimodal
                    && ["vision_tower.", "multi_modal_projector."]
                        .iter()
                        .any(|p| name.starts_with(p) || name.starts_with(&format!("model.{p}"))))
        };
        let mut unread: Vec<&str> = self
            .routing
            .keys()
            .map(String::as_str)
            .filter(|name| !read.contains(name) && !skipped(name))
            .collect();
        if unread.is_empty() {
            return Ok(());
        }
        unread.sort_unstable();
        let shown: Vec<String> = unread.iter().take(3).map(|n| format!("`{n}`")).collect();
        Err(HfError::Weights {
            path: self.router.clone(),
            detail: format!(
                "{} tensor(s) that {}{CONFIG} does not account for ({}{}): check                  num_hidden_layers, tie_word_embeddings and architectures",
                unread.len(),
                config.section,
                shown.join(", "),
                if unread.len() > 3 { ", ..." } else { "" }
            ),
        })
    }

    /// Whether the folder holds Hugging Face tensor `hf_name`.
    fn has_hf(&self, hf_name: &str) -> bool {
        self.routing.contains_key(hf_name)
    }

    /// The file holding Hugging Face tensor `hf_name`, or an error naming the file that should
    /// have listed it.
    fn locate(&self, hf_name: &str) -> Result<usize, HfError> {
        self.routing
            .get(hf_name)
            .copied()
            .ok_or_else(|| HfError::Weights {
                path: self.router.clone(),
                detail: format!("tensor `{hf_name}` is missing"),
            })
    }

    fn dims(&self, hf_name: &str) -> Result<Vec<usize>, HfError> {
        let at = self.locate(hf_name)?;
        let view = self.mapped[at].get(hf_name).map_err(|e| HfError::Weights {
            path: self.files[at].clone(),
            detail: format!("tensor `{hf_name}`: {e}"),
        })?;
        Ok(view.shape().to_vec())
    }

    fn loaded_bytes(&self) -> u64 {
        self.names
            .values()
            .filter_map(|m| {
                let at = self.locate(&m.hf_name).ok()?;
                let view = self.mapped[at].get(&m.hf_name).ok()?;
                let elements: u64 = view.shape().iter().map(|&d| d as u64).product();
                Some(if view.shape().len() == 1 {
                    elements * 4
                } else {
                    elements * view.dtype().bitsize() as u64 / 8
                })
            })
            .sum()
    }

    fn dtype_name(&self, gguf_name: &str) -> &'static str {
        let dtype = self
            .names
            .get(gguf_name)
            .and_then(|m| Some((self.locate(&m.hf_name).ok()?, &m.hf_name)))
            .and_then(|(at, name)| self.mapped[at].get(name).ok())
            .map(|v| v.dtype());
        match dtype {
            Some(safetensors_dtype::BF16) => "bf16",
            Some(safetensors_dtype::F16) => "f16",
            Some(safetensors_dtype::F32) => "f32",
            _ => "other",
        }
    }
}

impl TensorSource for SafeTensors {
    fn has(&self, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|m| self.routing.contains_key(&m.hf_name))
    }

    fn origin(&self, name: &str) -> String {
        let file = self
            .names
            .get(name)
            .and_then(|m| self.routing.get(&m.hf_name))
            .map_or(&self.router, |&at| &self.files[at]);
        file.display().to_string()
    }

    fn raw(&mut self, name: &str) -> Result<RawTensor<'_>, SourceError> {
        let error = |file: &Path, detail: String| SourceError::Tensor {
            file: file.display().to_string(),
            name: name.to_string(),
            detail,
        };
        let mapped = self
            .names
            .get(name)
            .ok_or_else(|| error(&self.router, "has no Hugging Face counterpart".into()))?;
        let at = self
            .locate(&mapped.hf_name)
            .map_err(|e| error(&self.router, e.to_string()))?;
        let file = &self.files[at];
        let hf = &mapped.hf_name;
        let view = self.mapped[at]
            .get(hf)
            .map_err(|e| error(file, format!("`{hf}`: {e}")))?;
        let dims = view.shape().to_vec();
        let dtype = match view.dtype() {
            safetensors_dtype::F32 => GgmlDType::F32,
            safetensors_dtype::F16 => GgmlDType::F16,
            safetensors_dtype::BF16 => GgmlDType::BF16,
            other => {
                return Err(error(
                    file,
                    format!("`{hf}` is stored as {other:?}; supported: F32, F16, BF16"),
                ));
            }
        };
        let data: Box<dyn std::io::Read + '_> = match mapped.transform {
            Transform::None => Box::new(view.data()),
            Transform::PermuteRope { heads } => Box::new(std::io::Cursor::new(
                permute_rope_rows(view.data(), &dims, heads)
                    .map_err(|detail| error(file, format!("`{hf}`: {detail}")))?,
            )),
            Transform::AddOne => {
                let values = to_f32(view.dtype(), view.data());
                let bytes: Vec<u8> = values
                    .iter()
                    .flat_map(|v| (v + 1.0).to_le_bytes())
                    .collect();
                return Ok(RawTensor {
                    dims,
                    dtype: GgmlDType::F32,
                    data: Box::new(std::io::Cursor::new(bytes)),
                });
            }
        };
        Ok(RawTensor { dims, dtype, data })
    }

    fn tensor(&mut self, name: &str) -> Result<QTensor, SourceError> {
        let error = |file: &Path, detail: String| SourceError::Tensor {
            file: file.display().to_string(),
            name: name.to_string(),
            detail,
        };
        let mapped = self
            .names
            .get(name)
            .ok_or_else(|| error(&self.router, "has no Hugging Face counterpart".into()))?;
        let at = self
            .locate(&mapped.hf_name)
            .map_err(|e| error(&self.router, e.to_string()))?;
        let file = &self.files[at];
        let view = self.mapped[at]
            .get(&mapped.hf_name)
            .map_err(|e| error(file, format!("`{}`: {e}", mapped.hf_name)))?;
        let dims = view.shape().to_vec();
        let bytes = view.data();
        let hf = &mapped.hf_name;
        let storage = match (view.dtype(), mapped.transform) {
            (
                safetensors_dtype::F32 | safetensors_dtype::F16 | safetensors_dtype::BF16,
                Transform::AddOne,
            ) => {
                let mut values = to_f32(view.dtype(), bytes);
                values.iter_mut().for_each(|v| *v += 1.0);
                QStorage::Cpu(Box::new(values))
            }
            (dtype, transform) => {
                let bytes = match transform {
                    Transform::PermuteRope { heads } => permute_rope_rows(bytes, &dims, heads)
                        .map_err(|detail| error(file, format!("`{hf}`: {detail}")))?,
                    _ => bytes.to_vec(),
                };
                match dtype {
                    safetensors_dtype::F32 => {
                        QStorage::Cpu(Box::new(decode(&bytes, f32::from_le_bytes)))
                    }
                    safetensors_dtype::F16 => {
                        QStorage::Cpu(Box::new(decode(&bytes, f16::from_le_bytes)))
                    }
                    safetensors_dtype::BF16 => {
                        QStorage::Cpu(Box::new(decode(&bytes, bf16::from_le_bytes)))
                    }
                    other => {
                        return Err(error(
                            file,
                            format!("`{hf}` is stored as {other:?}; supported: F32, F16, BF16"),
                        ));
                    }
                }
            }
        };
        QTensor::new(storage, dims).map_err(|e| error(file, format!("`{hf}`: {e}")))
    }
}

/// Little-endian elements of `bytes`.
fn decode<T, const N: usize>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| from(c.try_into().expect("chunks_exact yields N bytes")))
        .collect()
}

fn to_f32(dtype: safetensors_dtype, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        safetensors_dtype::F16 => decode(bytes, f16::from_le_bytes)
            .into_iter()
            .map(f32::from)
            .collect(),
        safetensors_dtype::BF16 => decode(bytes, bf16::from_le_bytes)
            .into_iter()
            .map(f32::from)
            .collect(),
        _ => decode(bytes, f32::from_le_bytes),
    }
}

/// `LlamaModel.permute` of convert_hf_to_gguf.py on raw rows: the tensor (a weight `[rows,
/// cols]` or a bias `[rows]`) is viewed as `[heads, 2, rows/heads/2, ...]` and its axes 1 and 2
/// swapped, so GGUF row `head·d + 2i + h` is Hugging Face row `head·d + h·d/2 + i`.
fn permute_rope_rows(bytes: &[u8], dims: &[usize], heads: usize) -> Result<Vec<u8>, String> {
    let rows = dims.first().copied().unwrap_or(0);
    if rows == 0 || rows % (2 * heads) != 0 {
        return Err(format!(
            "{rows} rows cannot be split into {heads} heads of RoPE pairs"
        ));
    }
    let row_bytes = bytes.len() / rows;
    let half = rows / heads / 2;
    let mut out = Vec::with_capacity(bytes.len());
    for head in 0..heads {
        for i in 0..half {
            for h in 0..2 {
                let src = head * 2 * half + h * half + i;
                out.extend_from_slice(&bytes[src * row_bytes..(src + 1) * row_bytes]);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_permutation_matches_the_converter() {
        // numpy: w.reshape(2, 2, 2, 1).swapaxes(1, 2).reshape(8, 1) for rows 0..8, 2 heads.
        let bytes: Vec<u8> = (0u8..8).collect();
        let out = permute_rope_rows(&bytes, &[8, 1], 2).unwrap();
        assert_eq!(out, vec![0, 2, 1, 3, 4, 6, 5, 7]);
        assert!(permute_rope_rows(&bytes, &[8, 1], 3).is_err());
    }

    /// A folder whose header claims a 512 GiB embedding (the file is sparse: no data is
    /// written) is counted from its header and refused by the memory check.
    #[test]
    fn a_huge_header_is_counted_and_refused() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/gemma/hf");
        let dir = tempfile::tempdir().unwrap();
        let mut config = read_json(&fixture.join(CONFIG)).unwrap();
        let vocab: u64 = 1 << 32;
        config["vocab_size"] = vocab.into();
        std::fs::write(dir.path().join(CONFIG), config.to_string()).unwrap();
        std::fs::copy(fixture.join(TOKENIZER), dir.path().join(TOKENIZER)).unwrap();
        let bytes = std::fs::read(fixture.join(SINGLE)).unwrap();
        let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Json = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
        let mut fake = serde_json::Map::new();
        let mut offset = 0u64;
        for (name, info) in header.as_object().unwrap() {
            if name == "__metadata__" {
                continue;
            }
            let mut shape: Vec<u64> = serde_json::from_value(info["shape"].clone()).unwrap();
            if name == "model.embed_tokens.weight" {
                shape[0] = vocab;
            }
            let size = shape.iter().product::<u64>() * 2; // bf16
            fake.insert(
                name.clone(),
                serde_json::json!({"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}),
            );
            offset += size;
        }
        let text = Json::Object(fake).to_string();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(text.as_bytes());
        let file = dir.path().join(SINGLE);
        std::fs::write(&file, &out).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(out.len() as u64 + offset)
            .unwrap();

        let folder = HfFolder::open(dir.path()).unwrap();
        let embedding = vocab * 64 * 2;
        assert!(folder.weight_bytes() > embedding && folder.weight_bytes() < embedding + (1 << 20));
        let config = folder.config().unwrap();
        let mut estimate = crate::memory::MemoryEstimate::of(folder.metadata(), &config);
        estimate.weights = folder.weight_bytes();
        let err = estimate.check(64 << 30).unwrap_err().0;
        assert!(err.contains("weights 512.00 GiB"), "{err}");
    }
}
