//! LM runtime benchmark (issue 4 item 8, issue 6 item 8). Prints tokens/s of
//!   (a) prefill of 512 dataset statements up to a middle layer (hidden states), and
//!   (b) scoring 500 test statements after a shared 100-statement belief context
//!       (P-StaT question, plain format; the context is computed once and reused),
//! for pstat and, when a Python with `llama_cpp` is given, for llama.cpp doing the same work on
//! the same token ids and thread count (tools/bench/llama_cpp_bench.py), with the ratios; and
//! the speed-up of prefix reuse over recomputing every full prompt.
//!
//! cargo run --release -p pstat-lm --example bench -- [--model NAME|PATH] [--threads 2]
//!     [--python /path/to/python-with-llama_cpp] [--recompute 20]

use pstat_data::load::{DataRoot, load_all};
use pstat_lm::tokenizer::Tokenizer;
use pstat_lm::{GgufFile, LanguageModel};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const N_PREFILL: usize = 512;
const N_CONTEXT: usize = 100;
const N_TESTS: usize = 500;
const OPTIONS: &str = "a. The statement is true.\nb. The statement is false.\nc. The statement is neither true nor false.\nThe final answer is";

struct Args {
    model: String,
    threads: usize,
    python: Option<String>,
    recompute: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        model: "smollm2-135m-instruct".into(),
        threads: 2,
        python: std::env::var("PSTAT_LLAMA_CPP_PYTHON").ok(),
        recompute: 20,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--model" => args.model = value,
            "--threads" => args.threads = value.parse().expect("--threads takes a number"),
            "--python" => args.python = Some(value),
            "--recompute" => args.recompute = value.parse().expect("--recompute takes a number"),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn main() {
    let args = parse_args();
    rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build_global()
        .expect("rayon pool");
    let path = pstat_lm::registry::resolve(&args.model).expect("model resolves");
    let lm = LanguageModel::load(&path).expect("model loads");
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    let encode = |text: &str, bos: bool| tokenizer.encode(text, bos, false).unwrap();

    let mut texts: Vec<String> = load_all(&DataRoot::bundled())
        .expect("bundled data loads")
        .into_iter()
        .flat_map(|d| d.statements.into_iter().map(|s| s.text))
        .collect();
    texts.shuffle(&mut ChaCha8Rng::seed_from_u64(42));
    let statements: Vec<Vec<u32>> = texts[..N_PREFILL].iter().map(|t| encode(t, true)).collect();
    let context = texts[N_PREFILL..N_PREFILL + N_CONTEXT].join("\n");
    let prefix = encode(
        &format!("{context}\nIs the following statement correct?\n"),
        true,
    );
    let suffixes: Vec<Vec<u32>> = texts[N_PREFILL + N_CONTEXT..N_PREFILL + N_CONTEXT + N_TESTS]
        .iter()
        .map(|t| encode(&format!("{t}\n{OPTIONS}"), false))
        .collect();
    let options: Vec<u32> = ["a", "b", "c"]
        .iter()
        .flat_map(|o| encode(&format!(" {o}"), false))
        .collect();

    let layer = lm.n_layers() / 2;
    let prefill_tokens: usize = statements.iter().map(|s| s.len()).sum();
    let start = Instant::now();
    lm.hidden_states(&statements, &[layer]).unwrap();
    let prefill = prefill_tokens as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    lm.hidden_states(&statements, &[lm.n_layers()]).unwrap();
    let prefill_full = prefill_tokens as f64 / start.elapsed().as_secs_f64();

    let scoring_tokens: usize = suffixes.iter().map(|s| s.len()).sum();
    let start = Instant::now();
    let cache = lm.prefix(&prefix).unwrap();
    lm.next_token_logprobs(Some(&cache), &suffixes, &options)
        .unwrap();
    let scoring_secs = start.elapsed().as_secs_f64();
    let scoring = scoring_tokens as f64 / scoring_secs;

    let full: Vec<Vec<u32>> = suffixes[..args.recompute]
        .iter()
        .map(|s| [prefix.as_slice(), s].concat())
        .collect();
    let start = Instant::now();
    lm.next_token_logprobs(None, &full, &options).unwrap();
    let per_prompt_recompute = start.elapsed().as_secs_f64() / args.recompute as f64;
    let per_prompt_reuse = scoring_secs / N_TESTS as f64;

    println!("model: {} ({})", args.model, lm.sha256());
    println!("threads: {}", args.threads);
    println!(
        "(a) prefill {N_PREFILL} statements, {prefill_tokens} tokens, to layer {layer}/{}: pstat {prefill:.0} tok/s (all {} layers: {prefill_full:.0} tok/s)",
        lm.n_layers(),
        lm.n_layers()
    );
    println!(
        "(b) score {N_TESTS} statements ({scoring_tokens} tokens) after a {}-token context: pstat {scoring:.0} tok/s",
        prefix.len()
    );
    println!(
        "prefix reuse vs recomputing each full prompt (K={N_CONTEXT}): {:.1}x ({:.3} s vs {:.3} s per prompt)",
        per_prompt_recompute / per_prompt_reuse,
        per_prompt_recompute,
        per_prompt_reuse
    );

    let Some(python) = args.python else {
        println!(
            "llama.cpp: skipped (pass --python or set PSTAT_LLAMA_CPP_PYTHON to a Python with llama_cpp)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("workload.json");
    let json =
        serde_json::json!({"statements": statements, "prefix": prefix, "suffixes": suffixes});
    std::fs::write(&workload, json.to_string()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/bench/llama_cpp_bench.py"
    );
    let out = std::process::Command::new(&python)
        .args([
            script,
            "--model",
            path.to_str().unwrap(),
            "--workload",
            workload.to_str().unwrap(),
        ])
        .args(["--threads", &args.threads.to_string()])
        .output()
        .expect("python runs");
    if !out.status.success() {
        println!(
            "llama.cpp: failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let theirs: serde_json::Value =
        serde_json::from_str(line.lines().last().unwrap_or("")).unwrap();
    let (lp, ls) = (
        theirs["prefill_tok_s"].as_f64().unwrap(),
        theirs["scoring_tok_s"].as_f64().unwrap(),
    );
    println!(
        "llama.cpp {} (original GGUF, its defaults): (a) {lp:.0} tok/s (full model), (b) {ls:.0} tok/s",
        theirs["version"]
    );
    println!(
        "ratio pstat/llama.cpp: (a) {:.2}x (all layers: {:.2}x), (b) {:.2}x",
        prefill / lp,
        prefill_full / lp,
        scoring / ls
    );
}
