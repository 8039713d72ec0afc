//! Behavioral throughput through a llama.cpp server (llama-cpp-python's, on SmolLM2
//! re-quantized to F32, started here) at 1, 4 and 8 requests in flight, against the embedded
//! runtime on the same prompts and the same machine. Prints prompts per second (wall) and CPU
//! seconds per prompt (pstat's process plus the server's), with ratios to the embedded run.
//!
//! ```text
//! PSTAT_TEST_LLAMA_SERVER=/path/to/python-with-llama_cpp \
//!   cargo run --release -p pstat-prompt --example server_throughput -- [STATEMENTS] [THREADS]
//! ```
//! (or PSTAT_LLAMA_VENV=/path/to/venv, the venv scripts/test builds, for its `bin/python`)
//! STATEMENTS per unit (default 30; four units: no context and Fictional K = 20, chat and
//! plain), THREADS for the server (default 2; the embedded runtime uses rayon's default).

#[path = "../tests/support/mod.rs"]
mod support;

use pstat_http::HttpOptions;
use pstat_lm::LanguageModel;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::server::{ServerConfig, ServerScorer};
use pstat_prompt::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens};
use std::time::Instant;

/// This process's CPU seconds so far (user + system).
fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, r)| r.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

struct Timed {
    answers: Vec<OptionProbs>,
    wall: f64,
    cpu: f64,
}

fn timed(
    scorer: &mut dyn OptionScorer,
    units: &[EncodedPrompts],
    server_cpu: &dyn Fn() -> f64,
) -> Timed {
    let (t0, c0, s0) = (Instant::now(), own_cpu_seconds(), server_cpu());
    let answers = units
        .iter()
        .flat_map(|u| scorer.score(u, &mut |_| {}).unwrap())
        .collect();
    Timed {
        answers,
        wall: t0.elapsed().as_secs_f64(),
        cpu: own_cpu_seconds() - c0 + server_cpu() - s0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let statements: usize = args.next().map_or(30, |a| a.parse().expect("STATEMENTS"));
    let threads: usize = args.next().map_or(2, |a| a.parse().expect("THREADS"));
    let python = std::env::var("PSTAT_TEST_LLAMA_SERVER")
        .or_else(|_| std::env::var("PSTAT_LLAMA_VENV").map(|venv| format!("{venv}/bin/python")))
        .expect("set PSTAT_TEST_LLAMA_SERVER to a Python with llama_cpp[server], or PSTAT_LLAMA_VENV to its venv");
    // The load says whether the machine was shared while the numbers were taken.
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average before: {}", load().trim());
    let path = pstat_lm::registry::resolve("smollm2-135m-instruct").unwrap();
    let codec = EmbeddedCodec::open(&path).unwrap();
    let units = support::units::city_units(&codec, statements);
    let n: usize = units.iter().map(EncodedPrompts::len).sum();

    let lm = LanguageModel::load(&path).unwrap();
    let mut embedded = EmbeddedScorer::new(&lm, OptionTokens::new(&codec).unwrap());
    let reference = timed(&mut embedded, &units, &|| 0.0);

    let work = tempfile::tempdir().unwrap();
    let f32_model = work.path().join("smollm2-f32.gguf");
    support::llama::requantize_f32(&python, &path, &f32_model);
    let log = work.path().join("server.log");
    let server = support::llama::start(&python, &f32_model, threads, &log);
    println!(
        "{n} prompts (SmolLM2-135M F32, {statements} city statements x 4 units), server threads {threads}"
    );
    println!(
        "| backend | in flight | prompts/s | ratio | CPU s/prompt | ratio | answers = embedded |"
    );
    println!("|---|---|---|---|---|---|---|");
    let row = |name: &str, c: &str, t: &Timed| {
        let same = t
            .answers
            .iter()
            .zip(&reference.answers)
            .filter(|(a, b)| a.answer() == b.answer())
            .count();
        println!(
            "| {name} | {c} | {:.2} | {:.2} | {:.3} | {:.2} | {same}/{n} |",
            n as f64 / t.wall,
            reference.wall / t.wall,
            t.cpu / n as f64,
            t.cpu / reference.cpu,
        );
    };
    row("embedded", "-", &reference);
    for concurrency in [1, 4, 8] {
        let config = ServerConfig {
            concurrency,
            http: HttpOptions {
                timeout_s: 600.0,
                ..HttpOptions::default()
            },
            ..ServerConfig::new(&server.url)
        };
        let mut scorer = ServerScorer::connect(&config, &codec).unwrap();
        // Each level starts from the server's state after the previous one; the first unit's
        // prefix is evaluated again in every level (the units alternate contexts).
        let t = timed(&mut scorer, &units, &|| server.cpu_seconds());
        row("llama.cpp server", &concurrency.to_string(), &t);
    }
    println!("load average after: {}", load().trim());
}
