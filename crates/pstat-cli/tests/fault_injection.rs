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
//!
//! Nothing on disk is trusted unless it proves where it belongs: on a tiny random-weight
//! Llama (`tiny_llama`), a unit record copied over another unit's, a saved probe with one
//! byte changed, an edited split, `probe.json`, a unit's manifest and `familiarity.jsonl` are
//! named, moved aside and recomputed to the same bytes; a folder whose `config.toml` is gone
//! reuses nothing under another config; a read-only `PSTAT_HOME` that holds everything serves a
//! run. Without a binary model: a config compared as a config
//! and a damaged one named, a failed first run that leaves the folder free, a lock that is a
//! link, durations of any size, damaged probes and non-finite activations, `pstat cluster
//! --out`, groups on a line, and servers that answer `Retry-After: 1e20` or never answer.

#[path = "../../pstat-study/tests/tiny_llama/mod.rs"]
mod tiny_llama;

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
    refused(
        &[],
        Some("[behavioral]\nk = [2, 2]"),
        "behavioral.k lists `2` twice",
    );
    // A later model that is not there is refused before the first one runs.
    refused(
        &[],
        Some("models = [\"smollm2-135m-instruct\", \"/nonexistent/x.gguf\"]"),
        "`models`: `/nonexistent/x.gguf` is neither",
    );
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

    // A checkpointed judgment changed on disk, and its block sealed again, shows whether the
    // rerun reused the checkpoint (it keeps the change) or recomputed it; everything after the
    // checkpoint must be computed to the same bytes as without the interruption. (Changed
    // without the seal, the block is refused: pstat-prompt's record tests.)
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
    let text = std::fs::read_to_string(&partial).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let block: String = lines[1..=64].iter().map(|l| format!("{l}\n")).collect();
    assert!(lines[65].starts_with("{\"block_sha256\""), "{}", lines[65]);
    lines[65] = format!(
        "{{\"block_sha256\":\"{}\"}}",
        pstat_data::artifact::sha256_hex(block.as_bytes())
    );
    std::fs::write(&partial, lines.join("\n") + "\n").unwrap();
    let changed = lines[1].clone();
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

/// A folder with the tiny random-weight Llama, a `PSTAT_HOME` of its own and run configs of
/// two probes at three layers (four probe units) and familiarity, on a few statements.
struct Tiny {
    dir: tempfile::TempDir,
    model: PathBuf,
}

impl Tiny {
    fn new() -> Option<Self> {
        let vocab = tiny_llama::vocabulary()?;
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny-llama.gguf");
        tiny_llama::write_tiny_llama(&vocab, &model);
        Some(Tiny { dir, model })
    }

