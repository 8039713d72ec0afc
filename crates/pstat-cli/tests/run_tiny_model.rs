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

/// Runs `pstat run` on the tiny model with `body` after its `models` line; returns the run
/// folder (kept alive by the returned temporary directory).
fn run_tiny(model: &std::path::Path, body: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(
        &config,
        format!("models = [{:?}]\n{body}", model.to_str().unwrap()),
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
    (dir, out)
}

/// The paper's default: no `sawmil_c`, so sAwMIL's C is chosen by 3-fold cross-validation on
/// the baseline Θ0's labels, once per layer, and every Θ of the layer is fit with it.
#[test]
fn default_c_is_chosen_by_cross_validation_on_the_baseline() {
    let Some(model) = tiny_llama3() else { return };
    let (_dir, out) = run_tiny(
        &model,
        r#"
        domains = ["city_locations"]
        test_limit = 12
        train_limit = 60
        bootstrap_resamples = 20
        [representational]
        veracity_layer = 1
        probes = ["sawmil"]
        layer_offsets = [0, 1]
        selection_statements = 20
        [behavioral]
        enabled = false
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        "#,
    );
    let mut chosen = Vec::new();
    for layer in [1, 2] {
        let unit = out.join(format!(
            "tiny-llama3-f32/city_locations/representational/sawmil/layer_{layer:02}"
        ));
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(unit.join("probe.json")).unwrap()).unwrap();
        assert_eq!(record["c_source"], "cv_baseline", "layer {layer}: {record}");
        let grid: Vec<f64> = record["cv_scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s[0].as_f64().unwrap())
            .collect();
        assert_eq!(grid, [0.05, 0.1, 0.5, 1.0, 10.0], "layer {layer}");
        let c = record["c"].as_f64().unwrap();
        assert!(grid.contains(&c), "layer {layer}: C = {c}");
        chosen.push(c);
        // Every Θ of the layer was fit with that one C (the `c` column of stability.csv).
        let stability = std::fs::read_to_string(out.join("stability.csv")).unwrap();
        let header: Vec<&str> = stability.lines().next().unwrap().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let rows: Vec<Vec<&str>> = stability
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .filter(|r: &Vec<&str>| r[col("layer")] == layer.to_string())
            .collect();
        assert!(rows.len() >= 5, "layer {layer}: {stability}");
        for r in rows {
            assert_eq!(r[col("c")].parse::<f64>().unwrap(), c, "{r:?}");
        }
    }
    assert_eq!(chosen.len(), 2);
}

/// `protocol = "authors"`: every behavioral unit keeps its first prompt, in the authors' text.
#[test]
fn every_behavioral_unit_keeps_its_first_prompt() {
    let Some(model) = tiny_llama3() else { return };
    let (_dir, out) = run_tiny(
        &model,
        r#"
        protocol = "authors"
        domains = ["city_locations"]
        test_limit = 12
        train_limit = 60
        bootstrap_resamples = 20
        [representational]
        enabled = false
        [behavioral]
        k = [2]
        baselines = ["empty", "true"]
        formats = ["plain"]
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        "#,
    );
    let dir = out.join("tiny-llama3-f32/city_locations/behavioral/plain");
    let mut units = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                units.push(path);
            }
        }
    }
    // The empty baseline, the True baseline and Table 2's five perturbations.
    assert_eq!(units.len(), 7, "{units:?}");
    for unit in units {
        let prompt = unit.with_extension("prompt.txt");
        let text = std::fs::read_to_string(&prompt)
            .unwrap_or_else(|e| panic!("{}: {e}", prompt.display()));
        assert!(
            text.ends_with("\nPlease respond with the corresponding letter. The final answer is "),
            "{text:?}"
        );
        assert!(
            text.contains("\nSelect one of the following options:\na. "),
            "{text:?}"
        );
        let name = unit.file_name().unwrap().to_string_lossy().into_owned();
        if name == "baseline_empty.jsonl" {
            assert!(
                text.starts_with("Is the following statement correct?\n"),
                "{text:?}"
            );
        } else {
            assert!(
                text.starts_with("Let's say that you believe these statements:\n"),
                "{name}: {text:?}"
            );
        }
    }
}

