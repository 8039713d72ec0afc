//! A small study run whole, and the same config run as three concurrent shards into one folder
//! and merged, give byte-identical tables. The shards start with a cold activation cache of
//! their own, so they race for the veracity layer, the activations and the prompt format
//! (each computed once under a lock), and the whole run's units computed on freshly extracted
//! activations must equal the shards' computed on cached ones. Uses the embedded SmolLM2
//! (pulled into `PSTAT_HOME` on first use, like every real-model test).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const CONFIG: &str = r#"
seed = 7
models = ["smollm2-135m-instruct"]
domains = ["city_locations"]
test_limit = 24
train_limit = 120
bootstrap_resamples = 50

[representational]
probes = ["sawmil", "mass_mean"]
layer_offsets = [0, 1]
mass_mean_layer_offsets = [-1, 0]
sawmil_c = 0.1
selection_statements = 40

[behavioral]
k = [4]
baselines = ["empty", "true"]
formats = ["auto"]
resamples = 1

[familiarity]
statements_per_kind = 4
distance_pairs = 50
"#;

/// A `PSTAT_HOME` of its own (so its activation cache starts cold) sharing the models of the
/// caller's, which gets the embedded model if it lacks it.
fn home(root: &Path, name: &str) -> PathBuf {
    let models = pstat_lm::registry::Cache::from_env().unwrap();
    pstat_lm::registry::resolve("smollm2-135m-instruct").unwrap_or_else(|e| panic!("{e}"));
    let home = root.join(name);
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(models.dir(), home.join("models")).unwrap();
    home
}

fn pstat(home: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(args)
        .args(["--threads", "1"])
        .env("PSTAT_HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn succeeded(output: Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The run folder's top-level files: the tables, their manifests, the config.
fn tables(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        // The log and the lock say what happened, the report embeds its folder's path.
        .filter(|(name, _)| !matches!(name.as_str(), "run.log" | ".lock" | "report.html"))
        .map(|(name, p)| (name, std::fs::read(p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn three_concurrent_shards_merged_equal_the_whole_run() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("small.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let config = config.to_str().unwrap();

    let whole = root.path().join("whole");
    let home_whole = home(root.path(), "home-whole");
    let run = ["run", "--config", config, "--out", whole.to_str().unwrap()];
    succeeded(
        pstat(&home_whole, &run).wait_with_output().unwrap(),
        "whole run",
    );

    let sharded = root.path().join("sharded");
    let out = sharded.to_str().unwrap();
    let home_shards = home(root.path(), "home-shards");
    let shards: Vec<Child> = (0..3)
        .map(|i| {
            let shard = format!("{i}/3");
            pstat(
                &home_shards,
                &["run", "--config", config, "--out", out, "--shard", &shard],
            )
        })
        .collect();
    for (i, shard) in shards.into_iter().enumerate() {
        succeeded(shard.wait_with_output().unwrap(), &format!("shard {i}/3"));
    }
    for i in 0..3 {
        let done = sharded.join("shards").join(format!("{i}-of-3.json"));
        let done: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&done).unwrap()).unwrap();
        assert!(done["units"].as_u64().unwrap() > 0, "shard {i} had work");
    }
    assert!(
        !sharded.join("stability.csv").exists(),
        "shards write no tables"
    );
    succeeded(
        pstat(&home_shards, &["merge", out])
            .wait_with_output()
            .unwrap(),
        "merge",
    );

    let (expected, merged) = (tables(&whole), tables(&sharded));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&merged), names(&expected));
    assert!(names(&expected).contains(&"stability.csv".to_string()));
    for ((name, want), (_, got)) in expected.iter().zip(&merged) {
        assert!(
            want == got,
            "{name} differs between the whole and the sharded run"
        );
    }

    // A merge that finds a unit missing names it and its shard instead of computing it.
    let unit =
        std::fs::read_dir(sharded.join("smollm2-135m-instruct/city_locations/behavioral/plain/k4"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".main.context.json"))
            .unwrap();
    std::fs::remove_file(&unit).unwrap();
    let output = pstat(&home_shards, &["merge", out])
        .wait_with_output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let error = stderr.lines().last().unwrap();
    assert!(
        error.contains("stage=behavioral") && error.contains("is missing (shard "),
        "{stderr}"
    );
}
