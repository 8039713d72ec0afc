//! A tiny random-weight Llama written as a GGUF file with the Llama 2 vocabulary of
//! llama.cpp's tokenizer tests: a real model for tests that run whole commands in seconds.
//! Shared by the tests of pstat-study and pstat-cli (included by path).

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

/// The Llama 2 vocabulary (SentencePiece, 32000 tokens) that scripts/test unpacks; without it
/// a failure under CI=true, else a skip.
pub fn vocabulary() -> Option<PathBuf> {
    let dir = std::env::var_os("PSTAT_LLAMA_VOCAB_DIR").or_else(|| {
        pstat_testkit::missing("PSTAT_LLAMA_VOCAB_DIR is not set (scripts/test sets it)")
    })?;
    let path = PathBuf::from(dir).join("ggml-vocab-llama-spm.gguf");
    assert!(path.is_file(), "{} is missing", path.display());
    Some(path)
}

/// A 6-layer Llama with random weights and the tokenizer of `vocab`: enough layers for a
/// veracity layer with l±2 neighbours, small enough that a run takes seconds.
pub fn write_tiny_llama(vocab: &Path, path: &Path) {
    let (layers, hidden, heads, kv_heads, head_dim, ffn) =
        (6usize, 32usize, 4usize, 2usize, 8usize, 48usize);
    let source = pstat_lm::GgufFile::open(vocab).unwrap();
    let mut meta: Vec<(String, Value)> = source
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let n_vocab = match &source.metadata()["tokenizer.ggml.tokens"] {
        Value::Array(tokens) => tokens.len(),
        other => panic!("tokenizer.ggml.tokens is {other:?}"),
    };
    let u32_of = |v: usize| Value::U32(v as u32);
    meta.extend([
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), u32_of(layers)),
        ("llama.embedding_length".into(), u32_of(hidden)),
        ("llama.feed_forward_length".into(), u32_of(ffn)),
        ("llama.attention.head_count".into(), u32_of(heads)),
        ("llama.attention.head_count_kv".into(), u32_of(kv_heads)),
        ("llama.attention.key_length".into(), u32_of(head_dim)),
        ("llama.attention.value_length".into(), u32_of(head_dim)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-6),
        ),
        ("llama.context_length".into(), u32_of(512)),
        ("llama.rope.freq_base".into(), Value::F32(1e4)),
    ]);
    meta.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut tensor = |dims: &[usize], around: f32, spread: f32| {
        let data: Vec<f32> = (0..dims.iter().product())
            .map(|_| around + spread * rng.random_range(-1.0..1.0f32))
            .collect();
        let t = Tensor::from_vec(data, dims, &Device::Cpu).unwrap();
        QTensor::quantize(&t, GgmlDType::F32).unwrap()
    };
    let m = 1.0 / (hidden as f32).sqrt();
    let mut tensors = vec![
        (
            "token_embd.weight".to_string(),
            tensor(&[n_vocab, hidden], 0.0, 1.0),
        ),
        (
            "output_norm.weight".to_string(),
            tensor(&[hidden], 1.0, 0.2),
        ),
    ];
    for l in 0..layers {
        let b = |s: &str| format!("blk.{l}.{s}");
        tensors.extend([
            (b("attn_norm.weight"), tensor(&[hidden], 1.0, 0.2)),
            (
                b("attn_q.weight"),
                tensor(&[heads * head_dim, hidden], 0.0, 2.0 * m),
            ),
            (
                b("attn_k.weight"),
                tensor(&[kv_heads * head_dim, hidden], 0.0, 2.0 * m),
            ),
            (
                b("attn_v.weight"),
                tensor(&[kv_heads * head_dim, hidden], 0.0, m),
            ),
            (
                b("attn_output.weight"),
                tensor(&[hidden, heads * head_dim], 0.0, m),
            ),
            (b("ffn_norm.weight"), tensor(&[hidden], 1.0, 0.2)),
            (b("ffn_gate.weight"), tensor(&[ffn, hidden], 0.0, 2.0 * m)),
            (b("ffn_up.weight"), tensor(&[ffn, hidden], 0.0, m)),
            (
                b("ffn_down.weight"),
                tensor(&[hidden, ffn], 0.0, 1.0 / (ffn as f32).sqrt()),
            ),
        ]);
    }
    let meta: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &meta, &tensors).unwrap();
}
