//! `--model` with Hugging Face folders and bad model input through the `pstat` binary: the tiny
//! folders of pstat-lm's fixtures are listed and tokenized; a folder missing config.json, an
//! unknown model name and an unsupported architecture each end with one line on stderr naming
//! the file or name, and exit status 2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pstat-lm/tests/fixtures/hf")
        .join(arch)
        .join("hf")
}

fn pstat(args: &[&str], stdin: &str) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(args)
        .env("PSTAT_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // pstat may exit before reading its input (bad input): a broken pipe here is expected.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

#[test]
fn models_list_describes_a_folder() {
    let llama = fixture("llama");
    let out = pstat(&["models", "list", "--json", llama.to_str().unwrap()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let infos: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let folder = infos.iter().find(|i| i["format"] == "hf").unwrap();
    assert_eq!(folder["arch"], "llama");
    assert_eq!(folder["weight_type"], "bf16");
    assert_eq!(folder["layers"], 2);
    assert_eq!(folder["kind"], "chat");
    // The registry's models and the paper's 21 are listed too, the latter with their layers.
    assert!(infos.iter().any(|i| i["name"] == "smollm2-135m-instruct"));
    let qwen72 = infos.iter().find(|i| i["name"] == "_qwen-2.5-72b").unwrap();
    assert_eq!(qwen72["paper_layers"], serde_json::json!([79, 69, 40]));
    assert_eq!(infos.iter().filter(|i| i["format"] == "paper").count(), 21);
}

#[test]
fn models_list_shows_the_layers_pstat_uses_for_the_paper_models() {
    let out = pstat(&["models", "list", "--json"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let infos: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let paper: Vec<&serde_json::Value> = infos.iter().filter(|i| i["format"] == "paper").collect();
    assert_eq!(paper.len(), 21);
    for m in &paper {
        // The authors' block l is pstat's layer l + 1, with five layers around it inside the model.
        let printed: Vec<u64> = serde_json::from_value(m["paper_layers"].clone()).unwrap();
        let used: Vec<u64> = serde_json::from_value(m["pstat_layers"].clone()).unwrap();
        assert_eq!(
            used,
            printed.iter().map(|l| l + 1).collect::<Vec<_>>(),
            "{m}"
        );
        let windows: Vec<Vec<u64>> = serde_json::from_value(m["layer_windows"].clone()).unwrap();
        let n = m["layers"].as_u64().unwrap();
        for (w, l) in windows.iter().zip(&used) {
            assert_eq!(w.len(), 5, "{m}");
            assert!(
                w.contains(l) && w.iter().all(|x| (1..=n).contains(x)),
                "{m}"
            );
        }
    }
    let qwen72 = paper.iter().find(|i| i["name"] == "_qwen-2.5-72b").unwrap();
    assert_eq!(qwen72["pstat_layers"], serde_json::json!([80, 70, 41]));
    assert_eq!(
        qwen72["layer_windows"][0],
        serde_json::json!([76, 77, 78, 79, 80])
    );
    // The table shows both numbers, and the shifted window where there is one.
    let out = pstat(&["models", "list"], "");
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("_qwen-2.5-72b\t"))
        .unwrap();
    assert!(row.contains("\t79/69/40\t80 (76..80)/70/41\t"), "{row}");
    assert!(table.contains("pstat layers C/M/W"), "{table}");
}

#[test]
fn tokenize_reads_a_folder_tokenizer() {
    let gemma = fixture("gemma3");
    let out = pstat(
        &["tokenize", "--model", gemma.to_str().unwrap()],
        "The city of Paris is in France.\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert!(line["ids"].as_array().unwrap().len() > 4, "{line}");
}

fn bad_input(args: &[&str], expect: &str) {
    let out = pstat(args, "x\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(expect), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn unusable_models_exit_with_status_2() {
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    bad_input(&["tokenize", "--model", dir], "tokenizer.json");
    bad_input(&["models", "list", dir], "config.json");
    bad_input(&["tokenize", "--model", "no-such-model"], "no-such-model");

    let falcon = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture("qwen2")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), falcon.path().join(entry.file_name())).unwrap();
    }
    let config = falcon.path().join("config.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("Qwen2ForCausalLM", "FalconForCausalLM");
    std::fs::write(&config, text).unwrap();
    let input = falcon.path().join("lines.txt");
    std::fs::write(&input, "x\n").unwrap();
    let out = falcon.path().join("h.safetensors");
    bad_input(
        &[
            "hidden",
            "--model",
            falcon.path().to_str().unwrap(),
            "--layers",
            "1",
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "FalconForCausalLM",
    );
}
