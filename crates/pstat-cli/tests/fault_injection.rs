//! Fault injection through the `pstat` binary, on a small study of the embedded SmolLM2 (one
//! domain, 20 held-out statements, a Mass-Mean probe at a fixed layer, K = 5): a run killed
//! with SIGKILL at two points and resumed writes the same bytes as a run never interrupted;
//! same-size damage to an activation file, a behavioral judgment file, a representational unit
//! record, the veracity-layer record and the run manifest is named in a warning, moved aside
//! as `*.corrupt` and
//! recomputed to the same bytes; bad configs and folders are refused before any model loads.
//!
//! Needs the embedded model in `$PSTAT_HOME` (`pstat models pull smollm2-135m-instruct`);
//! without it the model cases record a skip, except under CI=true, where that is a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MODEL: &str = "smollm2-135m-instruct";
const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

const CONFIG: &str = r#"
models = ["smollm2-135m-instruct"]
domains = ["city_locations"]
test_limit = 20
train_limit = 60
bootstrap_resamples = 20

[representational]
probes = ["mass_mean"]
mass_mean_layer_offsets = [0]
layer_offsets = [0]
veracity_layer = 20

[behavioral]
k = [5]
baselines = ["empty"]
formats = ["plain"]

[familiarity]
enabled = false
"#;

