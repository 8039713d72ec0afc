//! `pstat run` end to end on the tiny random-weight Llama 3 model (byte-level BPE vocabulary)
//! that scripts/test builds under $PSTAT_TINY_MODELS: both stages (representational and
//! behavioral), the familiarity measures and the report, on a handful of statements.
//! Under CI=true a missing PSTAT_TINY_MODELS is a failure; elsewhere the test records a skip.

use std::path::PathBuf;
use std::process::Command;

/// $PSTAT_TINY_MODELS/tiny-llama3-f32.gguf; without it a failure under CI=true, else a skip.
fn tiny_llama3() -> Option<PathBuf> {
    let dir = std::env::var_os("PSTAT_TINY_MODELS").or_else(|| {
        pstat_testkit::missing("PSTAT_TINY_MODELS is not set (scripts/test builds the tiny models)")
    })?;
    let path = PathBuf::from(dir).join("tiny-llama3-f32.gguf");
    assert!(path.is_file(), "{} is missing", path.display());
    Some(path)
}

/// The model has two blocks, too few for the selection's l±2 window, so the veracity layer is
/// fixed and only offset 0 is probed.
#[test]
fn run_completes_on_the_tiny_llama3_model() {
    let Some(model) = tiny_llama3() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            models = [{model:?}]
            domains = ["city_locations"]
            test_limit = 12
            train_limit = 60
            bootstrap_resamples = 20
            [representational]
            veracity_layer = 1
            layer_offsets = [0]
            mass_mean_layer_offsets = [0]
            sawmil_c = 1.0
            selection_statements = 20
            [behavioral]
            k = [2]
            baselines = ["empty"]
            formats = ["plain"]
            [familiarity]
            statements_per_kind = 3
            distance_pairs = 20
            "#,
            model = model.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["run", "--config", config.to_str().unwrap(), "--out"])
        .arg(&out)
        .env("PSTAT_HOME", dir.path().join("home"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for file in [
        "stability.csv",
        "familiarity.csv",
        "layers.json",
        "report.html",
    ] {
        assert!(out.join(file).is_file(), "no {file}");
    }
    // Both stages wrote rows for the model (column `instantiation`).
    let stability = std::fs::read_to_string(out.join("stability.csv")).unwrap();
    for stage in [",representational,", ",behavioral,"] {
        assert!(
            stability
                .lines()
                .any(|l| l.starts_with("tiny-llama3-f32,city_locations") && l.contains(stage)),
            "no {stage} rows: {stability}"
        );
    }
}
