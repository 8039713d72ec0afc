//! The run config's server settings reach the behavioral stage: a study of the tiny random
//! Llama scored through llama-cpp-python's server (started here on the model's F32 GGUF) with
//! `behavioral.concurrency` and `[behavioral.http]` set completes, and each cell records the
//! settings it used (never the key itself) in `behavioral/server.json` with a manifest. Needs
//! PSTAT_TEST_LLAMA_SERVER (a Python with `llama_cpp[server]`) or PSTAT_LLAMA_VENV (its venv);
//! records a skip without either, except under CI=true, where that fails.

// Shared with the server backend's tests; part of it (re-quantizing, CPU time) is unused here.
#[allow(dead_code)]
#[path = "../../pstat-prompt/tests/support/llama.rs"]
mod llama;
mod tiny_llama;

use pstat_study::{RunConfig, Silent, execute};
use serde_json::Value;
use tiny_llama::{vocabulary, write_tiny_llama};

fn python() -> Option<String> {
    if let Ok(venv) = std::env::var("PSTAT_LLAMA_VENV")
        && std::env::var_os("PSTAT_TEST_LLAMA_SERVER").is_none()
    {
        return Some(format!("{venv}/bin/python"));
    }
    llama::python()
}

#[test]
fn a_run_scores_on_a_server_with_its_configured_settings_and_records_them() {
    let Some(vocab) = vocabulary() else { return };
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &model);
    let server = llama::start(&python, &model, 2, &dir.path().join("server.log"));
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe {
        std::env::set_var("PSTAT_HOME", dir.path().join("home"));
        std::env::set_var("PSTAT_TEST_SERVER_KEY", "not-a-real-key");
    }
    let config: RunConfig = toml::from_str(&format!(
        r#"
        seed = 2
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 6
        train_limit = 40
        bootstrap_resamples = 10
        [representational]
        enabled = false
        [familiarity]
        enabled = false
        [behavioral]
        k = [2]
        baselines = ["empty"]
        formats = ["plain"]
        backend = {url:?}
        concurrency = 3
        [behavioral.http]
        timeout_s = 120.0
        retries = 2
        backoff_ms = 10
        api_key_env = "PSTAT_TEST_SERVER_KEY"
        "#,
        model = model.display().to_string(),
        url = server.url,
    ))
    .unwrap();
    let out = dir.path().join("run");
    execute(config, &out, &mut Silent).unwrap();

    let cell = out.join("tiny-llama/city_locations/behavioral");
    let text = std::fs::read_to_string(cell.join("server.json")).unwrap();
    assert!(!text.contains("not-a-real-key"), "the key is never written");
    let record: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["url"], server.url.as_str());
    assert_eq!(record["concurrency"], 3);
    assert_eq!(record["http"]["timeout_s"], 120.0);
    assert_eq!(record["http"]["retries"], 2);
    assert_eq!(record["http"]["api_key_env"], "PSTAT_TEST_SERVER_KEY");
    assert!(record["model_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(cell.join("server.json.manifest.json").exists());
    let stability = std::fs::read_to_string(out.join("stability.csv")).unwrap();
    assert!(stability.contains("behavioral,prompt"), "{stability}");
}