/// A `PSTAT_HOME` of its own (so the activation cache starts empty) whose model cache links
/// to the real one.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Option<Self> {
        let real = std::env::var_os("PSTAT_HOME").map(PathBuf::from);
        let model = real.as_ref().map(|h| h.join("models").join(MODEL_FILE));
        let Some(model) = model.filter(|m| m.is_file()) else {
            let why = format!(
                "{MODEL_FILE} is not under $PSTAT_HOME/models (run `pstat models pull {MODEL}`)"
            );
            return pstat_testkit::missing(why);
        };
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        std::fs::create_dir(&models).unwrap();
        std::os::unix::fs::symlink(&model, models.join(MODEL_FILE)).unwrap();
        let mut stamp = model.as_os_str().to_owned();
        stamp.push(".sha256");
        if Path::new(&stamp).is_file() {
            std::fs::copy(&stamp, models.join(format!("{MODEL_FILE}.sha256"))).unwrap();
        }
        let home = Home { dir };
        std::fs::write(home.config(), CONFIG).unwrap();
        Some(home)
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn pstat(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pstat"));
        command
            .env("PSTAT_HOME", self.dir.path())
            .env("RAYON_NUM_THREADS", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn run(&self, out: &Path) -> Command {
        self.run_config(&self.config(), out)
    }

    fn run_config(&self, config: &Path, out: &Path) -> Command {
        let mut command = self.pstat();
        command
            .args(["run", "--quiet", "--config"])
            .arg(config)
            .arg("--out")
            .arg(out);
        command
    }

    /// Starts `command` and stops it with `signal` (`KILL`, `TERM`) once `reached` holds;
    /// returns its output.
    fn stop_when(
        &self,
        mut command: Command,
        signal: &str,
        what: &str,
        reached: impl Fn() -> bool,
    ) -> Output {
        let mut child = command.spawn().unwrap();
        let started = Instant::now();
        while !reached() {
            if let Some(status) = child.try_wait().unwrap() {
                let output = child.wait_with_output().unwrap();
                panic!(
                    "the run ended ({status}) before {what}:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{what}: not reached"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        child.wait_with_output().unwrap()
    }

    /// Runs the study into `out` to the end; returns its stderr.
    fn complete(&self, out: &Path) -> String {
        let output = self.run(out).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "pstat run failed:\n{stderr}");
        stderr
    }

    /// Starts the study into `out` and kills it with SIGKILL once `reached` holds.
    fn kill_when(&self, out: &Path, what: &str, reached: impl Fn() -> bool) {
        self.stop_when(self.run(out), "KILL", what, reached);
    }

    /// The activation cache files of the runs.
    fn activation_files(&self) -> Vec<PathBuf> {
        files_under(&self.dir.path().join("activations"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect()
    }
}

/// Every file under `dir` (recursively).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The bytes of every result file of a run folder, by relative path: all but the log, the
/// lock and leftovers of writes a kill interrupted (hidden files), and files moved aside.
fn results(out: &Path) -> BTreeMap<String, Vec<u8>> {
    files_under(out)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.starts_with('.') && name != "run.log" && !name.ends_with(".corrupt")
        })
        .map(|p| {
            let rel = p.strip_prefix(out).unwrap().display().to_string();
            (rel, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn assert_same_results(expected: &BTreeMap<String, Vec<u8>>, out: &Path) {
    let actual = results(out);
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&actual), names(expected), "the same files");
    for (name, bytes) in expected {
        assert!(actual[name] == *bytes, "{name} differs");
    }
}

/// Overwrites one ASCII digit at or after `from` with another digit: same size, still valid
/// text, different content.
fn change_a_digit(path: &Path, from: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = (from..bytes.len())
        .find(|&i| bytes[i].is_ascii_digit())
        .unwrap_or_else(|| panic!("{}: no digit after byte {from}", path.display()));
    bytes[at] = if bytes[at] == b'7' { b'3' } else { b'7' };
    std::fs::write(path, bytes).unwrap();
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn killed_twice_and_resumed_equals_uninterrupted_and_damage_is_recomputed() {
    let Some(home) = Home::new() else { return };
    let work = tempfile::tempdir().unwrap();
    let cell = Path::new(MODEL).join("city_locations");

    // Killed once right after the activation cache is written (the probe unit may or may not
    // be done), once after the first behavioral unit, then resumed to the end.
    // The report's title names the folder: both runs go to a folder named `run`.
    let killed = work.path().join("killed/run");
    home.kill_when(&killed, "the activation cache is written", || {
        !home.activation_files().is_empty()
    });
    let first_unit = killed
        .join(&cell)
        .join("behavioral/plain/baseline_empty.context.json");
    home.kill_when(&killed, "the first behavioral unit is stored", || {
        first_unit.exists()
    });
    assert!(
        !killed.join("stability.csv").exists(),
        "killed before the tables"
    );
    home.complete(&killed);

    let clean = work.path().join("clean/run");
    home.complete(&clean);
    let expected = results(&clean);
    assert!(expected.contains_key("stability.csv"));
    assert_same_results(&expected, &killed);

    // Same-size damage to what a rerun reads back.
    let [activations] = home.activation_files().try_into().unwrap();
    let judgments = clean
        .join(&cell)
        .join("behavioral/plain/k5/fictional.main.jsonl");
    let unit = clean
        .join(&cell)
        .join("representational/mass_mean/layer_20/unit.json");
    let manifest = clean.join("manifest.json");
    let layers = clean.join(&cell).join("representational/layers.json");
    let damaged = [&activations, &judgments, &unit, &manifest, &layers];
    let sizes = |files: &[&PathBuf]| -> Vec<u64> {
        files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .collect()
    };
    let before = sizes(&damaged);
    let size = before[0] as usize;
    let mut bytes = std::fs::read(&activations).unwrap();
    bytes[size - 64] ^= 0x40;
    std::fs::write(&activations, bytes).unwrap();
    change_a_digit(&judgments, 40);
    change_a_digit(&unit, 200);
    let text = std::fs::read_to_string(&manifest).unwrap();
    change_a_digit(&manifest, text.find("config_hash").unwrap());
    let text = std::fs::read_to_string(&layers).unwrap();
    change_a_digit(&layers, text.find("veracity_layer").unwrap());
    assert_eq!(sizes(&damaged), before, "same-size damage");

    let stderr = home.complete(&clean);
    for damaged in damaged {
        let named = stderr
            .lines()
            .any(|l| l.contains("warning") && l.contains(&*damaged.display().to_string()));
        assert!(named, "{} is not named:\n{stderr}", damaged.display());
        let mut aside = damaged.as_os_str().to_owned();
        aside.push(".corrupt");
        assert!(
            Path::new(&aside).is_file(),
            "{} moved aside",
            damaged.display()
        );
    }
    assert_same_results(&expected, &clean);
}

#[test]
fn bad_configs_and_folders_are_refused_before_any_model_loads() {
    let work = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], config: Option<&str>, expect: &str| {
        let out = work.path().join("out");
        let mut command = Command::new(env!("CARGO_BIN_EXE_pstat"));
        command
            .env("PSTAT_HOME", work.path().join("home"))
            .args(["run", "--out"])
            .arg(&out)
            .args(args);
        if let Some(text) = config {
            let path = work.path().join("config.toml");
            std::fs::write(&path, text).unwrap();
            command.arg("--config").arg(&path);
        }
        let started = Instant::now();
        let output = command.output().unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "refused at once"
        );
        assert!(!work.path().join("home/models").exists(), "no model pulled");
        stderr
    };
    refused(
        &["--domains", "city_locations,med_indications,city_locations"],
        None,
        "`domains` lists `city_locations` twice",
    );
    refused(&[], Some("bootstrap_resamples = 0"), "bootstrap_resamples");
    refused(
        &[],
        Some("test_limit = 0"),
        "`test_limit` must be at least 1",
    );
    refused(&[], Some("[representational]\nsawmil_c = -1.0"), "sawmil_c");
    assert!(!work.path().join("out").exists(), "nothing written");
    // --out naming a file: the error names it.
    std::fs::write(work.path().join("out"), "a file").unwrap();
    let stderr = refused(&["--quick"], None, "not a folder");
    assert!(
        stderr.contains(&*work.path().join("out").display().to_string()),
        "{stderr}"
    );
    // sawmil's C must be positive, refused by the parser (usage error, exit 2).
    for c in ["0", "-1", "nan"] {
        let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
            .args(["sawmil", "fit", "--bags", "none.safetensors", "--out", "p"])
            .arg(format!("--C={c}"))
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("above 0"), "{stderr}");
    }
}

/// A safetensors file holding `X` as an f32 tensor of `rows` × 3 zeros.
fn points(path: &Path, rows: usize) {
    let data = rows * 3 * 4;
    let mut header =
        format!(r#"{{"X":{{"dtype":"F32","shape":[{rows},3],"data_offsets":[0,{data}]}}}}"#);
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn clustering_no_points_fails_and_identical_points_have_no_structure() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.safetensors");
    let cluster = || {
        Command::new(env!("CARGO_BIN_EXE_pstat"))
            .args(["cluster", "--input"])
            .arg(&input)
            .output()
            .unwrap()
    };
    points(&input, 0);
    let output = cluster();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("no points"));
    points(&input, 40);
    let output = cluster();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        result["no_structure"]
            .as_str()
            .unwrap()
            .contains("zero variance"),
        "{result}"
    );
    assert!(result["labels"].as_array().unwrap().iter().all(|l| l == -1));
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["models", "list"][..],
        &["models", "list", "--json"],
        &["data", "stats"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
            .args(args)
            .env("PSTAT_HOME", home.path())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn models_verify_hashes_in_full_and_names_a_damaged_file() {
    let home = tempfile::tempdir().unwrap();
    let verify = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pstat"))
            .args(["models", "verify"])
            .args(args)
            .env("PSTAT_HOME", home.path())
            .output()
            .unwrap()
    };
    let output = verify(&[]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("no registry model"));
    // Not pulled: named, with the command that fetches it.
    let output = verify(&[MODEL]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains(&format!("pstat models pull {MODEL}")));
    // A damaged file (any bytes with a stamp that vouches for them) is caught by the full hash.
    let models = home.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let file = models.join(MODEL_FILE);
    std::fs::write(&file, b"not a model").unwrap();
    let output = verify(&[]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&*file.display().to_string())
            && stderr.contains(&format!("pstat models pull {MODEL}")),
        "{stderr}"
    );
    let output = verify(&["--json"]);
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results[0]["name"], MODEL);
    assert_eq!(results[0]["ok"], false);
    // The real model verifies.
    let Some(real) = Home::new() else { return };
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["models", "verify", MODEL, "--json"])
        .env("PSTAT_HOME", real.dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results[0]["ok"], true, "{results}");
}

