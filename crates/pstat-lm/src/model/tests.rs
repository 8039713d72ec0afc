//! Tiny random-weight models, written as real GGUF files and loaded through the normal path,
//! checked against a plain f64 reference forward written independently below (one sequence at
//! a time, explicit loops, exact RoPE angles), and prefix reuse checked against recomputation.

use super::*;
use crate::gguf::GgufFile;
use candle_core::Tensor;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Hyper-parameters of a tiny test model.
#[derive(Clone, Copy)]
struct Tiny {
    arch: Arch,
    layers: usize,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ffn: usize,
    vocab: usize,
    window: Option<usize>,
}

const LLAMA: Tiny = Tiny {
    arch: Arch::Llama,
    layers: 3,
    hidden: 32,
    heads: 4,
    kv_heads: 2,
    head_dim: 8,
    ffn: 48,
    vocab: 50,
    window: None,
};

const QWEN2: Tiny = Tiny {
    arch: Arch::Qwen2,
    ..LLAMA
};

/// Seven layers so that layer 5 is global and 6 local again; a window of 4 positions so that
/// short test sequences already exceed it.
const GEMMA3: Tiny = Tiny {
    arch: Arch::Gemma3,
    layers: 7,
    hidden: 32,
    heads: 2,
    kv_heads: 1,
    head_dim: 16,
    ffn: 64,
    vocab: 50,
    window: Some(4),
};

/// Random weights by GGUF tensor name, row-major with candle's dims.
type Weights = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn random_weights(t: Tiny, seed: u64) -> Weights {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w = Weights::new();
    let mut add = |name: String, dims: Vec<usize>, around: f32, spread: f32| {
        let n = dims.iter().product();
        let data = (0..n)
            .map(|_| around + spread * rng.random_range(-1.0..1.0f32))
            .collect();
        w.insert(name, (dims, data));
    };
    let (h, d) = (t.hidden, t.head_dim);
    add("token_embd.weight".into(), vec![t.vocab, h], 0.0, 1.0);
    add("output_norm.weight".into(), vec![h], 1.0, 0.2);
    for l in 0..t.layers {
        let b = |s: &str| format!("blk.{l}.{s}");
        let m = 1.0 / (h as f32).sqrt();
        add(b("attn_norm.weight"), vec![h], 1.0, 0.2);
        add(b("attn_q.weight"), vec![t.heads * d, h], 0.0, 2.0 * m);
        add(b("attn_k.weight"), vec![t.kv_heads * d, h], 0.0, 2.0 * m);
        add(b("attn_v.weight"), vec![t.kv_heads * d, h], 0.0, m);
        add(b("attn_output.weight"), vec![h, t.heads * d], 0.0, m);
        add(b("ffn_norm.weight"), vec![h], 1.0, 0.2);
        add(b("ffn_gate.weight"), vec![t.ffn, h], 0.0, 2.0 * m);
        add(b("ffn_up.weight"), vec![t.ffn, h], 0.0, m);
        add(
            b("ffn_down.weight"),
            vec![h, t.ffn],
            0.0,
            1.0 / (t.ffn as f32).sqrt(),
        );
        if t.arch == Arch::Qwen2 {
            add(b("attn_q.bias"), vec![t.heads * d], 0.0, 0.3);
            add(b("attn_k.bias"), vec![t.kv_heads * d], 0.0, 0.3);
            add(b("attn_v.bias"), vec![t.kv_heads * d], 0.0, 0.3);
        }
        if t.arch == Arch::Gemma3 {
            add(b("attn_q_norm.weight"), vec![d], 1.0, 0.2);
            add(b("attn_k_norm.weight"), vec![d], 1.0, 0.2);
            add(b("post_attention_norm.weight"), vec![h], 1.0, 0.2);
            add(b("post_ffw_norm.weight"), vec![h], 1.0, 0.2);
        }
    }
    w
}

