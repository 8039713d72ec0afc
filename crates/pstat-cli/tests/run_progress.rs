//! What `pstat run` tells a caller without a terminal: `--dry-run --json` lists the units it
//! would compute without loading a model or writing anything; a real run (the embedded
//! SmolLM2 on a tiny config) leaves a log with the plan, the estimate and a line per unit
//! carrying the run's progress, the same lines in `run.log`, and a folder whose every unit the
//! next dry run finds stored.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn pstat(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(args)
        .env("PSTAT_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_dry_run_lists_the_quick_runs_units_without_loading_a_model() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let plan = json(&pstat(
        &[
            "run",
            "--quick",
            "--dry-run",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
        home.path(),
    ));
    let units = plan["units"].as_array().unwrap();
    // Per domain: layer selection, activations, sAwMIL and Mass-Mean at l+0, the baseline and
    // five Θ at K = 20 prompted and read by the baseline probes, object-token probabilities,
    // clustering.
    assert_eq!(units.len(), 3 * 18);
    assert_eq!(plan["units_total"], 54);
    assert_eq!(plan["units_stored"], 0);
    let count = |stage: &str| units.iter().filter(|u| u["stage"] == stage).count();
    assert_eq!(count("representational"), 12);
    assert_eq!(count("behavioral"), 18);
    assert_eq!(count("contextual"), 18);
    assert_eq!(count("familiarity"), 3);
    assert_eq!(count("retraction clustering"), 3);
    let probe = units
        .iter()
        .find(|u| u["kind"] == "probe" && u["probe"] == "sawmil")
        .unwrap();
    assert_eq!(
        probe["id"],
        "smollm2-135m-instruct/city_locations/probe/sawmil/l+0"
    );
    assert_eq!(probe["items"], 6, "one fit per condition");
    for unit in units {
        assert!(unit["estimate_s"].as_f64().unwrap() > 0.0, "{unit}");
    }
    assert!(plan["estimate_s"].as_f64().unwrap() > 60.0);
    assert!(!out.exists(), "a dry run writes nothing");
    assert!(
        std::fs::read_dir(home.path()).unwrap().next().is_none(),
        "no model was pulled"
    );

    let text = pstat(
        &[
            "run",
            "--quick",
            "--dry-run",
            "--out",
            out.to_str().unwrap(),
        ],
        home.path(),
    );
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("plan: 1 model(s) × 3 domain(s), 54 units (54 to compute): representational 12, behavioral 18, contextual 18"),
        "{text}"
    );
    assert!(lines[1].starts_with("estimate: about "), "{text}");
    assert_eq!(lines.len(), 2 + 54);
}

const TINY: &str = r#"
models = ["smollm2-135m-instruct"]
domains = ["city_locations"]
test_limit = 8
train_limit = 40
bootstrap_resamples = 20
[representational]
probes = ["mass_mean"]
mass_mean_layer_offsets = [0]
veracity_layer = 20
[behavioral]
k = [2]
baselines = ["empty"]
formats = ["plain"]
[familiarity]
statements_per_kind = 3
distance_pairs = 50
"#;

#[test]
fn a_run_without_a_terminal_logs_its_plan_and_a_line_per_unit_with_the_run_eta() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(&config, TINY).unwrap();
    let out = dir.path().join("run");
    let args = [
        "run",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    // The models come from the caller's cache (pulled on first use); the paces this run
    // measures go to a home of its own.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let models = pstat_lm::registry::Cache::from_env().unwrap();
    std::fs::create_dir_all(models.dir()).unwrap();
    std::os::unix::fs::symlink(models.dir(), home.join("models")).unwrap();
    let run = pstat(&args, &home);
    let log = String::from_utf8(run.stderr).unwrap();
    assert!(run.status.success(), "{log}");
    // Activations, Mass-Mean at the fixed layer, the baseline and five Θ prompted and read by
    // the baseline probe, object-token probabilities, clustering.
    assert!(
        log.contains("plan: 1 model(s) × 1 domain(s), 16 units (16 to compute): representational 2, behavioral 6, contextual 6, familiarity 1, retraction clustering 1"),
        "{log}"
    );
    assert!(log.contains("] estimate: about "), "{log}");
    let done: Vec<&str> = log.lines().filter(|l| l.contains("] done ")).collect();
    assert!(done.len() >= 8, "{log}");
    for line in &done {
        assert!(
            line.contains("; run ") && line.contains(" units, ") && line.ends_with(" left"),
            "{line}"
        );
    }
    assert!(
        done.iter()
            .any(|l| l.contains("done smollm2-135m-instruct city_locations activations: 48 items")),
        "{log}"
    );
    let run_log = std::fs::read_to_string(out.join("run.log")).unwrap();
    for line in [
        "plan: ",
        "estimate: ",
        "done plain baseline main: 8 items in ",
    ] {
        assert!(run_log.contains(line), "{line}: {run_log}");
    }

    let mut dry = args.to_vec();
    dry.extend(["--dry-run", "--json"]);
    let plan = json(&pstat(&dry, &home));
    assert_eq!(plan["units"], serde_json::json!([]), "{plan}");
    assert_eq!(plan["units_stored"], 16);
    // The run measured its units against the reference costs, for the next plan.
    let paces: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("costs.json")).unwrap()).unwrap();
    let prompt = &paces["smollm2-135m-instruct"]["prompt"];
    assert!(prompt["measured_s"].as_f64().unwrap() > 0.0, "{paces}");
    assert!(prompt["reference_s"].as_f64().unwrap() > 0.0, "{paces}");
}
