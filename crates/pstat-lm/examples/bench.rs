//! LM runtime benchmark. Prints tokens/s of
//!   (a) prefill of 512 dataset statements up to a middle layer (hidden states), and
//!   (b) scoring 500 test statements after a shared 100-statement belief context
//!       (P-StaT question, plain format; the context is computed once and reused),
//! for pstat and, when a Python with `llama_cpp` is given, for llama.cpp doing the same work on
//! the same token ids and thread count (tools/bench/llama_cpp_bench.py), with the ratios; and
//! the speed-up of prefix reuse over recomputing every full prompt (skipped with
//! `--recompute 0`). Each side also reports its CPU time (tokens per CPU-second, steadier than
//! wall time on a shared machine) and its peak resident memory (VmHWM of each process: the
//! Python process's `ru_maxrss` would include this one's memory, carried across exec).
//! `--tokenizer` tokenizes with another GGUF's tokenizer (any ids of the model's vocabulary
//! cost the same). `--precision f32,q8` measures pstat in each precision listed, one after the
//! other in the same run (peak memory reset in between), against one llama.cpp measurement;
//! `--precision none` measures llama.cpp alone. `--json PATH` appends one JSON line per side
//! measured (tok/s and tok/CPU-s of each workload, peak memory), for
//! tools/bench/q8_table.sh, which runs each side in its own process, repeatedly and
//! interleaved, and tabulates the medians.
//!
//! cargo run --release -p pstat-lm --example bench -- [--model NAME|PATH] [--threads 2]
//!     [--python /path/to/python-with-llama_cpp] [--recompute 20] [--tokenizer NAME|PATH]
//!     [--prefill 512] [--tests 500] [--precision f32[,q8]|none] [--json PATH]
//!
//! `--prefill` and `--tests` shrink (a) and (b) for models too slow to run them whole on a
//! small machine; tokens/s depends on the context and the shapes, not on how many statements.

use pstat_data::load::{DataRoot, load_all};
use pstat_lm::tokenizer::Tokenizer;
use pstat_lm::{GgufFile, LanguageModel, Precision};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const N_CONTEXT: usize = 100;
const OPTIONS: &str = "a. The statement is true.\nb. The statement is false.\nc. The statement is neither true nor false.\nThe final answer is";