fn write_gguf(t: Tiny, weights: &Weights, path: &std::path::Path) {
    let a = t.arch.gguf_name();
    let mut meta: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        (format!("{a}.block_count"), Value::U32(t.layers as u32)),
        (format!("{a}.embedding_length"), Value::U32(t.hidden as u32)),
        (format!("{a}.feed_forward_length"), Value::U32(t.ffn as u32)),
        (
            format!("{a}.attention.head_count"),
            Value::U32(t.heads as u32),
        ),
        (
            format!("{a}.attention.head_count_kv"),
            Value::U32(t.kv_heads as u32),
        ),
        (
            format!("{a}.attention.key_length"),
            Value::U32(t.head_dim as u32),
        ),
        (
            format!("{a}.attention.value_length"),
            Value::U32(t.head_dim as u32),
        ),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-6),
        ),
        (format!("{a}.context_length"), Value::U32(64)),
        (
            format!("{a}.rope.freq_base"),
            Value::F32(if t.arch == Arch::Gemma3 { 1e6 } else { 1e4 }),
        ),
    ];
    if let Some(w) = t.window {
        meta.push((
            format!("{a}.attention.sliding_window"),
            Value::U32(w as u32),
        ));
    }
    let tensors: Vec<(String, QTensor)> = weights
        .iter()
        .map(|(name, (dims, data))| {
            let tensor = Tensor::from_vec(data.clone(), dims.as_slice(), &Device::Cpu).unwrap();
            (
                name.clone(),
                QTensor::quantize(&tensor, GgmlDType::F32).unwrap(),
            )
        })
        .collect();
    let meta_refs: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &meta_refs, &tensor_refs).unwrap();
}

fn tiny_model(t: Tiny, seed: u64) -> (Model, Weights) {
    let weights = random_weights(t, seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_gguf(t, &weights, &path);
    let model = Model::load(&GgufFile::open(&path).unwrap(), Precision::F32).unwrap();
    (model, weights)
}

// ---------------------------------------------------------------------------------------------
// f64 reference forward: one sequence, every layer's residual stream, then logits.

fn w64(weights: &Weights, name: &str) -> Vec<f64> {
    weights[name].1.iter().map(|&v| v as f64).collect()
}

/// `out[r] = Σ_c w[r][c] · x[c]` for `w` stored rows × cols.
fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
    w.chunks(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

fn rms(x: &[f64], w: &[f64]) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + 1e-6).sqrt();
    x.iter().zip(w).map(|(v, w)| v * s * w).collect()
}

fn rope64(head: &mut [f64], pos: usize, base: f64, neox: bool) {
    let d = head.len();
    for i in 0..d / 2 {
        let theta = pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
        let (a, b) = if neox {
            (i, i + d / 2)
        } else {
            (2 * i, 2 * i + 1)
        };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * theta.cos() - x1 * theta.sin();
        head[b] = x0 * theta.sin() + x1 * theta.cos();
    }
}

/// Residual stream after each layer (index 0 = embeddings) and the logits of every position.
fn reference(t: Tiny, w: &Weights, tokens: &[u32]) -> (Vec<Vec<Vec<f64>>>, Vec<Vec<f64>>) {
    let gemma = t.arch == Arch::Gemma3;
    let (h, d) = (t.hidden, t.head_dim);
    let emb = w64(w, "token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&id| {
            let row = &emb[id as usize * h..(id as usize + 1) * h];
            let s = if gemma { (h as f64).sqrt() } else { 1.0 };
            row.iter().map(|v| v * s).collect()
        })
        .collect();
    let mut layers = vec![xs.clone()];
    for l in 0..t.layers {
        let g = |s: &str| w64(w, &format!("blk.{l}.{s}"));
        let global = !gemma || (l + 1) % 6 == 0;
        let base = if gemma && !global {
            1e4
        } else if gemma {
            1e6
        } else {
            1e4
        };
        let window = if global { None } else { t.window };
        let neox = t.arch != Arch::Llama;
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let n = rms(x, &g("attn_norm.weight"));
            let mut q = matvec(&g("attn_q.weight"), &n);
            let mut k = matvec(&g("attn_k.weight"), &n);
            let mut v = matvec(&g("attn_v.weight"), &n);
            if t.arch == Arch::Qwen2 {
                for (y, b) in [
                    (&mut q, "attn_q.bias"),
                    (&mut k, "attn_k.bias"),
                    (&mut v, "attn_v.bias"),
                ] {
                    for (a, c) in y.iter_mut().zip(g(b)) {
                        *a += c;
                    }
                }
            }
            for (y, norm) in [
                (&mut q, "attn_q_norm.weight"),
                (&mut k, "attn_k_norm.weight"),
            ] {
                for head in y.chunks_mut(d) {
                    if gemma {
                        let normed = rms(head, &g(norm));
                        head.copy_from_slice(&normed);
                    }
                    rope64(head, pos, base, neox);
                }
            }
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        let group = t.heads / t.kv_heads;
        for (pos, x) in xs.iter_mut().enumerate() {
            let mut heads = vec![0.0; t.heads * d];
            for hd in 0..t.heads {
                let kv = hd / group;
                let q = &qs[pos][hd * d..(hd + 1) * d];
                let visible: Vec<usize> = (0..=pos)
                    .filter(|&j| window.is_none_or(|w| pos - j < w))
                    .collect();
                let scores: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        let k = &ks[j][kv * d..(kv + 1) * d];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (&j, p) in visible.iter().zip(&e) {
                    for c in 0..d {
                        heads[hd * d + c] += p / z * vs[j][kv * d + c];
                    }
                }
            }
            let mut attn = matvec(&g("attn_output.weight"), &heads);
            if gemma {
                attn = rms(&attn, &g("post_attention_norm.weight"));
            }
            for (a, b) in x.iter_mut().zip(&attn) {
                *a += b;
            }
            let n = rms(x, &g("ffn_norm.weight"));
            let gate = matvec(&g("ffn_gate.weight"), &n);
            let up = matvec(&g("ffn_up.weight"), &n);
            let act: Vec<f64> = gate
                .iter()
                .zip(&up)
                .map(|(&z, &u)| {
                    let a = if gemma {
                        // GELU-tanh with ggml's f16 rounding of its input and output (the
                        // table the forward looks up), in f64 otherwise.
                        let f16 = |v: f64| f64::from(half::f16::from_f64(v).to_f32());
                        let gelu = |z: f64| {
                            0.5 * z
                                * (1.0
                                    + ((2.0 / std::f64::consts::PI).sqrt()
                                        * (z + 0.044715 * z * z * z))
                                        .tanh())
                        };
                        match z {
                            z if z <= -10.0 => 0.0,
                            z if z >= 10.0 => z,
                            z => f16(gelu(f16(z))),
                        }
                    } else {
                        z / (1.0 + (-z).exp())
                    };
                    a * u
                })
                .collect();
            let mut mlp = matvec(&g("ffn_down.weight"), &act);
            if gemma {
                mlp = rms(&mlp, &g("post_ffw_norm.weight"));
            }
            for (a, b) in x.iter_mut().zip(&mlp) {
                *a += b;
            }
        }
        layers.push(xs.clone());
    }
    let logits = xs
        .iter()
        .map(|x| matvec(&emb, &rms(x, &w64(w, "output_norm.weight"))))
        .collect();
    (layers, logits)
}

