//! The run both import tests compare: the tiny Llama's representational stage, computed in
//! process or read from an activation folder.

use pstat_study::RunConfig;
use std::path::Path;

/// The representational stage only (the other stages do not read activations differently),
/// at a fixed veracity layer so that no layer selection runs the model.
pub fn config(model: &Path, activations: Option<&Path>) -> RunConfig {
    let mut config: RunConfig = toml::from_str(&format!(
        r#"
        seed = 11
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 20
        train_limit = 60
        bootstrap_resamples = 10
        [representational]
        probes = ["sawmil", "mass_mean"]
        layer_offsets = [-1, 0]
        mass_mean_layer_offsets = [0, 1]
        veracity_layer = 3
        sawmil_c = 1.0
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

/// The activation cache lives under `$PSTAT_HOME`.
pub fn use_home(home: &Path) {
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", home) };
}