    /// The run config with `test_limit` held-out statements.
    fn config(&self, test_limit: usize) -> PathBuf {
        let path = self.dir.path().join(format!("tiny-{test_limit}.toml"));
        let text = format!(
            r#"
            models = [{model:?}]
            domains = ["city_locations"]
            test_limit = {test_limit}
            train_limit = 60
            bootstrap_resamples = 20
            [representational]
            probes = ["sawmil", "mass_mean"]
            layer_offsets = [-1, 0]
            mass_mean_layer_offsets = [0, 1]
            veracity_layer = 3
            sawmil_c = 1.0
            [behavioral]
            enabled = false
            [familiarity]
            statements_per_kind = 3
            distance_pairs = 20
            [clustering]
            enabled = false
            "#,
            model = self.model.display().to_string()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn run(&self, config: &Path, out: &Path) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pstat"))
            .env("PSTAT_HOME", self.dir.path().join("home"))
            .env("RAYON_NUM_THREADS", "2")
            .args(["run", "--quiet", "--config"])
            .arg(config)
            .arg("--out")
            .arg(out)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn complete(&self, config: &Path, out: &Path) -> String {
        let output = self.run(config, out);
        let stderr = stderr_of(&output);
        assert!(output.status.success(), "pstat run failed:\n{stderr}");
        stderr
    }
}

/// The file `path` with one bit of its byte `from_end` bytes before the end flipped.
fn flip_a_bit(path: &Path, from_end: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_run_folder_reuses_only_what_proves_where_it_belongs() {
    let Some(tiny) = Tiny::new() else { return };
    let config = tiny.config(12);
    let out = tiny.dir.path().join("run");
    tiny.complete(&config, &out);
    let expected = results(&out);
    let cell = out.join("tiny-llama/city_locations");
    let unit =
        |probe: &str, layer: usize| cell.join(format!("representational/{probe}/layer_{layer:02}"));
    for dir in [
        unit("sawmil", 2),
        unit("sawmil", 3),
        unit("mass_mean", 3),
        unit("mass_mean", 4),
    ] {
        assert!(dir.join("unit.json").is_file(), "{}", dir.display());
    }

    // A valid record of another unit (mass_mean's) copied over sawmil's.
    let copied = unit("sawmil", 3).join("unit.json");
    std::fs::copy(unit("mass_mean", 3).join("unit.json"), &copied).unwrap();
    // One byte of a saved probe.
    let probe = std::fs::read_dir(unit("mass_mean", 3))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".probe.safetensors"))
        .unwrap();
    flip_a_bit(&probe, 3);
    // A split with two ids swapped: valid JSON, another split.
    let split = out.join("splits/city_locations.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&split).unwrap()).unwrap();
    let train0 = value["train"][0].clone();
    value["train"][0] = value["test"][0].clone();
    value["test"][0] = train0;
    std::fs::write(&split, serde_json::to_string_pretty(&value).unwrap() + "\n").unwrap();
    // Provenance records nobody else reads back.
    let probe_json = unit("sawmil", 2).join("probe.json");
    change_a_digit(&probe_json, 0);
    let unit_manifest = unit("mass_mean", 4).join("unit.json.manifest.json");
    let text = std::fs::read_to_string(&unit_manifest).unwrap();
    change_a_digit(&unit_manifest, text.find("config_hash").unwrap());
    let lines = cell.join("familiarity.jsonl");
    change_a_digit(&lines, 0);
    // The run manifest names the program that last wrote into the folder.
    let manifest = out.join("manifest.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    value["git_commit"] = "an older build".into();
    std::fs::write(&manifest, serde_json::to_vec_pretty(&value).unwrap()).unwrap();

    let stderr = tiny.complete(&config, &out);
    for damaged in [&copied, &probe, &split, &probe_json, &unit_manifest, &lines] {
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
    assert!(
        stderr.contains(
            "not of `tiny-llama/city_locations/representational/sawmil/layer_03/unit.json`"
        ),
        "{stderr}"
    );
    assert_same_results(&expected, &out);

    // config.toml deleted and another config asked for: refused, nothing touched.
    std::fs::remove_file(out.join("config.toml")).unwrap();
    let mut before = expected.clone();
    before.remove("config.toml");
    let output = tiny.run(&tiny.config(10), &out);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("config.toml is missing")
            && stderr.contains("nothing computed under another config is reused"),
        "{stderr}"
    );
    assert_eq!(results(&out), before, "nothing written");
    // The config the manifest names takes the folder back.
    let stderr = tiny.complete(&config, &out);
    assert!(
        stderr.contains("written again from this config"),
        "{stderr}"
    );
    assert_same_results(&expected, &out);
}

/// A config whose model is a file that is no model: a run of it fails after claiming the
/// folder (a model that is not there at all is refused before).
fn no_model_config(dir: &Path, extra: &str) -> PathBuf {
    let model = broken_model(dir);
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!("models = [{model:?}]\ndomains = [\"city_locations\"]\ntest_limit = 20\n{extra}"),
    )
    .unwrap();
    path
}

/// `dir/broken.gguf`, a file that is there but holds no model.
fn broken_model(dir: &Path) -> PathBuf {
    let model = dir.join("broken.gguf");
    std::fs::write(&model, "not a model").unwrap();
    model
}

fn pstat_run(home: &Path, config: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pstat"))
        .env("PSTAT_HOME", home)
        .args(["run", "--quiet", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_config_toml_is_compared_as_a_config_and_a_damaged_one_is_named() {
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    let config = no_model_config(work.path(), "");
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let held = out.join("config.toml");
    // The same config with other whitespace and comments: the same run.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &held,
        format!("# edited\n\n{}", text.replace(" = ", "   =   ")),
    )
    .unwrap();
    let stderr = stderr_of(&pstat_run(&home, &config, &out));
    assert!(!stderr.contains("another config"), "{stderr}");
    assert!(stderr.contains("broken.gguf"), "{stderr}");
    // A damaged config.toml: the file, the line and the setting.
    std::fs::write(
        &held,
        text.replace("test_limit = 20", "test_limit = \"twenty\""),
    )
    .unwrap();
    let output = pstat_run(&home, &config, &out);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&*held.display().to_string())
            && stderr.contains("line 3")
            && stderr.contains("test_limit"),
        "{stderr}"
    );
    // Another config: each setting that differs, with both values.
    std::fs::write(&held, text.replace("test_limit = 20", "test_limit = 40")).unwrap();
    let stderr = stderr_of(&pstat_run(&home, &config, &out));
    assert!(
        stderr.contains("`test_limit` is 40 there, 20 here"),
        "{stderr}"
    );
}

#[test]
fn a_failed_first_run_leaves_the_folder_to_the_next_config() {
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    let out = work.path().join("out");
    let first = no_model_config(work.path(), "");
    let output = pstat_run(&home, &first, &out);
    assert!(!output.status.success(), "{}", stderr_of(&output));
    assert!(
        !out.join("config.toml").exists(),
        "the folder is not claimed"
    );
    let corrected = no_model_config(work.path(), "train_limit = 60");
    let stderr = stderr_of(&pstat_run(&home, &corrected, &out));
    assert!(!stderr.contains("another config"), "{stderr}");
    assert!(stderr.contains("broken.gguf"), "{stderr}");

    // A stage that made its folder (and the lock in it) before failing computed nothing either.
    let Some(tiny) = Tiny::new() else { return };
    let out = work.path().join("out-layer");
    let layer = |n: usize| {
        let text = std::fs::read_to_string(tiny.config(8)).unwrap();
        let path = work.path().join(format!("layer-{n}.toml"));
        std::fs::write(
            &path,
            text.replace("veracity_layer = 3", &format!("veracity_layer = {n}")),
        )
        .unwrap();
        path
    };
    let stderr = stderr_of(&pstat_run(&home, &layer(1000), &out));
    assert!(stderr.contains("veracity_layer = 1000"), "{stderr}");
    assert!(
        !out.join("config.toml").exists(),
        "the folder is not claimed"
    );
    let stderr = stderr_of(&pstat_run(&home, &layer(999), &out));
    assert!(
        !stderr.contains("another config") && stderr.contains("veracity_layer = 999"),
        "{stderr}"
    );
}

#[test]
fn a_lock_that_is_a_link_is_refused_and_its_target_untouched() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let target = work.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    std::os::unix::fs::symlink(&target, out.join(".lock")).unwrap();
    let config = no_model_config(work.path(), "");
    let output = pstat_run(&work.path().join("home"), &config, &out);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
}

#[test]
fn durations_of_any_size_are_refused_naming_the_setting() {
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    for (extra, setting) in [
        (
            "[behavioral]\nbackend = \"http://127.0.0.1:9\"\n[behavioral.http]\ntimeout_s = 1e300",
            "behavioral.http",
        ),
        ("[clustering.http]\ntimeout_s = 1e300", "clustering.http"),
        (
            "[behavioral.http]\nmax_backoff_ms = 99999999999",
            "max_backoff_ms",
        ),
    ] {
        let config = no_model_config(work.path(), extra);
        let output = pstat_run(&home, &config, &work.path().join("out"));
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(1), "{extra}: {stderr}");
        assert!(
            stderr.contains(setting) && stderr.contains("at most"),
            "{extra}: {stderr}"
        );
        assert!(!work.path().join("out").exists(), "refused before any work");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .env("PSTAT_HOME", &home)
        .args([
            "prompt",
            "--model",
            "/nonexistent/model.gguf",
            "--domain",
            "city_locations",
        ])
        .args([
            "--backend",
            "http://127.0.0.1:9",
            "--timeout",
            "1e300",
            "--out",
        ])
        .arg(work.path().join("out"))
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("timeout_s = 1e300") && stderr.contains("at most"),
        "{stderr}"
    );
}

