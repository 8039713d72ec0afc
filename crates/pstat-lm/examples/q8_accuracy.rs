//! Accuracy of the `q8` precision against llama.cpp's own quantized kernels on the same file.
//! For each model: `--prompts` P-StaT questions over bundled statements (the model's own
//! tokenization), llama.cpp's five most probable next tokens after each
//! (tools/bench/llama_cpp_logprobs.py: the GGUF as stored, llama.cpp's q8_0/q8_K activation
//! quantization and integer products, f32 KV cache), and pstat's log p of the same ids in
//! `f32` and in `q8`. Prints, per model and precision, max |Δ log p| over those ids and the
//! share of prompts whose top-1 token agrees with llama.cpp's, and pstat q8 against pstat f32.
//!
//! cargo run --release -p pstat-lm --example q8_accuracy -- --python PY [--prompts 50]
//!     MODEL...   (registry names or GGUF paths)

use pstat_data::load::{DataRoot, load_all};
use pstat_lm::tokenizer::Tokenizer;
use pstat_lm::{GgufFile, LanguageModel, Precision};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

const QUESTION: &str = "Is the following statement correct?\n{s}\na. The statement is true.\nb. The statement is false.\nc. The statement is neither true nor false.\nThe final answer is";

fn main() {
    let mut python = None;
    let mut n_prompts = 50;
    let mut models = Vec::new();
    let mut argv = std::env::args().skip(1);
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--python" => python = argv.next(),
            "--prompts" => {
                n_prompts = argv
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--prompts N")
            }
            _ => models.push(a),
        }
    }
    let python = python.expect("--python: a Python with llama_cpp");
    let mut texts: Vec<String> = load_all(&DataRoot::bundled())
        .expect("bundled data loads")
        .into_iter()
        .flat_map(|d| d.statements.into_iter().map(|s| s.text))
        .collect();
    texts.shuffle(&mut ChaCha8Rng::seed_from_u64(7));
    println!(
        "| model | weights | pstat precision | max abs Δ log p (top-5 of llama.cpp) | top-1 agreement |"
    );
    println!("|---|---|---|---|---|");
    for name in &models {
        let path = pstat_lm::registry::resolve(name).expect("model resolves");
        let file = GgufFile::open(&path).unwrap();
        let tokenizer = Tokenizer::from_gguf(&file).unwrap();
        let prompts: Vec<Vec<u32>> = texts[..n_prompts]
            .iter()
            .map(|t| {
                tokenizer
                    .encode(&QUESTION.replace("{s}", t), true, false)
                    .unwrap()
            })
            .collect();
        let theirs = llama_cpp(&python, &path, &prompts);
        let weights = weight_types(&file);
        let mut ours = Vec::new();
        for precision in [Precision::F32, Precision::Q8] {
            let lm = LanguageModel::load_with(&path, precision).unwrap();
            let mut per_prompt = Vec::new();
            for (prompt, (ids, _)) in prompts.iter().zip(&theirs) {
                let next = lm
                    .next_token_logprobs(None, std::slice::from_ref(prompt), ids)
                    .unwrap();
                per_prompt.push((next[0].logprobs.clone(), next[0].top_token));
            }
            let (delta, agree) = compare(&per_prompt, &theirs);
            println!(
                "| {name} | {weights} | {precision} vs llama.cpp | {delta:.4} | {agree}/{} |",
                prompts.len()
            );
            ours.push(per_prompt);
        }
        let f32_as_reference: Vec<(Vec<u32>, Vec<f32>)> = theirs
            .iter()
            .zip(&ours[0])
            .map(|((ids, _), (lp, top))| {
                let mut ids = ids.clone();
                ids[0] = *top;
                (ids, lp.clone())
            })
            .collect();
        let (delta, agree) = compare(&ours[1], &f32_as_reference);
        println!(
            "| {name} | {weights} | q8 vs pstat f32 (same ids) | {delta:.4} | {agree}/{} |",
            prompts.len()
        );
    }
}

/// Max |Δ log p| over the reference's ids and how many top-1 tokens agree.
fn compare(ours: &[(Vec<f32>, u32)], reference: &[(Vec<u32>, Vec<f32>)]) -> (f32, usize) {
    let mut delta = 0.0f32;
    let mut agree = 0;
    for ((lp, top), (ids, ref_lp)) in ours.iter().zip(reference) {
        for (a, b) in lp.iter().zip(ref_lp) {
            delta = delta.max((a - b).abs());
        }
        agree += usize::from(*top == ids[0]);
    }
    (delta, agree)
}

/// The weight matrices' stored types, most common first.
fn weight_types(file: &GgufFile) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for info in file.content().tensor_infos.values() {
        if info.shape.dims().len() == 2 {
            *counts
                .entry(format!("{:?}", info.ggml_dtype))
                .or_insert(0usize) += 1;
        }
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
        .iter()
        .map(|(t, n)| format!("{t}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// llama.cpp's top-5 ids and log p after each prompt.
fn llama_cpp(
    python: &str,
    path: &std::path::Path,
    prompts: &[Vec<u32>],
) -> Vec<(Vec<u32>, Vec<f32>)> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("prompts.json");
    std::fs::write(
        &input,
        serde_json::json!({ "prompts": prompts }).to_string(),
    )
    .unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/bench/llama_cpp_logprobs.py"
    );
    let out = std::process::Command::new(python)
        .args([
            script,
            "--model",
            path.to_str().unwrap(),
            "--prompts",
            input.to_str().unwrap(),
        ])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "llama.cpp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let ids = r["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            let lp = r["logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (ids, lp)
        })
        .collect()
}
