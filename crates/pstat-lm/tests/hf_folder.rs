//! Hugging Face folders against their GGUF conversions: tiny random-weight models of each
//! supported architecture, written both ways by tools/hf/make_tiny_pairs.py (the GGUF as
//! llama.cpp's convert_hf_to_gguf.py would write it: names mapped, Llama's q/k rows permuted,
//! Gemma's norms shifted by one). The two must give identical hidden states at every layer and
//! identical next-token log-probabilities (Gemma's up to the GELU each reference evaluates
//! differently); both config layouts of transformers read to the same model; the folders'
//! tokenizer.json and chat templates load; and a damaged folder, or a setting pstat does not
//! implement, gives a one-line error naming the file and the field or tensor.

use pstat_lm::chat::{ChatError, ChatTemplate, Message};
use pstat_lm::hf::HfFolder;
use pstat_lm::registry::ModelSource;
use pstat_lm::tokenizer::Tokenizer;
use pstat_lm::{Gelu, LanguageModel, ModelConfig};
use std::path::{Path, PathBuf};

fn fixture(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(arch)
}

/// Sequences of assorted lengths (longer than the Gemma 2/3 fixtures' 8-token window) over the
/// whole vocabulary.
fn sequences(vocab: usize) -> Vec<Vec<u32>> {
    (0..6u32)
        .map(|s| {
            let len = 3 + 7 * s as usize;
            (0..len as u32)
                .map(|i| (s * 977 + i * 131 + i * i * 17) % vocab as u32)
                .collect()
        })
        .collect()
}