/// Beliefs (id → judged True) from a probe unit's record, per condition.
fn probe_beliefs(
    unit: &std::path::Path,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, bool>> {
    record_beliefs(&unit.join("unit.json"))
}

/// Beliefs (id → judged True) per judgment key of a unit record that holds `judgments` (a
/// probe unit: per condition; a contextual unit: per `<probe>@<layer>`).
fn record_beliefs(
    path: &std::path::Path,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, bool>> {
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap();
    record["record"]["judgments"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(condition, judged)| {
            let beliefs = judged
                .as_array()
                .unwrap()
                .iter()
                .map(|j| {
                    (
                        j["id"].as_str().unwrap().to_string(),
                        j["judged_true"].as_bool().unwrap(),
                    )
                })
                .collect();
            (condition.clone(), beliefs)
        })
        .collect()
}

/// Beliefs (id → judged True) of a behavioral unit's judgments file.
fn prompt_beliefs(path: &std::path::Path) -> std::collections::BTreeMap<String, bool> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                j["id"].as_str().unwrap().to_string(),
                j["judged_true"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// Appendix I's input: `clusters.csv` holds exactly the statements a main configuration
/// retracted (sAwMIL at the veracity layer; the prompt's main draw at the largest K against the
/// empty baseline), each with the (instantiation, condition) pairs that did; Mass-Mean, the
/// neighbouring layer, the smaller K and the True baseline, all run here, add nothing.
#[test]
fn clusters_hold_only_the_main_configurations_retractions() {
    let Some(model) = tiny_llama3() else { return };
    let (_dir, out) = run_tiny(
        &model,
        r#"
        domains = ["city_locations"]
        test_limit = 60
        train_limit = 80
        bootstrap_resamples = 20
        [representational]
        veracity_layer = 1
        probes = ["sawmil", "mass_mean"]
        layer_offsets = [0, 1]
        mass_mean_layer_offsets = [0]
        sawmil_c = 1.0
        selection_statements = 20
        [behavioral]
        k = [2, 3]
        baselines = ["empty", "true"]
        formats = ["plain"]
        [familiarity]
        enabled = false
        "#,
    );
    let cell = out.join("tiny-llama3-f32/city_locations");
    let conditions = [
        "synthetic_tf",
        "synthetic_fi",
        "fictional",
        "fictional_t",
        "noise",
    ];
    let mut expected: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut add = |instantiation: &str,
                   base: &std::collections::BTreeMap<String, bool>,
                   perturbed: &std::collections::BTreeMap<String, bool>,
                   condition: &str| {
        for (id, believed) in base {
            if *believed && perturbed.get(id) == Some(&false) {
                expected
                    .entry(id.clone())
                    .or_default()
                    .push(format!("{instantiation}:{condition}"));
            }
        }
    };
    let sawmil = probe_beliefs(&cell.join("representational/sawmil/layer_01"));
    for c in conditions {
        add("representational", &sawmil["baseline"], &sawmil[c], c);
    }
    let plain = cell.join("behavioral/plain");
    let base = prompt_beliefs(&plain.join("baseline_empty.jsonl"));
    for c in conditions {
        add(
            "behavioral",
            &base,
            &prompt_beliefs(&plain.join(format!("k3/{c}.main.jsonl"))),
            c,
        );
    }
    // What the robustness configurations retract beyond the main ones must stay out.
    let mass_mean = probe_beliefs(&cell.join("representational/mass_mean/layer_01"));
    let neighbour = probe_beliefs(&cell.join("representational/sawmil/layer_02"));
    let mut robust = std::collections::BTreeSet::new();
    for c in conditions {
        for beliefs in [&mass_mean, &neighbour] {
            for (id, believed) in &beliefs["baseline"] {
                if *believed && beliefs[c].get(id) == Some(&false) {
                    robust.insert(id.clone());
                }
            }
        }
        let k2 = prompt_beliefs(&plain.join(format!("k2/{c}.main.jsonl")));
        for (id, believed) in &base {
            if *believed && k2.get(id) == Some(&false) {
                robust.insert(id.clone());
            }
        }
    }
    let only_robust: Vec<&String> = robust
        .iter()
        .filter(|id| !expected.contains_key(*id))
        .collect();
    let clusters = std::fs::read_to_string(out.join("clusters.csv")).unwrap();
    let header: Vec<&str> = clusters.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: std::collections::BTreeMap<String, (String, usize)> = clusters
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .map(|r| {
            (
                r[col("statement_id")].to_string(),
                (
                    r[col("retracted_by")].to_string(),
                    r[col("retraction_count")].parse().unwrap(),
                ),
            )
        })
        .collect();
    assert!(
        expected.len() >= 8,
        "too few retractions to cluster: {expected:?}"
    );
    // The fixture is one where leaving the robustness configurations out changes the input.
    assert!(
        !only_robust.is_empty(),
        "no statement is retracted by a robustness configuration alone"
    );
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "clustered statements (retracted by robustness configurations only: {only_robust:?})"
    );
    for (id, mut by) in expected {
        by.sort();
        assert_eq!(rows[&id], (by.join(";"), by.len()), "{id}");
    }
}

/// Beyond the paper: `agreement.csv` compares, per condition, the statements the main
/// representational configuration (sAwMIL at the veracity layer) retracts with those the main
/// behavioral one retracts, over the held-out True statements; counts, Jaccard and Cohen's κ
/// equal a hand computation from the units' judgments.
#[test]
fn agreement_between_instantiations_matches_a_hand_computation() {
    let Some(model) = tiny_llama3() else { return };
    let (_dir, out) = run_tiny(
        &model,
        r#"
        domains = ["city_locations"]
        test_limit = 60
        train_limit = 80
        bootstrap_resamples = 20
        [representational]
        veracity_layer = 1
        probes = ["sawmil"]
        layer_offsets = [0]
        sawmil_c = 1.0
        selection_statements = 20
        [behavioral]
        k = [3]
        formats = ["plain"]
        [familiarity]
        enabled = false
        "#,
    );
    let cell = out.join("tiny-llama3-f32/city_locations");
    let sawmil = probe_beliefs(&cell.join("representational/sawmil/layer_01"));
    let plain = cell.join("behavioral/plain");
    let prompt_base = prompt_beliefs(&plain.join("baseline_empty.jsonl"));
    let contextual = cell.join("contextual");
    let context_base = record_beliefs(&contextual.join("baseline_empty.json"))["sawmil@1"].clone();
    let table = std::fs::read_to_string(out.join("agreement.csv")).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let conditions = [
        "synthetic_tf",
        "synthetic_fi",
        "fictional",
        "fictional_t",
        "noise",
    ];
    let pairs = [
        ("representational", "behavioral"),
        ("representational", "contextual"),
        ("behavioral", "contextual"),
    ];
    assert_eq!(rows.len(), conditions.len() * pairs.len(), "{table}");
    // Held-out True statements: those the prompt asked.
    let held_out: Vec<&String> = prompt_base.keys().collect();
    let mut some_retracted = false;
    for condition in conditions {
        // Per instantiation, whether it retracts each held-out statement, from its unit files.
        let retracted = |instantiation: &str| -> Vec<bool> {
            let (base, perturbed) = match instantiation {
                "representational" => (sawmil["baseline"].clone(), sawmil[condition].clone()),
                "behavioral" => (
                    prompt_base.clone(),
                    prompt_beliefs(&plain.join(format!("k3/{condition}.main.jsonl"))),
                ),
                _ => (
                    context_base.clone(),
                    record_beliefs(&contextual.join(format!("k3/{condition}.json")))["sawmil@1"]
                        .clone(),
                ),
            };
            held_out
                .iter()
                .map(|id| base[*id] && !perturbed[*id])
                .collect()
        };
        for (a_name, b_name) in pairs {
            let row = rows
                .iter()
                .find(|r| {
                    r[col("condition")] == condition
                        && r[col("a")] == a_name
                        && r[col("b")] == b_name
                })
                .unwrap_or_else(|| panic!("no row for {condition} {a_name}/{b_name}: {table}"));
            let (a, b) = (retracted(a_name), retracted(b_name));
            let n = held_out.len() as f64;
            let count = |f: &dyn Fn(bool, bool) -> bool| {
                a.iter().zip(&b).filter(|(x, y)| f(**x, **y)).count()
            };
            let (both, only_a, only_b) = (
                count(&|x, y| x && y),
                count(&|x, y| x && !y),
                count(&|x, y| !x && y),
            );
            let neither = held_out.len() - both - only_a - only_b;
            some_retracted |= both + only_a + only_b > 0;
            let number = |name: &str| row[col(name)].parse::<f64>().ok();
            assert_eq!(number("n"), Some(n), "{condition}");
            assert_eq!(number("retracted_a"), Some((both + only_a) as f64));
            assert_eq!(number("retracted_b"), Some((both + only_b) as f64));
            assert_eq!(number("retracted_both"), Some(both as f64));
            let union = both + only_a + only_b;
            let jaccard = (union > 0).then(|| both as f64 / union as f64);
            let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => (x - y).abs() < 1e-12,
                (x, y) => x == y,
            };
            assert!(close(number("jaccard"), jaccard), "{condition}: {row:?}");
            let (pa, pb) = ((both + only_a) as f64 / n, (both + only_b) as f64 / n);
            let chance = pa * pb + (1.0 - pa) * (1.0 - pb);
            let observed = (both + neither) as f64 / n;
            let kappa = (chance < 1.0).then(|| (observed - chance) / (1.0 - chance));
            assert!(close(number("kappa"), kappa), "{condition}: {row:?}");
            let listed: Vec<&str> = row[col("retracted_by_both")]
                .split(';')
                .filter(|s| !s.is_empty())
                .collect();
            assert_eq!(listed.len(), both, "{condition}");
        }
    }
    assert!(some_retracted, "the fixture retracts nothing: {table}");
}