struct Args {
    model: String,
    threads: usize,
    python: Option<String>,
    recompute: usize,
    tokenizer: Option<String>,
    prefill: usize,
    tests: usize,
    precisions: Vec<Precision>,
    json: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        model: "smollm2-135m-instruct".into(),
        threads: 2,
        python: std::env::var("PSTAT_LLAMA_CPP_PYTHON").ok(),
        recompute: 20,
        tokenizer: None,
        prefill: 512,
        tests: 500,
        precisions: vec![Precision::F32],
        json: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--model" => args.model = value,
            "--threads" => args.threads = value.parse().expect("--threads takes a number"),
            "--python" => args.python = Some(value),
            "--recompute" => args.recompute = value.parse().expect("--recompute takes a number"),
            "--tokenizer" => args.tokenizer = Some(value),
            "--prefill" => args.prefill = value.parse().expect("--prefill takes a number"),
            "--tests" => args.tests = value.parse().expect("--tests takes a number"),
            "--precision" if value == "none" => args.precisions.clear(),
            "--json" => args.json = Some(value),
            "--precision" => {
                args.precisions = value
                    .split(',')
                    .map(|p| p.parse().expect("--precision takes f32 and/or q8"))
                    .collect()
            }
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
    let tokenizer_path = match &args.tokenizer {
        Some(name) => pstat_lm::registry::resolve(name).expect("tokenizer model resolves"),
        None => path.clone(),
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&tokenizer_path).unwrap()).unwrap();
    let encode = |text: &str, bos: bool| tokenizer.encode(text, bos, false).unwrap();

    let mut texts: Vec<String> = load_all(&DataRoot::bundled())
        .expect("bundled data loads")
        .into_iter()
        .flat_map(|d| d.statements.into_iter().map(|s| s.text))
        .collect();
    texts.shuffle(&mut ChaCha8Rng::seed_from_u64(42));
    let (n_prefill, n_tests) = (args.prefill, args.tests);
    let statements: Vec<Vec<u32>> = texts[..n_prefill].iter().map(|t| encode(t, true)).collect();
    let context = texts[n_prefill..n_prefill + N_CONTEXT].join("\n");
    let prefix = encode(
        &format!("{context}\nIs the following statement correct?\n"),
        true,
    );
    let suffixes: Vec<Vec<u32>> = texts[n_prefill + N_CONTEXT..n_prefill + N_CONTEXT + n_tests]
        .iter()
        .map(|t| encode(&format!("{t}\n{OPTIONS}"), false))
        .collect();
    let options: Vec<u32> = ["a", "b", "c"]
        .iter()
        .flat_map(|o| encode(&format!(" {o}"), false))
        .collect();

    println!("model: {}", args.model);
    println!("threads: {}", args.threads);
    let mut measured = Vec::new();
    for &precision in &args.precisions {
        reset_peak_rss();
        let lm = LanguageModel::load_with(&path, precision).expect("model loads");
        let layer = lm.n_layers() / 2;
        let prefill_tokens: usize = statements.iter().map(|s| s.len()).sum();
        let cpu_start = cpu_seconds();
        let start = Instant::now();
        lm.hidden_states(&statements, &[layer]).unwrap();
        let prefill = prefill_tokens as f64 / start.elapsed().as_secs_f64();
        let prefill_cpu = prefill_tokens as f64 / (cpu_seconds() - cpu_start);
        let cpu_start = cpu_seconds();
        let start = Instant::now();
        lm.hidden_states(&statements, &[lm.n_layers()]).unwrap();
        let prefill_full = prefill_tokens as f64 / start.elapsed().as_secs_f64();
        let prefill_full_cpu = prefill_tokens as f64 / (cpu_seconds() - cpu_start);

        let scoring_tokens: usize = suffixes.iter().map(|s| s.len()).sum();
        let cpu_start = cpu_seconds();
        let start = Instant::now();
        let cache = lm.prefix(&prefix).unwrap();
        lm.next_token_logprobs(Some(&cache), &suffixes, &options)
            .unwrap();
        let scoring_secs = start.elapsed().as_secs_f64();
        let scoring = scoring_tokens as f64 / scoring_secs;
        let scoring_cpu = scoring_tokens as f64 / (cpu_seconds() - cpu_start);
        let peak = peak_rss_mib();

        println!(
            "precision {precision} ({}), model sha256 {}",
            lm.kernel_isa(),
            lm.sha256()
        );
        println!(
            "(a) prefill {n_prefill} statements, {prefill_tokens} tokens, to layer {layer}/{}: pstat {prefill:.0} tok/s, {prefill_cpu:.0} tok/CPU-s (all {} layers: {prefill_full:.0} tok/s, {prefill_full_cpu:.0} tok/CPU-s)",
            lm.n_layers(),
            lm.n_layers()
        );
        println!(
            "(b) score {n_tests} statements ({scoring_tokens} tokens) after a {}-token context: pstat {scoring:.0} tok/s, {scoring_cpu:.0} tok/CPU-s",
            prefix.len()
        );
        println!("pstat peak resident memory: {peak:.0} MiB");
        if let Some(json) = &args.json {
            append_json(
                json,
                serde_json::json!({
                    "side": format!("pstat {precision}"),
                    "kernels": lm.kernel_isa(),
                    "model": args.model,
                    "prefill_tokens": prefill_tokens,
                    "scoring_tokens": scoring_tokens,
                    "context_tokens": prefix.len(),
                    "middle_layer": layer,
                    "n_layers": lm.n_layers(),
                    "prefill_tok_s": prefill,
                    "prefill_tok_cpu_s": prefill_cpu,
                    "prefill_full_tok_s": prefill_full,
                    "prefill_full_tok_cpu_s": prefill_full_cpu,
                    "scoring_tok_s": scoring,
                    "scoring_tok_cpu_s": scoring_cpu,
                    "peak_rss_mib": peak,
                }),
            );
        }
        if args.recompute > 0 {
            prefix_reuse(
                &lm,
                &prefix,
                &suffixes,
                &options,
                args.recompute,
                scoring_secs,
            );
        }
        measured.push((
            precision,
            [
                prefill,
                prefill_full,
                scoring,
                prefill_cpu,
                scoring_cpu,
                peak,
            ],
        ));
    }
    if let Some(python) = &args.python {
        compare_llama_cpp(
            python,
            &path,
            args.threads,
            (&statements, &prefix, &suffixes),
            &measured,
            args.json.as_deref(),
        );
    } else {
        println!(
            "llama.cpp: skipped (pass --python or set PSTAT_LLAMA_CPP_PYTHON to a Python with llama_cpp)"
        );
    }
}