/// max |a − b| / max |b|.
fn rel_err(a: &[f32], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((*x as f64 - y).abs()));
    diff / scale
}

fn sequences() -> Vec<Vec<u32>> {
    vec![
        vec![3, 17, 42, 8, 8, 1, 30, 11, 25, 4],
        vec![7],
        vec![49, 0, 12, 33, 2, 19],
    ]
}

fn check_against_reference(t: Tiny) {
    let (model, weights) = tiny_model(t, 7);
    let seqs = sequences();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let all: Vec<usize> = (0..=t.layers).collect();
    let out = model
        .forward(
            &refs,
            None,
            &ForwardPlan {
                capture: &all,
                final_rows: FinalRows::All,
                keep_kv: false,
            },
        )
        .unwrap();
    let logits = model.logits(&out.final_hidden);
    let mut row = 0;
    for seq in &seqs {
        let (layers, ref_logits) = reference(t, &weights, seq);
        for (layer, captured) in out.captured.iter().enumerate() {
            let ours = &captured[row * t.hidden..(row + seq.len()) * t.hidden];
            let theirs: Vec<f64> = layers[layer].concat();
            let err = rel_err(ours, &theirs);
            assert!(
                err < 1e-4,
                "{:?} layer {layer}: relative error {err}",
                t.arch
            );
        }
        let ours = &logits[row * t.vocab..(row + seq.len()) * t.vocab];
        let err = rel_err(ours, &ref_logits.concat());
        assert!(err < 1e-4, "{:?} logits: relative error {err}", t.arch);
        row += seq.len();
    }
}

#[test]
fn llama_matches_f64_reference() {
    check_against_reference(LLAMA);
}

#[test]
fn qwen2_matches_f64_reference() {
    check_against_reference(QWEN2);
}

#[test]
fn gemma3_matches_f64_reference() {
    check_against_reference(GEMMA3);
}

