//! Hugging Face folders against their GGUF conversions: tiny random-weight models of each
//! supported architecture, written both ways by tools/hf/make_tiny_pairs.py (the GGUF as
//! llama.cpp's convert_hf_to_gguf.py would write it: names mapped, Llama's q/k rows permuted,
//! Gemma's norms shifted by one). The two must give identical hidden states at every layer and
//! identical next-token log-probabilities; the folders' tokenizer.json and chat templates load;
//! and a damaged folder gives a one-line error naming the file and the field or tensor.

use pstat_lm::LanguageModel;
use pstat_lm::chat::{ChatError, ChatTemplate, Message};
use pstat_lm::hf::HfFolder;
use pstat_lm::registry::ModelSource;
use pstat_lm::tokenizer::Tokenizer;
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

fn same_numbers(arch: &str) {
    let dir = fixture(arch);
    let from_hf = LanguageModel::load(&dir.join("hf")).unwrap_or_else(|e| panic!("{e}"));
    let from_gguf = LanguageModel::load(&dir.join("model.gguf")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        from_hf.config(),
        from_gguf.config(),
        "{arch}: configs differ"
    );
    let config = from_hf.config();
    let seqs = sequences(config.vocab_size);
    let layers: Vec<usize> = (0..=config.n_layers).collect();
    let a = from_hf.hidden_states(&seqs, &layers).unwrap();
    let b = from_gguf.hidden_states(&seqs, &layers).unwrap();
    for (s, (x, y)) in a.iter().zip(&b).enumerate() {
        for (l, (u, v)) in x.iter().zip(y).enumerate() {
            assert_eq!(
                u, v,
                "{arch}: sequence {s}, layer {l}: hidden states differ"
            );
        }
    }
    let all: Vec<u32> = (0..config.vocab_size as u32).collect();
    let p = from_hf.next_token_logprobs(None, &seqs, &all).unwrap();
    let q = from_gguf.next_token_logprobs(None, &seqs, &all).unwrap();
    assert_eq!(p, q, "{arch}: next-token log-probabilities differ");
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
            "num_attention_heads",
            serde_json::json!(0),
            "positive integer",
        ),
        ("num_key_value_heads", serde_json::json!(3), "grouped"),
        ("rms_norm_eps", serde_json::json!(-1.0), "positive number"),
        (
            "num_hidden_layers",
            serde_json::json!("two"),
            "positive integer",
        ),
        ("hidden_act", serde_json::json!("gelu"), "silu"),
        (
            "rope_scaling",
            serde_json::json!({"rope_type": "yarn", "factor": 4.0}),
            "RoPE scaling",
        ),
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

/// Opt-in: set PSTAT_TRANSFORMERS_PYTHON to an interpreter with torch and transformers. pstat's
/// layer L is transformers' `hidden_states[L]` (L < n_layers) and the logits agree; tolerances
/// cover f32 summation order (transformers upcasts the bf16/f16 weights to f32 here too).
#[test]
fn transformers_agrees() {
    let Some(python) = std::env::var_os("PSTAT_TRANSFORMERS_PYTHON").or_else(|| {
        pstat_testkit::opt_in_missing("PSTAT_TRANSFORMERS_PYTHON is not set, nothing compared")
    }) else {
        return;
    };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/hf/transformers_hidden.py");
    #[derive(serde::Deserialize)]
    struct Reference {
        hidden: Vec<Vec<Vec<f32>>>,
        logits: Vec<Vec<f32>>,
    }
    for arch in ["llama", "qwen2", "gemma3"] {
        let dir = fixture(arch).join("hf");
        let lm = LanguageModel::load(&dir).unwrap();
        let config = lm.config().clone();
        let seqs = sequences(config.vocab_size);
        let mut child = std::process::Command::new(&python)
            .arg(&script)
            .arg(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("PSTAT_TRANSFORMERS_PYTHON runs");
        serde_json::to_writer(child.stdin.take().unwrap(), &seqs).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{arch}: transformers failed");
        let reference: Reference = serde_json::from_slice(&output.stdout).unwrap();
        let layers: Vec<usize> = (0..config.n_layers).collect();
        let ours = lm.hidden_states(&seqs, &layers).unwrap();
        let mut worst = 0f32;
        for (s, seq) in ours.iter().enumerate() {
            for (l, states) in seq.iter().enumerate() {
                let theirs = &reference.hidden[s][l];
                assert_eq!(states.len(), theirs.len(), "{arch}: sequence {s} layer {l}");
                for (a, b) in states.iter().zip(theirs) {
                    worst = worst.max((a - b).abs() / (1.0 + b.abs()));
                }
            }
        }
        assert!(worst < 1e-4, "{arch}: hidden states differ by {worst}");
        let all: Vec<u32> = (0..config.vocab_size as u32).collect();
        let next = lm.next_token_logprobs(None, &seqs, &all).unwrap();
        for (s, n) in next.iter().enumerate() {
            let logits = &reference.logits[s];
            let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let z: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
            for (id, &lp) in n.logprobs.iter().enumerate() {
                let theirs = (logits[id] - max) as f64 - z.ln();
                assert!(
                    (lp as f64 - theirs).abs() < 1e-3,
                    "{arch}: sequence {s} token {id}: {lp} vs {theirs}"
                );
            }
        }
        eprintln!(
            "{arch}: transformers agrees (worst relative hidden-state difference {worst:.2e})"
        );
    }
}
