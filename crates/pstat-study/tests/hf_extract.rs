//! tools/extract/hf_extract.py against pstat, opt-in: on the tiny random Llama folder of
//! pstat-lm's fixtures, `export --statements-only` then hf_extract.py (transformers, float32 on
//! the CPU) fill an activation folder that a run accepts (tokenization, provenance and content
//! hash all checked) and whose values match pstat's own extraction. Runs only where the Python
//! of PSTAT_TRANSFORMERS_PYTHON (default `python3`) imports torch, transformers, numpy,
//! safetensors and xxhash; records a skip otherwise, under CI=true as well, since the CI machines do
//! not install torch.

use pstat_data::activations::Activations;
use pstat_study::{RunConfig, Silent, execute};
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> Option<String> {
    let python = std::env::var("PSTAT_TRANSFORMERS_PYTHON").unwrap_or_else(|_| "python3".into());
    let imports = Command::new(&python)
        .args([
            "-c",
            "import torch, transformers, numpy, safetensors, xxhash",
        ])
        .output()
        .ok()?;
    imports.status.success().then_some(python)
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
        enabled = false
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        "#,
        model = model.display().to_string()
    ))
    .unwrap();
    config.representational.activations = activations.map(|p| p.display().to_string());
    config.validate().unwrap();
    config
}

#[test]
fn hf_extract_writes_activations_pstat_accepts_and_agrees_with() {
    let Some(python) = python().or_else(|| {
        pstat_testkit::opt_in_missing(
            "no Python with torch, transformers, numpy, safetensors and xxhash (set PSTAT_TRANSFORMERS_PYTHON)",
        )
    }) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let model = root.join("crates/pstat-lm/tests/fixtures/hf/llama/hf");
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", dir.path().join("home")) };

    let theirs = dir.path().join("hf");
    pstat_study::activations::export(config(&model, None), &theirs, true, &mut Silent).unwrap();
    let status = Command::new(&python)
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
        .status()
        .unwrap();
    assert!(status.success(), "hf_extract.py failed");
    execute(
        config(&model, Some(&theirs)),
        &dir.path().join("run"),
        &mut Silent,
    )
    .unwrap();

    let ours = dir.path().join("pstat");
    pstat_study::activations::export(config(&model, None), &ours, false, &mut Silent).unwrap();
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
}