fn check_prefix_reuse(t: Tiny) {
    let (model, _) = tiny_model(t, 11);
    let prefix_tokens = [5u32, 9, 14, 2, 40, 22, 6];
    let prefix = model.prefix(&prefix_tokens).unwrap();
    let suffixes = sequences();
    let refs: Vec<&[u32]> = suffixes.iter().map(|s| s.as_slice()).collect();
    let layers: Vec<usize> = (1..=t.layers).collect();
    let cached = model
        .forward(
            &refs,
            Some(&prefix),
            &ForwardPlan {
                capture: &layers,
                final_rows: FinalRows::Last,
                keep_kv: false,
            },
        )
        .unwrap();
    let cached_logits = model.logits(&cached.final_hidden);
    let mut row = 0;
    for (s, suffix) in suffixes.iter().enumerate() {
        let full: Vec<u32> = prefix_tokens.iter().chain(suffix).copied().collect();
        let out = model
            .forward(
                &[&full],
                None,
                &ForwardPlan {
                    capture: &layers,
                    final_rows: FinalRows::Last,
                    keep_kv: false,
                },
            )
            .unwrap();
        for (c, f) in cached.captured.iter().zip(&out.captured) {
            let ours = &c[row * t.hidden..(row + suffix.len()) * t.hidden];
            let theirs: Vec<f64> = f[prefix_tokens.len() * t.hidden..]
                .iter()
                .map(|&v| v as f64)
                .collect();
            assert!(rel_err(ours, &theirs) < 1e-5, "{:?} suffix {s}", t.arch);
        }
        let full_logits: Vec<f64> = model
            .logits(&out.final_hidden)
            .iter()
            .map(|&v| v as f64)
            .collect();
        let ours = &cached_logits[s * t.vocab..(s + 1) * t.vocab];
        assert!(
            rel_err(ours, &full_logits) < 1e-5,
            "{:?} logits of suffix {s}",
            t.arch
        );
        row += suffix.len();
    }
    // The prefix alone predicts what a forward of the prefix does.
    let alone = model
        .forward(
            &[&prefix_tokens],
            None,
            &ForwardPlan {
                capture: &[],
                final_rows: FinalRows::Last,
                keep_kv: false,
            },
        )
        .unwrap();
    assert_eq!(alone.final_hidden, prefix.last_hidden);
}

#[test]
fn prefix_reuse_equals_recomputation() {
    check_prefix_reuse(LLAMA);
    check_prefix_reuse(GEMMA3);
}

#[test]
fn stops_at_the_deepest_requested_layer_with_identical_states() {
    let (model, _) = tiny_model(GEMMA3, 3);
    let seqs = sequences();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let shallow = model
        .forward(
            &refs,
            None,
            &ForwardPlan {
                capture: &[2, 0],
                final_rows: FinalRows::None,
                keep_kv: false,
            },
        )
        .unwrap();
    let deep = model
        .forward(
            &refs,
            None,
            &ForwardPlan {
                capture: &[0, 2, 7],
                final_rows: FinalRows::None,
                keep_kv: false,
            },
        )
        .unwrap();
    assert_eq!(shallow.captured[0], deep.captured[1]);
    assert_eq!(shallow.captured[1], deep.captured[0]);
    assert!(shallow.final_hidden.is_empty());
}

#[test]
fn bad_requests_are_clear_errors() {
    let (model, _) = tiny_model(LLAMA, 1);
    let plan = |capture| ForwardPlan {
        capture,
        final_rows: FinalRows::None,
        keep_kv: false,
    };
    let err = model.forward(&[&[1, 2]], None, &plan(&[4])).unwrap_err();
    assert!(err.to_string().contains("layer 4 does not exist"), "{err}");
    let err = model
        .forward(&[&[1, 2], &[]], None, &plan(&[1]))
        .unwrap_err();
    assert!(err.to_string().contains("sequence 1 is empty"), "{err}");
    let long = vec![1u32; 65];
    let err = model.forward(&[&long], None, &plan(&[1])).unwrap_err();
    assert!(
        err.to_string()
            .contains("longer than the model's context of 64"),
        "{err}"
    );
    let err = model.forward(&[&[50]], None, &plan(&[1])).unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
}