/// The folder and its GGUF conversion read to the same decoder, except that a folder's GELU is
/// transformers' (f32) and a GGUF's llama.cpp's (an f16 table): with the same GELU the numbers
/// are bit-identical; Gemma's differ by the table's rounding only.
fn same_numbers(arch: &str) {
    let dir = fixture(arch);
    let from_hf = LanguageModel::load(&dir.join("hf")).unwrap_or_else(|e| panic!("{e}"));
    let from_gguf = LanguageModel::load(&dir.join("model.gguf")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(from_hf.config().gelu, Gelu::F32);
    assert_eq!(from_gguf.config().gelu, Gelu::F16Table);
    let same_gelu = ModelConfig {
        gelu: Gelu::F16Table,
        ..from_hf.config().clone()
    };
    assert_eq!(&same_gelu, from_gguf.config(), "{arch}: configs differ");
    let config = from_hf.config();
    let exact = !config.arch.is_gemma();
    let seqs = sequences(config.vocab_size);
    let layers: Vec<usize> = (0..=config.n_layers).collect();
    let a = from_hf.hidden_states(&seqs, &layers).unwrap();
    let b = from_gguf.hidden_states(&seqs, &layers).unwrap();
    for (s, (x, y)) in a.iter().zip(&b).enumerate() {
        for (l, (u, v)) in x.iter().zip(y).enumerate() {
            if exact {
                assert_eq!(
                    u, v,
                    "{arch}: sequence {s}, layer {l}: hidden states differ"
                );
            } else {
                for (p, q) in u.iter().zip(v) {
                    assert!(
                        (p - q).abs() <= 1e-2 * (1.0 + q.abs()),
                        "{arch}: sequence {s}, layer {l}: {p} vs {q}"
                    );
                }
            }
        }
    }
    let all: Vec<u32> = (0..config.vocab_size as u32).collect();
    let p = from_hf.next_token_logprobs(None, &seqs, &all).unwrap();
    let q = from_gguf.next_token_logprobs(None, &seqs, &all).unwrap();
    if exact {
        assert_eq!(p, q, "{arch}: next-token log-probabilities differ");
    } else {
        for (x, y) in p.iter().zip(&q) {
            for (u, v) in x.logprobs.iter().zip(&y.logprobs) {
                assert!((u - v).abs() < 1e-2, "{arch}: log p {u} vs {v}");
            }
        }
    }
    // Not a degenerate model: the residual stream changes through the blocks.
    assert_ne!(a[0][0], a[0][config.n_layers]);
}

#[test]
fn llama_folder_bf16_sharded_matches_its_gguf() {
    same_numbers("llama");
}

#[test]
fn qwen2_folder_f16_matches_its_gguf() {
    same_numbers("qwen2");
}

#[test]
fn gemma3_folder_f32_matches_its_gguf() {
    same_numbers("gemma3");
}

#[test]
fn gemma_folder_bf16_matches_its_gguf() {
    same_numbers("gemma");
}

#[test]
fn gemma2_folder_f16_with_soft_caps_matches_its_gguf() {
    same_numbers("gemma2");
}

/// The multimodal layout: settings under `text_config`, tensors under
/// `model.language_model.*`, vision tensors beside them that are never read.
#[test]
fn gemma3_conditional_generation_folder_matches_its_gguf() {
    same_numbers("gemma3mm");
}

/// The older multimodal layout (`language_model.model.*`) reads the same weights.
#[test]
fn gemma3_conditional_generation_older_tensor_names_load() {
    let dir = scratch("gemma3mm");
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    // Same length, so the offsets after the header stay valid.
    let renamed = header.replace("model.language_model.", "language_model.model.");
    assert_eq!(renamed.len(), header.len());
    let mut out = bytes[..8].to_vec();
    out.extend_from_slice(renamed.as_bytes());
    out.extend_from_slice(&bytes[8 + header_len..]);
    std::fs::write(&path, out).unwrap();
    let renamed = LanguageModel::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let original = LanguageModel::load(&fixture("gemma3mm").join("hf")).unwrap();
    let seqs = sequences(original.config().vocab_size);
    let layers = [original.config().n_layers];
    assert_eq!(
        renamed.hidden_states(&seqs, &layers).unwrap(),
        original.hidden_states(&seqs, &layers).unwrap()
    );
}

#[test]
fn folder_reports_its_weight_type_and_architecture() {
    for (arch, hf_arch, dtype) in [
        ("llama", "LlamaForCausalLM", "bf16"),
        ("qwen2", "Qwen2ForCausalLM", "f16"),
        ("gemma3", "Gemma3ForCausalLM", "f32"),
        ("gemma", "GemmaForCausalLM", "bf16"),
        ("gemma2", "Gemma2ForCausalLM", "f16"),
        ("gemma3mm", "Gemma3ForConditionalGeneration", "bf16"),
    ] {
        let folder = HfFolder::open(&fixture(arch).join("hf")).unwrap();
        assert_eq!((folder.hf_arch(), folder.weight_type()), (hf_arch, dtype));
    }
}

#[test]
fn tokenizer_json_and_chat_templates_load() {
    let llama = fixture("llama").join("hf");
    let tokenizer = Tokenizer::load(&llama).unwrap();
    let bos = tokenizer.bos_id().unwrap();
    assert_eq!(tokenizer.token_text(bos), Some("<|begin_of_text|>"));
    assert!(tokenizer.adds_bos());
    let ids = tokenizer
        .encode("The city of Paris is in France.", true, false)
        .unwrap();
    assert_eq!(ids[0], bos);
    assert!(ids.len() > 4 && ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()));
    assert_eq!(
        tokenizer.decode(&ids[1..]),
        "The city of Paris is in France."
    );
    // Special-token text is split out only when asked.
    let parsed = tokenizer.encode("<|eot_id|>", false, true).unwrap();
    assert_eq!(parsed, vec![tokenizer.token_id("<|eot_id|>").unwrap()]);
    assert!(tokenizer.encode("<|eot_id|>", false, false).unwrap().len() > 1);
    let template = ChatTemplate::load(&llama, &tokenizer).unwrap();
    let text = template
        .render(&[Message::new("user", "Is Paris in France?")], true)
        .unwrap();
    assert_eq!(
        text,
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nIs Paris in France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    );
    let ids = template.tokenize(&tokenizer, &text).unwrap();
    assert_eq!(ids.iter().filter(|&&id| id == bos).count(), 1, "one BOS");

    // Qwen 2: no BOS added; the template comes from tokenizer_config.json.
    let qwen = fixture("qwen2").join("hf");
    let tokenizer = Tokenizer::load(&qwen).unwrap();
    assert!(!tokenizer.adds_bos());
    let template = ChatTemplate::load(&qwen, &tokenizer).unwrap();
    assert!(
        template
            .render(&[Message::new("user", "x")], true)
            .unwrap()
            .ends_with("<|im_start|>assistant\n")
    );

    // Gemma 3 fixture is a base model: no template, and pstat says so.
    let gemma = fixture("gemma3").join("hf");
    let tokenizer = Tokenizer::load(&gemma).unwrap();
    assert!(matches!(
        ChatTemplate::load(&gemma, &tokenizer),
        Err(ChatError::NoTemplate(_))
    ));
}

