//! The server backend against a real llama.cpp server (llama-cpp-python's OpenAI-compatible
//! server, started here on a free port, on SmolLM2 re-quantized to F32 with an f32 KV cache)
//! with 4 requests in flight: its judgments equal the embedded runtime's, and through a
//! fault-injecting proxy (drops, 500s, answers held past the timeout, slow answers, truncated
//! JSON, probabilities summing above 1) they are the same judgments, at the cost of one retry
//! per fault. Needs PSTAT_TEST_LLAMA_SERVER (a Python with `llama_cpp[server]`); records a
//! skip without it, except under CI=true, where that fails.
//!
//! (On the Q4_1 file as is, llama.cpp's Q8-quantized activations move near-tied answers:
//! about 93% agreement on this set, max |Δp| ≈ 0.04; hence the F32 re-quantization.)

mod support;

use pstat_http::HttpOptions;
use pstat_lm::LanguageModel;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::server::{ServerConfig, ServerScorer};
use pstat_prompt::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens};
use std::net::SocketAddr;
use std::time::Duration;
use support::fault_proxy::{Fault, FaultProxy};

fn score_all(scorer: &mut dyn OptionScorer, units: &[EncodedPrompts]) -> Vec<OptionProbs> {
    units
        .iter()
        .flat_map(|u| scorer.score(u, &mut |_| {}).unwrap())
        .collect()
}

#[test]
fn llama_cpp_server_judges_as_the_embedded_runtime_and_survives_faults() {
    let Some(python) = support::llama::python() else {
        return;
    };
    let path =
        pstat_lm::registry::resolve("smollm2-135m-instruct").unwrap_or_else(|e| panic!("{e}"));
    let codec = EmbeddedCodec::open(&path).unwrap();
    let units = support::units::city_units(&codec, 30);

    let lm = LanguageModel::load(&path).unwrap();
    let ours = score_all(
        &mut EmbeddedScorer::new(&lm, OptionTokens::new(&codec).unwrap()),
        &units,
    );

    let work = tempfile::tempdir().unwrap();
    let f32_model = work.path().join("smollm2-f32.gguf");
    support::llama::requantize_f32(&python, &path, &f32_model);
    let log = std::env::temp_dir().join(format!("pstat-llama-server-{}.log", std::process::id()));
    let server = support::llama::start(&python, &f32_model, 2, &log);
    let config = |url: &str| ServerConfig {
        concurrency: 4,
        http: HttpOptions {
            timeout_s: 60.0,
            backoff_ms: 10,
            ..HttpOptions::default()
        },
        ..ServerConfig::new(url)
    };
    let mut direct = ServerScorer::connect(&config(&server.url), &codec).unwrap();
    let theirs = score_all(&mut direct, &units);

    let (mut n, mut agree, mut worst) = (0usize, 0usize, 0f64);
    for (a, b) in ours.iter().zip(&theirs) {
        n += 1;
        agree += usize::from(a.answer() == b.answer());
        for j in 0..3 {
            worst = worst.max((a.p[j] - b.p[j]).abs());
        }
    }
    println!(
        "llama.cpp server vs embedded: {agree}/{n} answers agree, max |Δp| {worst:.2e}; {} retries (the ids refused by llama-cpp-python's server, then text) (server log: {})",
        direct.retries(),
        log.display()
    );
    assert!(n >= 100);
    assert!(
        agree as f64 >= 0.99 * n as f64,
        "{agree}/{n} agree, max |Δp| {worst} (server log: {})",
        log.display()
    );

    // Faults between the backend and the same server. A held answer outlasts a 10 s timeout
    // (the server answers one of these prompts in about a second, queued behind three).
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
    let schedule = vec![
        Fault::None,
        Fault::None,
        Fault::Drop,
        Fault::None,
        Fault::Status500,
        Fault::None,
        Fault::Malformed,
        Fault::Slow,
        Fault::None,
        Fault::AboveOne,
        Fault::None,
        Fault::None,
        Fault::Drop,
        Fault::None,
        Fault::Malformed,
        Fault::None,
        Fault::Status500,
        Fault::None,
        Fault::AboveOne,
        Fault::None,
        Fault::Hang,
        Fault::None,
    ];
    let proxy = FaultProxy::start(
        upstream,
        schedule,
        Duration::from_secs(12),
        Duration::from_millis(500),
    );
    let mut faulty_config = config(&proxy.url);
    faulty_config.http.timeout_s = 10.0;
    // Four workers interleave on the fixed schedule, so one prompt can meet several faults
    // in a row.
    faulty_config.http.retries = 12;
    let mut faulty = ServerScorer::connect(&faulty_config, &codec).unwrap();
    let survived = score_all(&mut faulty, &units);
    println!(
        "through the fault proxy: {} requests, {} spoiled, {} retries",
        proxy.requests(),
        proxy.spoiled(),
        faulty.retries()
    );
    assert_eq!(survived.len(), theirs.len());
    for (a, b) in survived.iter().zip(&theirs) {
        assert_eq!(a.answer(), b.answer());
        for j in 0..3 {
            assert!((a.p[j] - b.p[j]).abs() < 1e-4, "{:?} vs {:?}", a.p, b.p);
        }
    }
    assert!(proxy.spoiled() >= 40, "{} faults", proxy.spoiled());
    // At least one retry per fault (a request slowed past the timeout by the shared machine
    // costs one more).
    assert!(faulty.retries() >= proxy.spoiled());
    // The proxy's and the server's reported model are one model, at two addresses: their
    // cached judgments are kept apart.
    assert_ne!(faulty.identity(), direct.identity());
}
