//! Property test: the run config (TOML), fed random text and damaged copies of a valid config
//! (cut short, characters overwritten, lines swapped), parses and validates to a value or an
//! error: never a panic, never a hang.

use proptest::prelude::*;
use pstat_study::RunConfig;
use std::sync::mpsc;
use std::time::Duration;

const VALID: &str = r#"
seed = 7
models = ["smollm2-135m-instruct"]
domains = ["city_locations", "med_indications"]
test_limit = 40
train_limit = 200
bootstrap_resamples = 50

[splits]
test = 0.25
calibration = 0.2

[representational]
probes = ["sawmil", "mass_mean"]
layer_offsets = [0]
mass_mean_layer_offsets = [-1, 0]
sawmil_c = 0.1
selection_statements = 100

[behavioral]
k = [20, 50]
baselines = ["empty"]
formats = ["plain"]
resamples = 1

[familiarity]
enabled = false

[clustering]
enabled = true

[[condition]]
name = "synthetic_all"
title = "Synthetic (all)"
probe_true = ["true", "synthetic_tf", "synthetic_fi"]
context = { from = "kinds", kinds = ["synthetic_tf", "synthetic_fi"] }
"#;

/// Parses and validates `text` on another thread; fails if that panics or hangs.
fn check(text: String) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = toml::from_str::<RunConfig>(&text)
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate().map_err(|e| e.to_string()));
        let _ = tx.send(outcome.is_ok());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(_) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no answer within 10 s (a hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("parsing or validating panicked"),
    }
}

fn damaged() -> impl Strategy<Value = String> {
    let chars: Vec<char> = VALID.chars().collect();
    let n = chars.len();
    let lines: Vec<&'static str> = VALID.lines().collect();
    let m = lines.len();
    let (a, b) = (chars.clone(), chars);
    prop_oneof![
        (0..n).prop_map(move |cut| a[..cut].iter().collect::<String>()),
        prop::collection::vec((0..n, any::<char>()), 1..6).prop_map(move |edits| {
            let mut c = b.clone();
            for (i, ch) in edits {
                c[i] = ch;
            }
            c.into_iter().collect()
        }),
        (0..m, 0..m).prop_map(move |(i, j)| {
            let mut l = lines.clone();
            l.swap(i, j);
            l.join("\n")
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_text_is_a_config_or_an_error(text in "\\PC{0,200}") {
        check(text);
    }

    #[test]
    fn a_damaged_config_is_a_config_or_an_error(text in damaged()) {
        check(text);
    }
}

#[test]
fn the_valid_config_validates() {
    let config: RunConfig = toml::from_str(VALID).unwrap();
    config.validate().unwrap();
}