/// A server on a free port answering every request with `reply` (`None`: accepting and never
/// answering), for `seconds`.
fn serve(reply: Option<&'static str>, seconds: u64) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut open = Vec::new();
        let until = Instant::now() + Duration::from_secs(seconds);
        listener.set_nonblocking(true).unwrap();
        while Instant::now() < until {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    if let Some(reply) = reply {
                        use std::io::{Read, Write};
                        stream.set_nonblocking(false).unwrap();
                        let mut buffer = [0u8; 4096];
                        let _ = stream.read(&mut buffer);
                        let _ = stream.write_all(reply.as_bytes());
                    }
                    open.push(stream);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    url
}

#[test]
fn a_server_that_answers_retry_after_1e20_or_never_is_an_error_not_a_panic_or_a_silent_wait() {
    let Some(tiny) = Tiny::new() else { return };
    let prompt = |url: &str, out: &Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pstat"))
            .env("PSTAT_HOME", tiny.dir.path().join("home"))
            .args(["prompt", "--model"])
            .arg(&tiny.model)
            .args([
                "--domain",
                "city_locations",
                "--limit",
                "4",
                "--backend",
                url,
            ])
            .args(extra)
            .arg("--out")
            .arg(out)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let busy = serve(
        Some(
            "HTTP/1.1 503 Busy\r\nRetry-After: 1e20\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
        ),
        60,
    );
    let output = prompt(&busy, &tiny.dir.path().join("busy"), &["--retries", "1"]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HTTP 503 after 2 attempt(s)"), "{stderr}");
    // Accepts and never answers: a line every 30 s on stderr and in run.log, then an error.
    let silent = serve(None, 120);
    let out = tiny.dir.path().join("silent");
    let started = Instant::now();
    let output = prompt(&silent, &out, &["--retries", "0", "--timeout", "40"]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(90), "bounded");
    let waiting = format!("waiting for {silent}");
    assert!(
        stderr.contains(&waiting) && stderr.contains("gives up after at most 40s"),
        "{stderr}"
    );
    let log = std::fs::read_to_string(out.join("run.log")).unwrap();
    assert!(log.contains(&waiting), "{log}");
}

/// A safetensors file of f32 `X` [rows, cols] (and, for bags, `bag_offsets` and `y`).
fn safetensors_file(path: &Path, tensors: Vec<(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)>) {
    let views: Vec<(&str, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            (
                *name,
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

#[test]
fn sawmil_predict_refuses_a_damaged_probe_and_non_finite_activations() {
    let dir = tempfile::tempdir().unwrap();
    let pstat = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pstat"))
            .args(args)
            .output()
            .unwrap()
    };
    // 20 bags of 3 instances in 2 dimensions; positive bags lie along the first feature.
    let (bags, size, d) = (20usize, 3usize, 2usize);
    let x = f32_bytes((0..bags * size * d).map(|i| {
        let (bag, feature) = (i / (size * d), i % d);
        let sign = if bag % 2 == 0 { 1.0 } else { -1.0 };
        if feature == 0 {
            sign * 2.0 + (i % 7) as f32 * 0.1
        } else {
            (i % 5) as f32 * 0.1
        }
    }));
    let offsets = (0..=bags)
        .flat_map(|b| ((b * size) as i64).to_le_bytes())
        .collect();
    let y = (0..bags)
        .map(|b| if b % 2 == 0 { 1u8 } else { 0xff })
        .collect();
    let file = dir.path().join("bags.safetensors");
    safetensors_file(
        &file,
        vec![
            ("X", safetensors::Dtype::F32, vec![bags * size, d], x),
            (
                "bag_offsets",
                safetensors::Dtype::I64,
                vec![bags + 1],
                offsets,
            ),
            ("y", safetensors::Dtype::I8, vec![bags], y),
        ],
    );
    let probe = dir.path().join("probe.safetensors");
    let (file_arg, probe_arg) = (file.to_str().unwrap(), probe.to_str().unwrap());
    let output = pstat(&[
        "sawmil", "fit", "--bags", file_arg, "--C", "1", "--out", probe_arg,
    ]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let predict = [
        "sawmil", "predict", "--probe", probe_arg, "--bags", file_arg,
    ];
    assert!(pstat(&predict).status.success());
    // Each byte of the tensors (w, b and the scaler of 2 features: 7 f64) changed alone is
    // refused.
    let intact = std::fs::read(&probe).unwrap();
    for from_end in 1..=7 * 8 {
        flip_a_bit(&probe, from_end);
        let output = pstat(&predict);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(1), "byte -{from_end}: {stderr}");
        assert!(
            stderr.contains(probe_arg) && stderr.contains("hash"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty(), "no score printed");
        std::fs::write(&probe, &intact).unwrap();
    }
    // Activations holding NaN, under a valid content hash: refused, naming file and statement.
    let mut acts = pstat_data::activations::Activations::new(d);
    acts.push("s:0", &[1], &[0.5, 1.0]);
    acts.push("s:1", &[2], &[f32::NAN, 1.0]);
    let path = dir.path().join("acts.safetensors");
    acts.write(&path, pstat_data::activations::Precision::F32)
        .unwrap();
    let output = pstat(&[
        "sawmil",
        "predict",
        "--probe",
        probe_arg,
        "--activations",
        path.to_str().unwrap(),
    ]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(path.to_str().unwrap()) && stderr.contains("s:1"),
        "{stderr}"
    );
}

#[test]
fn cluster_honours_out_and_two_groups_on_a_line_are_two_clusters() {
    let dir = tempfile::tempdir().unwrap();
    // 40 points on a line in 3-D: 20 near 0, 20 near 10.
    let input = dir.path().join("line.safetensors");
    let values = (0..40).flat_map(|i| {
        let t = if i < 20 { 0.0 } else { 10.0 } + (i % 7) as f32 * 0.05;
        [t, 2.0 * t, -t]
    });
    safetensors_file(
        &input,
        vec![("X", safetensors::Dtype::F32, vec![40, 3], f32_bytes(values))],
    );
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["cluster", "--input"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(result["no_structure"].is_null(), "{result}");
    let labels: Vec<i64> = result["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_i64().unwrap())
        .collect();
    assert!(
        labels[..20].iter().all(|&l| l == labels[0])
            && labels[20..].iter().all(|&l| l == labels[20])
    );
    assert_ne!(labels[0], labels[20]);
    // With --model, --out names the run folder; nothing lands in ./results.
    let out = dir.path().join("study");
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .current_dir(dir.path())
        .env("PSTAT_HOME", dir.path().join("home"))
        .arg("cluster")
        .arg("--model")
        .arg(broken_model(dir.path()))
        .args(["--domain", "city_locations", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", stderr_of(&output));
    assert!(
        !dir.path().join("results").exists(),
        "{}",
        stderr_of(&output)
    );
    assert!(out.is_dir());
}

/// Makes `dir` read-only for this process: a read-only bind mount where the process may mount
/// (root bypasses file modes), else the modes. Returns how to undo it, or `None` when neither
/// keeps this process from writing there.
fn read_only(dir: &Path) -> Option<Box<dyn FnOnce()>> {
    let writable = || std::fs::write(dir.join(".probe"), b"").is_ok();
    let mounted = Command::new("mount")
        .args(["--bind", "-o", "ro"])
        .arg(dir)
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        let dir = dir.to_path_buf();
        return Some(Box::new(move || {
            assert!(Command::new("umount").arg(&dir).status().unwrap().success());
        }));
    }
    let status = Command::new("chmod")
        .arg("-R")
        .arg("a-w")
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    let dir = dir.to_path_buf();
    let undo = move || {
        Command::new("chmod")
            .arg("-R")
            .arg("u+w")
            .arg(&dir)
            .status()
            .unwrap();
    };
    if writable() {
        undo();
        return None;
    }
    Some(Box::new(undo))
}

#[test]
fn a_read_only_pstat_home_serves_a_run_when_everything_is_cached() {
    let Some(home) = Home::new() else { return };
    let text = CONFIG
        .replace("[behavioral]", "[behavioral]\nenabled = false")
        .replace(
            "[familiarity]\nenabled = false",
            "[familiarity]\nenabled = false\n[clustering]\nenabled = false",
        );
    std::fs::write(home.config(), text).unwrap();
    let work = tempfile::tempdir().unwrap();
    home.complete(&work.path().join("first"));
    let Some(undo) = read_only(home.dir.path()) else {
        let why =
            "cannot make a folder read-only for this process (neither a bind mount nor file modes)";
        assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{why}");
        eprintln!("skipped: {why}");
        return;
    };
    let output = home.run(&work.path().join("second")).output().unwrap();
    undo();
    let stderr = stderr_of(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(work.path().join("second/stability.csv").is_file());
}
