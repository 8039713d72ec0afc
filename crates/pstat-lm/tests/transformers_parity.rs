//! pstat against transformers on folders transformers itself wrote: for every supported
//! Hugging Face architecture, tools/fixtures/transformers_folders.py builds a tiny random-weight
//! model from a seed with the installed transformers (`save_pretrained`, so the config layout
//! is the current one: `rope_parameters`, `dtype`, per-layer-type RoPE) and computes its
//! float32 hidden states and log-probabilities. pstat must read the folder and agree:
//! - hidden states: layer L equals transformers' `hidden_states[L]` for L < n_layers within
//!   |Δ| ≤ 1e-4·(1 + |x|) per element (f32 summation order; the last entry of transformers'
//!   list has the final norm applied and is covered by the log-probabilities);
//! - log-probabilities of every token after each sequence and each prompt within 1e-4 nats;
//! - the prompts' token ids identical to transformers' tokenizer's.
//!
//! The interpreter is PSTAT_TRANSFORMERS_PYTHON (scripts/test-references installs torch and
//! transformers); without it the tests say so and pass, except under CI=true, where they fail.

use pstat_lm::LanguageModel;
use pstat_lm::tokenizer::Tokenizer;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const HIDDEN_TOLERANCE: f32 = 1e-4;
const LOGPROB_TOLERANCE: f64 = 1e-4;

/// Statements of the kind the study scores, with the option words it asks about.
const PROMPTS: &[&str] = &[
    "The city of Paris is in France. True or False? Answer:",
    "Water boils at 100 degrees Celsius at sea level.",
    "Is the following statement true? The Moon is made of cheese.\nAnswer: Yes",
    "Numbers like 1234567 and symbols (#, @, %) tokenize too.",
];

fn python() -> Option<PathBuf> {
    std::env::var_os("PSTAT_TRANSFORMERS_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            pstat_testkit::missing(
                "PSTAT_TRANSFORMERS_PYTHON is not set (scripts/test-references installs it): transformers not compared",
            )
        })
}

/// Sequences of assorted lengths (past the fixtures' 8- and 16-token windows) over the ids all
/// fixture vocabularies share.
fn sequences() -> Vec<Vec<u32>> {
    (0..5u32)
        .map(|s| {
            let len = 3 + 9 * s as usize;
            (0..len as u32)
                .map(|i| (s * 977 + i * 131 + i * i * 17) % 1026)
                .collect()
        })
        .collect()
}

#[derive(serde::Deserialize)]
struct Reference {
    hidden: Vec<Vec<Vec<f32>>>,
    logprobs: Vec<Vec<f64>>,
    prompt_ids: Vec<Vec<u32>>,
    prompt_logprobs: Vec<Vec<f64>>,
    versions: serde_json::Value,
}

/// Largest |Δ| of log-probabilities over every token id, checked against the tolerance.
fn worst_logprob(arch: &str, what: &str, ours: &[f32], theirs: &[f64]) -> f64 {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{arch} {what}: vocabulary sizes differ"
    );
    let mut worst = 0f64;
    for (id, (&a, &b)) in ours.iter().zip(theirs).enumerate() {
        let d = (a as f64 - b).abs();
        assert!(
            d <= LOGPROB_TOLERANCE,
            "{arch} {what}: token {id}: pstat {a}, transformers {b}"
        );
        worst = worst.max(d);
    }
    worst
}

fn parity(arch: &str) {
    let Some(python) = python() else { return };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/fixtures/transformers_folders.py");
    let dir = tempfile::tempdir().unwrap();
    let seqs = sequences();
    let request = serde_json::json!({"sequences": seqs, "prompts": PROMPTS});
    let mut child = Command::new(&python)
        .arg(&script)
        .arg(arch)
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{arch}: transformers failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reference: Reference = serde_json::from_slice(&output.stdout).unwrap();

    let lm = LanguageModel::load(dir.path()).unwrap_or_else(|e| panic!("{arch}: {e}"));
    let config = lm.config().clone();
    let layers: Vec<usize> = (0..config.n_layers).collect();
    let ours = lm.hidden_states(&seqs, &layers).unwrap();
    let mut worst_hidden = 0f32;
    for (s, seq) in ours.iter().enumerate() {
        for (l, states) in seq.iter().enumerate() {
            let theirs = &reference.hidden[s][l];
            assert_eq!(states.len(), theirs.len(), "{arch}: sequence {s} layer {l}");
            for (i, (a, b)) in states.iter().zip(theirs).enumerate() {
                let d = (a - b).abs();
                assert!(
                    d <= HIDDEN_TOLERANCE * (1.0 + b.abs()),
                    "{arch}: sequence {s}, layer {l}, element {i}: pstat {a}, transformers {b}"
                );
                worst_hidden = worst_hidden.max(d);
            }
        }
    }

    let all: Vec<u32> = (0..config.vocab_size as u32).collect();
    let mut worst_lp = 0f64;
    for (s, next) in lm
        .next_token_logprobs(None, &seqs, &all)
        .unwrap()
        .iter()
        .enumerate()
    {
        let what = format!("sequence {s}");
        worst_lp = worst_lp.max(worst_logprob(
            arch,
            &what,
            &next.logprobs,
            &reference.logprobs[s],
        ));
    }

    let tokenizer = Tokenizer::load(dir.path()).unwrap();
    let ids: Vec<Vec<u32>> = PROMPTS
        .iter()
        .map(|p| tokenizer.encode(p, true, false).unwrap())
        .collect();
    assert_eq!(ids, reference.prompt_ids, "{arch}: token ids differ");
    for (p, next) in lm
        .next_token_logprobs(None, &ids, &all)
        .unwrap()
        .iter()
        .enumerate()
    {
        let what = format!("prompt {p}");
        worst_lp = worst_lp.max(worst_logprob(
            arch,
            &what,
            &next.logprobs,
            &reference.prompt_logprobs[p],
        ));
    }
    eprintln!(
        "{arch}: agrees with transformers {}: largest |Δ| hidden state {worst_hidden:.2e}, \
         log p {worst_lp:.2e}",
        reference.versions
    );
}

#[test]
fn llama3_folder_with_llama3_rope_scaling_matches_transformers() {
    parity("llama3");
}

#[test]
fn mistral_folder_with_sliding_window_matches_transformers() {
    parity("mistral");
}

#[test]
fn qwen2_folder_matches_transformers() {
    parity("qwen2");
}

#[test]
fn gemma_folder_matches_transformers() {
    parity("gemma");
}

#[test]
fn gemma2_folder_with_window_and_soft_caps_matches_transformers() {
    parity("gemma2");
}

#[test]
fn gemma3_folder_with_per_layer_type_rope_matches_transformers() {
    parity("gemma3");
}

#[test]
fn gemma3_multimodal_checkpoint_matches_transformers() {
    parity("gemma3mm");
}