/// A behavioral unit larger than a checkpoint block (64 statements), alone in its study.
const UNIT_CONFIG: &str = r#"
models = ["smollm2-135m-instruct"]
domains = ["city_locations"]
test_limit = 150
train_limit = 60

[representational]
enabled = false

[behavioral]
k = [5]
baselines = ["empty"]
formats = ["plain"]

[familiarity]
enabled = false

[clustering]
enabled = false
"#;

/// The judgment lines of a unit's checkpoint (after its header line), or 0 without one.
fn checkpointed(out: &Path) -> usize {
    files_under(out)
        .iter()
        .find(|p| {
            p.to_string_lossy()
                .ends_with("baseline_empty.partial.jsonl")
        })
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map_or(0, |text| text.matches('\n').count().saturating_sub(1))
}

/// The empty-context baseline unit's judgments, once the unit is stored.
fn baseline_unit(out: &Path) -> Option<PathBuf> {
    let stored = files_under(out)
        .into_iter()
        .any(|p| p.to_string_lossy().ends_with("baseline_empty.context.json"));
    files_under(out)
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with("baseline_empty.jsonl"))
        .filter(|_| stored)
}

#[test]
fn a_unit_stopped_by_sigterm_says_how_to_resume_and_resumes_from_its_checkpoint() {
    let Some(home) = Home::new() else { return };
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("unit.toml");
    std::fs::write(&config, UNIT_CONFIG).unwrap();

    // The unit computed without interruption (the run stopped once it is stored).
    let whole = work.path().join("whole");
    home.stop_when(
        home.run_config(&config, &whole),
        "KILL",
        "the unit is stored",
        || baseline_unit(&whole).is_some(),
    );
    let expected = std::fs::read_to_string(baseline_unit(&whole).unwrap()).unwrap();

    // SIGTERM once the first block is checkpointed: one line says what is stored and how to
    // resume, and the exit status is 128 + 15.
    let stopped = work.path().join("stopped");
    let output = home.stop_when(
        home.run_config(&config, &stopped),
        "TERM",
        "a block is checkpointed",
        || checkpointed(&stopped) >= 64,
    );
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("interrupted: ")
            && last.contains("units are stored in")
            && last.contains("again to resume")
            && last.contains("--out"),
        "{stderr}"
    );
    assert!(baseline_unit(&stopped).is_none(), "stopped inside the unit");
    let blocks = checkpointed(&stopped) / 64 * 64;
    assert!(blocks >= 64);

    // A checkpointed judgment changed on disk shows whether the rerun reused the checkpoint
    // (it keeps the change) or recomputed it; everything after the checkpoint must be
    // computed to the same bytes as without the interruption.
    let partial = files_under(&stopped)
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".partial.jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&partial).unwrap();
    let second_line = text.find('\n').unwrap() + 1;
    change_a_digit(
        &partial,
        second_line + text[second_line..].find("\"p_a\"").unwrap(),
    );
    let changed = std::fs::read_to_string(&partial)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    home.stop_when(
        home.run_config(&config, &stopped),
        "KILL",
        "the unit is stored",
        || baseline_unit(&stopped).is_some(),
    );
    let resumed = std::fs::read_to_string(baseline_unit(&stopped).unwrap()).unwrap();
    let (resumed, expected): (Vec<&str>, Vec<&str>) =
        (resumed.lines().collect(), expected.lines().collect());
    assert_eq!(resumed.len(), expected.len());
    // The changed judgment is kept (its number written back in the shortest form that reads
    // as the same f64), every other line is byte for byte the uninterrupted run's.
    let value = |line: &str| serde_json::from_str::<serde_json::Value>(line).unwrap();
    assert_ne!(value(expected[0]), value(&changed));
    assert_eq!(value(resumed[0]), value(&changed));
    assert_eq!(resumed[1..], expected[1..]);
}
