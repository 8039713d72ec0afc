//! tools/extract/hf_extract.py against pstat: on the tiny random Llama folder of pstat-lm's
//! fixtures, `export --statements-only` then hf_extract.py (transformers, float32 on the CPU,
//! hooks on the requested blocks only) fill an activation folder that a run accepts
//! (tokenization, provenance and content hash all checked), whose values match pstat's own
//! extraction, and from which the study's representational tables come out as from the
//! in-process run: the same judgment of every statement under every condition, probe scores
//! within 1e-2·(1 + |score|) (both stores round to f16; transformers sums in another order).
//! The same holds for the contextual stage: hf_extract.py runs every held-out statement after
//! each belief context listed in the folder (`contextual/<context>/context.json`), and the run
//! that reads those files (`contextual.activations`) judges every statement as the in-process
//! run does.
//!
//! The Python is PSTAT_TRANSFORMERS_PYTHON (scripts/test-references installs torch,
//! transformers, numpy, safetensors and xxhash); without it the test says so and passes, except
//! under CI=true, where it fails.

mod tables;

use pstat_data::activations::Activations;
use pstat_study::{RunConfig, Silent, execute};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> Option<String> {
    std::env::var_os("PSTAT_TRANSFORMERS_PYTHON")
        .map(|p| p.to_string_lossy().into_owned())
        .or_else(|| {
            pstat_testkit::missing(
                "PSTAT_TRANSFORMERS_PYTHON is not set (scripts/test-references installs it): hf_extract.py not run",
            )
        })
}

fn config(model: &Path, activations: Option<&Path>) -> RunConfig {
    let mut config: RunConfig = toml::from_str(&format!(
        r#"
        seed = 3
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 12
        train_limit = 40
        bootstrap_resamples = 10
        [representational]
        probes = ["mass_mean"]
        mass_mean_layer_offsets = [0, 1]
        veracity_layer = 1
        [behavioral]
        k = [3]
        baselines = ["empty"]
        formats = ["plain"]
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        "#,
        model = model.display().to_string()
    ))
    .unwrap();
    config.representational.activations = activations.map(|p| p.display().to_string());
    config.contextual.activations = activations.map(|p| p.display().to_string());
    config.validate().unwrap();
    config
}

#[test]
fn hf_extract_writes_activations_pstat_accepts_and_agrees_with() {
    let Some(python) = python() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let model = root.join("crates/pstat-lm/tests/fixtures/hf/llama/hf");
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", dir.path().join("home")) };

    let theirs = dir.path().join("hf");
    pstat_study::export::activations(config(&model, None), &theirs, true, &mut Silent).unwrap();
    let output = Command::new(&python)
        .arg(root.join("tools/extract/hf_extract.py"))
        .args(["--model".as_ref(), model.as_os_str()])
        .args(["--dir".as_ref(), theirs.as_os_str()])
        .args([
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--batch-tokens",
            "64",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "hf_extract.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let imported_run = dir.path().join("run-imported");
    execute(config(&model, Some(&theirs)), &imported_run, &mut Silent).unwrap();
    let own_run = dir.path().join("run-own");
    execute(config(&model, None), &own_run, &mut Silent).unwrap();

    let ours = dir.path().join("pstat");
    pstat_study::export::activations(config(&model, None), &ours, false, &mut Silent).unwrap();
    let cell = |root: &Path, layer: usize| -> PathBuf {
        root.join("hf")
            .join("city_locations")
            .join(format!("layer_{layer:02}.safetensors"))
    };
    for layer in [1, 2] {
        let a = Activations::read(&cell(&theirs, layer)).unwrap();
        let b = Activations::read(&cell(&ours, layer)).unwrap();
        assert_eq!(
            (&a.statement_ids, &a.token_ids),
            (&b.statement_ids, &b.token_ids)
        );
        let worst = a
            .values
            .iter()
            .zip(&b.values)
            .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
            .fold(0f32, f32::max);
        // Both stored in f16 (relative step 2^-11); float32 sums in another order.
        assert!(
            worst < 5e-3,
            "layer {layer}: worst relative difference {worst}"
        );
    }

    // The representational tables: every unit's record, judgments and stability rows.
    let units = tables::unit_records(&own_run);
    assert_eq!(units.len(), 2, "one unit per layer: {units:?}");
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
    eprintln!("representational tables agree; largest |Δ| of a score or rate: {worst:.2e}");

    // The contextual units: every statement after every context, judged alike.
    let contexts = own_run.join("hf/city_locations/contextual");
    let mut units = 0;
    let mut worst = 0f64;
    for unit in [
        "baseline_empty.json",
        "k3/synthetic_tf.json",
        "k3/fictional.json",
    ] {
        let read = |run: &Path| -> Value {
            let path = run.join("hf/city_locations/contextual").join(unit);
            let record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            record["record"]["judgments"].clone()
        };
        let imported = imported_run.join("hf/city_locations/contextual");
        tables::same_tables(&read(&own_run), &read(&imported_run), unit, &mut worst);
        assert!(imported.join(unit).exists() && contexts.join(unit).exists());
        units += 1;
    }
    assert_eq!(units, 3);
    eprintln!("contextual judgments agree; largest |Δ| of a score: {worst:.2e}");
}