#[test]
fn a_non_finite_weight_is_an_error_naming_model_sequence_and_layer() {
    use crate::runtime::{LanguageModel, LmError};
    let mut weights = random_weights(LLAMA, 5);
    weights.get_mut("blk.1.ffn_down.weight").unwrap().1[3] = f32::INFINITY;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inf.gguf");
    write_gguf(LLAMA, &weights, &path);
    let lm = LanguageModel::load(&path).unwrap();
    let sequences = vec![vec![1u32, 2, 3], vec![4, 5, 6, 7]];

    let ok = lm.hidden_states(&sequences, &[0, 1]).unwrap();
    assert_eq!(ok.len(), 2);
    let err = lm.hidden_states(&sequences, &[1, 2]).unwrap_err();
    assert!(
        matches!(err, LmError::NonFinite { sequence: 0, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("inf.gguf") && msg.contains("sequence 0") && msg.contains("layer 2"),
        "{msg}"
    );

    let ids: Vec<String> = vec!["a".into(), "b".into()];
    let err = crate::extract::extract(&lm, &ids, &sequences, &[3], |_| {}).unwrap_err();
    assert!(err.to_string().contains("layer 3"), "{err}");

    for err in [
        lm.next_token_logprobs(None, &sequences[1..], &[7, 8])
            .unwrap_err(),
        lm.token_probabilities(&sequences).unwrap_err(),
    ] {
        assert!(matches!(err, LmError::NonFinite { .. }), "{err}");
        assert!(err.to_string().contains("LM head"), "{err}");
    }
}

#[test]
fn token_probabilities_at_reads_the_listed_positions_of_the_full_pass() {
    for t in [LLAMA, GEMMA3] {
        let weights = random_weights(t, 11);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_gguf(t, &weights, &path);
        let lm = crate::LanguageModel::load(&path).unwrap();
        let seqs = sequences();
        let all = lm.token_probabilities(&seqs).unwrap();
        // Every other position, listed out of order, and none for the one-token sequence.
        let positions: Vec<Vec<usize>> = seqs
            .iter()
            .map(|s| (1..s.len()).filter(|i| i % 2 == 1).rev().collect())
            .collect();
        let some = lm.token_probabilities_at(&seqs, &positions).unwrap();
        assert_eq!(some.len(), seqs.len());
        for ((all, some), listed) in all.iter().zip(&some).zip(&positions) {
            assert_eq!(some.len(), listed.len());
            for (&p, &i) in some.iter().zip(listed) {
                let full = all[i - 1];
                assert_eq!(p.to_bits(), full.to_bits(), "{p} vs {full} at {i}");
            }
        }
    }
}

/// Two blocks of each layout wide enough for gemm's regular paths (more than 256 output
/// columns in every product the last block may restrict to some rows), as real models are.
const WIDE: [Tiny; 2] = [
    Tiny {
        layers: 2,
        hidden: 272,
        heads: 4,
        kv_heads: 2,
        head_dim: 68,
        ffn: 288,
        ..LLAMA
    },
    Tiny {
        layers: 2,
        hidden: 272,
        heads: 2,
        kv_heads: 1,
        head_dim: 136,
        ffn: 288,
        ..GEMMA3
    },
];

#[test]
fn the_last_block_runs_only_the_last_rows_and_they_keep_every_bit() {
    let seqs = sequences();
    let batches: [Vec<&[u32]>; 2] = [
        seqs.iter().map(|s| s.as_slice()).collect(),
        vec![seqs[0].as_slice()],
    ];
    for t in WIDE {
        let (model, _) = tiny_model(t, 5);
        let cached = model.prefix(&[5, 9, 14, 2]).unwrap();
        for batch in &batches {
            let packing = Packing::from_lengths(batch.iter().map(|s| s.len()));
            for prefix in [None, Some(&cached)] {
                let run = |final_rows| {
                    let plan = ForwardPlan {
                        capture: &[],
                        final_rows,
                        keep_kv: false,
                    };
                    let kept = model.last_block_rows(&plan, &packing);
                    let out = model.forward(batch, prefix, &plan).unwrap();
                    (out.final_hidden, kept)
                };
                let (all, untrimmed) = run(FinalRows::All);
                assert_eq!(untrimmed, None);
                let (last, kept) = run(FinalRows::Last);
                // A lone sequence keeps its last two rows (gemm's lone-row path sums otherwise).
                let expected_kept = match batch.len() {
                    1 => vec![8, 9],
                    _ => vec![9, 10, 16],
                };
                assert_eq!(kept, Some(expected_kept), "{:?}", t.arch);
                let last_rows: Vec<usize> =
                    (1..=batch.len()).map(|s| packing.offsets[s] - 1).collect();
                assert_eq!(
                    last,
                    ops::rows_of(&all, t.hidden, &last_rows),
                    "{:?}",
                    t.arch
                );
            }
        }
    }
    // Products of the narrow test models would take gemm's small-matrix paths: no trimming.
    let (narrow, _) = tiny_model(LLAMA, 5);
    let plan = ForwardPlan {
        capture: &[],
        final_rows: FinalRows::Last,
        keep_kv: false,
    };
    assert_eq!(
        narrow.last_block_rows(&plan, &Packing::from_lengths([10, 1, 6])),
        None
    );
}