/// transformers reads chat_template.jinja before tokenizer_config.json's `chat_template`, so a
/// folder with both renders the file's; a `chat_template` that is neither text nor a list of
/// named templates is an error naming the file, not a base model.
#[test]
fn chat_template_jinja_takes_priority_as_in_transformers() {
    let dir = scratch("qwen2");
    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "FILE {{ messages[0]['content'] }}",
    )
    .unwrap();
    let tokenizer = Tokenizer::load(dir.path()).unwrap();
    let template = ChatTemplate::load(dir.path(), &tokenizer).unwrap();
    assert_eq!(
        template.render(&[Message::new("user", "x")], true).unwrap(),
        "FILE x"
    );

    let dir = scratch("qwen2");
    edit_json(&dir.path().join("tokenizer_config.json"), |v| {
        v["chat_template"] = serde_json::json!(5)
    });
    let err = ChatTemplate::load(dir.path(), &tokenizer)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("tokenizer_config.json") && err.contains("`chat_template`"),
        "{err}"
    );
}

#[test]
fn model_source_tells_the_formats_apart() {
    let llama = fixture("llama");
    let folder = ModelSource::resolve(llama.join("hf").to_str().unwrap()).unwrap();
    assert_eq!(folder.format(), "hf");
    let gguf = ModelSource::resolve(llama.join("model.gguf").to_str().unwrap()).unwrap();
    assert_eq!(gguf.format(), "gguf");
    let err = ModelSource::resolve("/no/such/model")
        .unwrap_err()
        .to_string();
    assert!(err.contains("/no/such/model"), "{err}");
}

/// A copy of fixture `arch`'s folder that a test may damage.
fn scratch(arch: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(arch).join("hf")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn load_error(dir: &Path) -> String {
    let err = LanguageModel::load(dir).unwrap_err().to_string();
    assert!(!err.contains('\n'), "one line: {err}");
    err
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, value.to_string()).unwrap();
}

