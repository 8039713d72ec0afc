//! The server backend against a real llama.cpp server (llama-cpp-python's OpenAI-compatible
//! server on the SmolLM2 GGUF) must pick the same answer as the embedded runtime on >= 99% of
//! >= 100 P-StaT prompts. Set PSTAT_TEST_LLAMA_SERVER to a Python that has
//! `llama_cpp[server]`; the test starts the server on 127.0.0.1 and stops it. Without it the
//! test is skipped with a notice, except under CI=true (`.ci/run` installs one), where it fails.
//!
//! The embedded runtime computes with the weights dequantized to f32 ("exact mode"), so the
//! server gets the same numbers: the GGUF re-quantized to F32 by llama.cpp itself, with an f32
//! KV cache. (On the Q4_1 file as is, llama.cpp's Q8-quantized activations move near-tied
//! answers: about 93% agreement on this set, max |Δp| ≈ 0.04.)

use pstat_data::{
    ConditionSet, DataRoot, Domain, Kind, SplitConfig, load_all, split::exclusive_split,
};
use pstat_lm::LanguageModel;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::scoring::render;
use pstat_prompt::server::ServerScorer;
use pstat_prompt::{
    BaselineContext, ContextSpec, Draw, EncodedPrompts, OptionScorer, OptionTokens, PromptFormat,
    TrainingPool,
};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The GGUF re-quantized to F32 by llama.cpp (`llama_model_quantize`, ftype ALL_F32).
fn requantize_f32(python: &str, src: &std::path::Path, dst: &std::path::Path) {
    let script = "import ctypes, sys, llama_cpp\n\
p = llama_cpp.llama_model_quantize_default_params()\n\
p.ftype = llama_cpp.LLAMA_FTYPE_ALL_F32\n\
p.allow_requantize = True\n\
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))\n";
    let status = Command::new(python)
        .args(["-c", script])
        .arg(src)
        .arg(dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running llama_model_quantize");
    assert!(
        status.success(),
        "re-quantizing {} to F32 failed",
        src.display()
    );
}

fn start(python: &str, model: &std::path::Path, port: u16, log: &std::path::Path) -> Server {
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(python)
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(model)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--n_ctx",
            "4096",
        ])
        // GGML_TYPE_F32 for the KV cache, as the embedded runtime keeps it.
        .args(["--type_k", "0", "--type_v", "0"])
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starting llama_cpp.server");
    let server = Server(child);
    let url = format!("http://127.0.0.1:{port}/v1/models");
    let deadline = Instant::now() + Duration::from_secs(180);
    while ureq::get(&url).call().is_err() {
        assert!(
            Instant::now() < deadline,
            "server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    server
}

#[test]
fn llama_cpp_server_agrees_with_the_embedded_runtime() {
    let Ok(python) = std::env::var("PSTAT_TEST_LLAMA_SERVER") else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true but PSTAT_TEST_LLAMA_SERVER (a Python with llama_cpp[server]) is not set"
        );
        eprintln!(
            "NOTICE: skipped: set PSTAT_TEST_LLAMA_SERVER to a Python with llama_cpp[server]"
        );
        return;
    };
    let path =
        pstat_lm::registry::resolve("smollm2-135m-instruct").unwrap_or_else(|e| panic!("{e}"));
    let codec = EmbeddedCodec::open(&path).unwrap();
    let options = OptionTokens::new(&codec).unwrap();

    // 30 held-out True city statements × {no context, Fictional K = 20} × {chat, plain}.
    let datasets = load_all(&DataRoot::bundled()).unwrap();
    let splits: Vec<_> = datasets
        .iter()
        .map(|d| exclusive_split(d, SplitConfig::default()).unwrap())
        .collect();
    let pool = TrainingPool::new(Domain::CityLocations, &datasets, &splits).unwrap();
    let city = &datasets[0];
    let test: Vec<&str> = city
        .statements
        .iter()
        .filter(|s| s.kind == Kind::True && splits[0].test.contains(&s.id))
        .take(30)
        .map(|s| s.text.as_str())
        .collect();
    let conditions = ConditionSet::paper();
    let spec = ContextSpec {
        k: 20,
        baseline: BaselineContext::Empty,
        seed: 42,
        allow_fewer: false,
    };
    let mut units = Vec::new();
    for condition in [
        conditions.baseline().unwrap(),
        conditions.get("fictional").unwrap(),
    ] {
        let context = pool.draw(&spec, condition, Draw::Main).unwrap();
        let lines: Vec<&str> = context.texts.iter().map(String::as_str).collect();
        for format in [PromptFormat::Chat, PromptFormat::Plain] {
            let texts = test
                .iter()
                .map(|s| render(&codec, format, &lines, s).unwrap())
                .collect();
            units.push(EncodedPrompts::new(&codec, texts).unwrap());
        }
    }

    let lm = LanguageModel::load(&path).unwrap();
    let mut embedded = EmbeddedScorer::new(&lm, options.clone());
    let work = tempfile::tempdir().unwrap();
    let f32_model = work.path().join("smollm2-f32.gguf");
    requantize_f32(&python, &path, &f32_model);
    let log = std::env::temp_dir().join(format!("pstat-llama-server-{}.log", std::process::id()));
    let port = free_port();
    let _server = start(&python, &f32_model, port, &log);
    let mut server = ServerScorer::new(
        &format!("http://127.0.0.1:{port}"),
        None,
        options,
        Duration::from_secs(120),
    )
    .unwrap();

    let (mut n, mut agree, mut worst) = (0usize, 0usize, 0f64);
    for prompts in &units {
        let ours = embedded.score(prompts, &mut |_| {}).unwrap();
        let theirs = server.score(prompts, &mut |_| {}).unwrap();
        for (a, b) in ours.iter().zip(&theirs) {
            n += 1;
            agree += usize::from(a.answer() == b.answer());
            for j in 0..3 {
                worst = worst.max((a.p[j] - b.p[j]).abs());
            }
        }
    }
    let rate = agree as f64 / n as f64;
    println!(
        "llama.cpp server vs embedded: {agree}/{n} answers agree ({rate:.4}), max |Δp| {worst:.4}"
    );
    assert!(n >= 100);
    assert!(
        rate >= 0.99,
        "argmax agreement {rate} (server log: {})",
        log.display()
    );
}