/// Speed-up of scoring against the cached prefix over recomputing each full prompt.
fn prefix_reuse(
    lm: &LanguageModel,
    prefix: &[u32],
    suffixes: &[Vec<u32>],
    options: &[u32],
    recompute: usize,
    scoring_secs: f64,
) {
    let full: Vec<Vec<u32>> = suffixes[..recompute]
        .iter()
        .map(|s| [prefix, s].concat())
        .collect();
    let start = Instant::now();
    lm.next_token_logprobs(None, &full, options).unwrap();
    let per_prompt_recompute = start.elapsed().as_secs_f64() / recompute as f64;
    let per_prompt_reuse = scoring_secs / suffixes.len() as f64;
    println!(
        "prefix reuse vs recomputing each full prompt (K={N_CONTEXT}): {:.1}x ({:.3} s vs {:.3} s per prompt)",
        per_prompt_recompute / per_prompt_reuse,
        per_prompt_recompute,
        per_prompt_reuse
    );
}

/// Runs tools/bench/llama_cpp_bench.py on the same token ids and threads, prints its figures
/// and pstat's ratios to them, per precision measured. `ours`: prefill, prefill of all layers,
/// scoring (tok/s), prefill and scoring (tok/CPU-s), peak RSS (MiB).
fn compare_llama_cpp(
    python: &str,
    path: &std::path::Path,
    threads: usize,
    (statements, prefix, suffixes): (&[Vec<u32>], &[u32], &[Vec<u32>]),
    ours: &[(Precision, [f64; 6])],
    json_out: Option<&str>,
) {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("workload.json");
    let json =
        serde_json::json!({"statements": statements, "prefix": prefix, "suffixes": suffixes});
    std::fs::write(&workload, json.to_string()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/bench/llama_cpp_bench.py"
    );
    let out = std::process::Command::new(python)
        .args([
            script,
            "--model",
            path.to_str().unwrap(),
            "--workload",
            workload.to_str().unwrap(),
        ])
        .args(["--threads", &threads.to_string()])
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
    let mut theirs: serde_json::Value =
        serde_json::from_str(line.lines().last().unwrap_or("")).unwrap();
    if let Some(json_out) = json_out {
        theirs["side"] = "llama.cpp".into();
        theirs["model"] = path.display().to_string().into();
        append_json(json_out, theirs.clone());
    }
    let (lp, ls) = (
        theirs["prefill_tok_s"].as_f64().unwrap(),
        theirs["scoring_tok_s"].as_f64().unwrap(),
    );
    println!(
        "llama.cpp {} (original GGUF, its defaults): (a) {lp:.0} tok/s (full model), (b) {ls:.0} tok/s",
        theirs["version"]
    );
    let (lp_cpu, ls_cpu, their_peak) = (
        theirs["prefill_tok_cpu_s"].as_f64().unwrap(),
        theirs["scoring_tok_cpu_s"].as_f64().unwrap(),
        theirs["peak_rss_mib"].as_f64().unwrap(),
    );
    println!(
        "llama.cpp per CPU-second: (a) {lp_cpu:.0} tok/CPU-s, (b) {ls_cpu:.0} tok/CPU-s; peak resident memory: {their_peak:.0} MiB"
    );
    for (
        precision,
        [
            prefill,
            prefill_full,
            scoring,
            prefill_cpu,
            scoring_cpu,
            peak,
        ],
    ) in ours
    {
        println!(
            "ratio pstat {precision}/llama.cpp: (a) {:.2}x (all layers: {:.2}x), (b) {:.2}x; per CPU-second (a) {:.2}x, (b) {:.2}x; peak memory {:.2}x",
            prefill / lp,
            prefill_full / lp,
            scoring / ls,
            prefill_cpu / lp_cpu,
            scoring_cpu / ls_cpu,
            peak / their_peak
        );
    }
}

/// Appends `value` as one line to the file at `path`.
fn append_json(path: &str, value: serde_json::Value) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("--json {path}: {e}"));
    writeln!(file, "{value}").unwrap_or_else(|e| panic!("--json {path}: {e}"));
}

/// User + system CPU seconds of this process so far (all threads), from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // USER_HZ, 100 on every Linux configuration the kernel exposes to user space.
    (ticks(11) + ticks(12)) / 100.0
}

/// Resets this process's peak resident set to its current one (Linux `clear_refs` 5), so
/// that each precision's peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set of this process (VmHWM of /proc/self/status), MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}