#[test]
fn damaged_folders_are_refused_with_the_file_and_field() {
    // A missing file.
    let dir = scratch("qwen2");
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let err = load_error(dir.path());
    assert!(
        err.contains("config.json") && err.contains("missing"),
        "{err}"
    );

    let dir = scratch("qwen2");
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let err = load_error(dir.path());
    assert!(
        err.contains("model.safetensors") && err.contains("missing"),
        "{err}"
    );

    let dir = scratch("qwen2");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let err = Tokenizer::load(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("missing"),
        "{err}"
    );

    // Shards that do not cover every tensor.
    let dir = scratch("llama");
    let index = dir.path().join("model.safetensors.index.json");
    edit_json(&index, |v| {
        v["weight_map"]
            .as_object_mut()
            .unwrap()
            .remove("model.layers.1.mlp.up_proj.weight");
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("model.safetensors.index.json")
            && err.contains("model.layers.1.mlp.up_proj.weight"),
        "{err}"
    );

    // A shard named by the index that is not there.
    let dir = scratch("llama");
    std::fs::remove_file(dir.path().join("model-00002-of-00002.safetensors")).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("model-00002-of-00002.safetensors"), "{err}");

    // An unsupported architecture.
    let dir = scratch("qwen2");
    edit_json(&dir.path().join("config.json"), |v| {
        v["architectures"] = serde_json::json!(["FalconForCausalLM"]);
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("config.json")
            && err.contains("architectures")
            && err.contains("FalconForCausalLM"),
        "{err}"
    );

    // Config fields out of range or unsupported.
    for (field, value, expect) in [
        (
            "architectures",
            serde_json::json!("Qwen2ForCausalLM"),
            "should be a list",
        ),
        (
            "num_attention_heads",
            serde_json::json!(0),
            "positive integer",
        ),
        ("num_key_value_heads", serde_json::json!(3), "grouped"),
        ("rms_norm_eps", serde_json::json!(-1.0), "positive number"),
        ("rms_norm_eps", serde_json::json!(1e-50), "f32's range"),
        ("rope_theta", serde_json::json!(1e50), "f32's range"),
        (
            "num_hidden_layers",
            serde_json::json!("two"),
            "positive integer",
        ),
        ("hidden_act", serde_json::json!("gelu"), "silu"),
        (
            "rope_scaling",
            serde_json::json!({"rope_type": "yarn", "factor": 4.0}),
            "RoPE types default, linear, llama3",
        ),
        (
            "rope_parameters",
            serde_json::json!({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6}),
            "`rope_parameters.rope_type` is `dynamic`",
        ),
        (
            "rope_parameters",
            serde_json::json!({"rope_type": "llama3", "factor": 8.0, "rope_theta": 1e6}),
            "`rope_parameters.low_freq_factor` is missing",
        ),
        (
            "rope_parameters",
            serde_json::json!({"rope_type": "default", "rope_theta": 1e4}),
            "`rope_theta` is 1000000.0: differs from rope_parameters.rope_theta",
        ),
        (
            "partial_rotary_factor",
            serde_json::json!(0.5),
            "whole heads",
        ),
        (
            "layer_types",
            serde_json::json!(["full_attention", "sliding_attention"]),
            "full_attention",
        ),
        ("dtype", serde_json::json!("float8_e4m3fn"), "float32"),
        ("vocab_size", serde_json::json!(7), "rows"),
    ] {
        let dir = scratch("qwen2");
        edit_json(&dir.path().join("config.json"), |v| v[field] = value);
        let err = load_error(dir.path());
        assert!(
            err.contains("config.json") && err.contains(field) && err.contains(expect),
            "{field}: {err}"
        );
    }

    // Gemma 2 fields the converter requires, and a multimodal config without its text model.
    for field in [
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "sliding_window",
    ] {
        let dir = scratch("gemma2");
        edit_json(&dir.path().join("config.json"), |v| {
            v.as_object_mut().unwrap().remove(field);
        });
        let err = load_error(dir.path());
        assert!(
            err.contains("config.json") && err.contains(field) && err.contains("missing"),
            "{field}: {err}"
        );
    }
    let dir = scratch("gemma3mm");
    edit_json(&dir.path().join("config.json"), |v| {
        v.as_object_mut().unwrap().remove("text_config");
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("config.json") && err.contains("`text_config`") && err.contains("missing"),
        "{err}"
    );
    let dir = scratch("gemma3mm");
    edit_json(&dir.path().join("config.json"), |v| {
        v["text_config"]["num_hidden_layers"] = serde_json::json!(0);
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("config.json") && err.contains("`text_config.num_hidden_layers`"),
        "{err}"
    );

    // Gemma 3: a sliding-window RoPE pstat does not implement, bidirectional attention.
    for (edit, expect) in [
        (
            serde_json::json!({"rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}}),
            "`rope_parameters.sliding_attention`",
        ),
        (
            serde_json::json!({"rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
            "`rope_parameters.full_attention` is missing",
        ),
        (
            serde_json::json!({"use_bidirectional_attention": true}),
            "causal",
        ),
        (
            serde_json::json!({"rope_parameters": {
                "full_attention": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0, "original_max_position_embeddings": 64,
                    "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
            "llama3 RoPE scaling, which is not implemented for gemma3",
        ),
    ] {
        let dir = scratch("gemma3");
        edit_json(&dir.path().join("config.json"), |v| {
            let v = v.as_object_mut().unwrap();
            v.remove("rope_theta");
            v.remove("rope_local_base_freq");
            for (key, value) in edit.as_object().unwrap() {
                v.insert(key.clone(), value.clone());
            }
        });
        let err = load_error(dir.path());
        assert!(
            err.contains("config.json") && err.contains(expect),
            "{expect}: {err}"
        );
    }

    // Tensors the config does not account for: fewer layers than the weights, a head beside
    // tied embeddings.
    let dir = scratch("qwen2");
    edit_json(&dir.path().join("config.json"), |v| {
        v["num_hidden_layers"] = serde_json::json!(1)
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("model.safetensors")
            && err.contains("does not account for")
            && err.contains("`model.layers.1."),
        "{err}"
    );
    let dir = scratch("llama");
    edit_json(&dir.path().join("config.json"), |v| {
        v["tie_word_embeddings"] = serde_json::json!(true)
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("model.safetensors.index.json") && err.contains("`lm_head.weight`"),
        "{err}"
    );

    // A tensor of the wrong shape names its shard and tensor.
    let dir = scratch("qwen2");
    edit_json(&dir.path().join("config.json"), |v| {
        v["intermediate_size"] = serde_json::json!(96)
    });
    let err = load_error(dir.path());
    assert!(
        err.contains("model.safetensors") && err.contains("blk.0.ffn_gate.weight"),
        "{err}"
    );
}

/// The config of `arch`'s fixture after `edit`.
fn config_after(
    arch: &str,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> ModelConfig {
    let dir = scratch(arch);
    edit_json(&dir.path().join("config.json"), |v| {
        edit(v.as_object_mut().unwrap())
    });
    HfFolder::open(dir.path())
        .map(|f| f.config().unwrap())
        .unwrap_or_else(|e| panic!("{arch}: {e}"))
}

/// transformers applies `sliding_window` to every layer of a Mistral and never to a Llama (its
/// Llama has no window): the same config key windows the one and not the other.
#[test]
fn only_mistral_folders_take_a_sliding_window() {
    let windowed = |class: &str| {
        config_after("llama", |c| {
            c.insert("architectures".into(), serde_json::json!([class]));
            c.insert("sliding_window".into(), serde_json::json!(4));
            c.insert("use_sliding_window".into(), serde_json::json!(true));
        })
        .sliding_window
    };
    assert_eq!(windowed("LlamaForCausalLM"), None);
    assert_eq!(windowed("MistralForCausalLM"), Some(4));
}

/// transformers 4.x writes RoPE settings at the top level (`rope_theta`, `rope_scaling`,
/// Gemma 3's `rope_local_base_freq`), 5.x under `rope_parameters` (Gemma 3: per layer type):
/// both read to the same model, and neither falls back to a default.
#[test]
fn both_config_layouts_read_the_same_rope() {
    let llama3 = serde_json::json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64});
    let old = config_after("llama", |c| {
        c.insert("rope_theta".into(), serde_json::json!(500000.0));
        c.insert("rope_scaling".into(), llama3.clone());
    });
    let new = config_after("llama", |c| {
        c.remove("rope_theta");
        let mut params = llama3.clone();
        params["rope_theta"] = serde_json::json!(500000.0);
        c.insert("rope_parameters".into(), params);
    });
    assert_eq!(old, new);
    assert_eq!(old.rope_base, 500000.0);
    // head_dim 16, base 5e5, original context 64: wavelengths 6.3 to 6e4 cover the three
    // regimes (kept below 16, divided by 8 above 64, smoothed between).
    let factors = old.rope_freq_factors.clone().unwrap();
    assert_eq!(factors.len(), 8);
    assert_eq!((factors[0], factors[7]), (1.0, 8.0));
    assert!(factors.iter().any(|&f| f > 1.0 && f < 8.0), "{factors:?}");
    // The older `type` key of rope_scaling.
    let mut legacy = llama3.clone();
    legacy.as_object_mut().unwrap().remove("rope_type");
    legacy["type"] = serde_json::json!("llama3");
    assert_eq!(
        config_after("llama", |c| {
            c.insert("rope_theta".into(), serde_json::json!(500000.0));
            c.insert("rope_scaling".into(), legacy);
        }),
        old
    );

    // Gemma 3: linear scaling on the global layers, a base of their own for the local ones.
    let old = config_after("gemma3", |c| {
        c.insert("rope_theta".into(), serde_json::json!(1e6));
        c.insert("rope_local_base_freq".into(), serde_json::json!(20000.0));
        c.insert(
            "rope_scaling".into(),
            serde_json::json!({"rope_type": "linear", "factor": 8.0}),
        );
        c.insert("query_pre_attn_scalar".into(), serde_json::json!(32));
    });
    let new = config_after("gemma3", |c| {
        c.remove("rope_theta");
        c.remove("rope_local_base_freq");
        c.insert("query_pre_attn_scalar".into(), serde_json::json!(32));
        c.insert(
            "rope_parameters".into(),
            serde_json::json!({
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}),
        );
        c.insert("dtype".into(), serde_json::json!("float32"));
    });
    assert_eq!(old, new);
    assert_eq!(
        (
            old.rope_base,
            old.rope_freq_scale,
            old.rope_base_local,
            old.rope_freq_scale_local
        ),
        (1e6, 0.125, Some(20000.0), 1.0)
    );
    // q·k is scaled by query_pre_attn_scalar^-1/2, not by the head width (16) nor the block
    // count.
    assert_eq!(old.attn_scale, (1.0 / 32f64.sqrt()) as f32);
}
