//! `execute` end to end on a tiny random-weight Llama (`tiny_llama`): every stage runs on a
//! small config in seconds; a second run is stopped in every stage and resumed each time, and
//! its run folder must equal the uninterrupted run's, file for file and byte for byte.

mod tiny_llama;

use pstat_study::{Progress, RunConfig, execute};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use tiny_llama::{vocabulary, write_tiny_llama};

/// Every stage, a user condition, a few statements of one domain.
fn tiny_config(model: &Path) -> RunConfig {
    let text = format!(
        r#"
        seed = 5
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 24
        train_limit = 80
        bootstrap_resamples = 20
        [representational]
        probes = ["sawmil", "mass_mean"]
        layer_offsets = [-1, 0]
        mass_mean_layer_offsets = [0, 1]
        sawmil_c = 1.0
        selection_statements = 24
        [behavioral]
        k = [2, 3]
        baselines = ["empty", "true"]
        formats = ["plain"]
        resamples = 1
        shuffle_control = true
        [familiarity]
        statements_per_kind = 4
        distance_pairs = 30
        [[condition]]
        name = "synthetic_all"
        title = "Synthetic (all kinds)"
        probe_true = ["true", "synthetic_tf", "synthetic_fi"]
        context = {{ from = "kinds", kinds = ["synthetic_tf", "synthetic_fi"] }}
        "#,
        model = model.display().to_string()
    );
    let config: RunConfig = toml::from_str(&text).unwrap();
    config.validate().unwrap();
    config
}

/// The payload of the panic that stops a run, told apart from a real failure.
struct Stop;

/// Stops the run (as a kill would: nothing of the library runs afterwards) when the n-th
/// unit of new work of a stage finishes, e.g. `("behavioral", 2)`. A unit is the progress
/// of one piece of work (`start` .. `finish`); its results may not be written yet.
struct StopAt {
    at: Option<(&'static str, usize)>,
    /// The stage heading last announced, and new units finished per stage name.
    stage: String,
    finished: BTreeMap<String, usize>,
}

impl pstat_prompt::Progress for StopAt {
    fn start(&mut self, _: &str, _: usize) {}
    fn advance(&mut self, _: usize) {}
    fn finish(&mut self, reused: bool) {
        if reused {
            return;
        }
        // Headings read `<model> <domain>: <stage>`.
        let stage = self
            .stage
            .rsplit(": ")
            .next()
            .unwrap_or_default()
            .to_string();
        let n = self.finished.entry(stage.clone()).or_default();
        *n += 1;
        if self.at == Some((stage.as_str(), *n)) {
            std::panic::panic_any(Stop);
        }
    }
}

impl Progress for StopAt {
    fn stage(&mut self, name: &str) {
        self.stage = name.to_string();
    }
    fn note(&mut self, _: &str) {}
}

/// Runs `config` into `out`, stopping it `at` a unit: `true` when it ran to the end.
fn run(config: &RunConfig, out: &Path, at: Option<(&'static str, usize)>) -> bool {
    let mut progress = StopAt {
        at,
        stage: String::new(),
        finished: BTreeMap::new(),
    };
    match catch_unwind(AssertUnwindSafe(|| {
        execute(config.clone(), out, &mut progress)
    })) {
        Ok(result) => {
            result.unwrap();
            true
        }
        Err(payload) if payload.is::<Stop>() => false,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Every file under `dir` (but the lock, which only names its last holder), by relative path.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name() != Some(".lock".as_ref()) {
                let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The activation cache lives under `$PSTAT_HOME`; each run gets its own, so the resumed
/// run cannot borrow what the uninterrupted one computed.
fn use_home(home: &Path) {
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", home) };
}

#[test]
fn an_interrupted_run_resumes_to_the_same_bytes() {
    let Some(vocab) = vocabulary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &model);
    let config = tiny_config(&model);
    // A stop is not a failure: its panic message would only clutter the output.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<Stop>() {
            report(info);
        }
    }));

    use_home(&dir.path().join("home-whole"));
    // Both folders are called `run`: the report's title names its folder.
    let whole = dir.path().join("whole").join("run");
    assert!(run(&config, &whole, None));
    let expected = files(&whole);
    for table in [
        "stability.csv",
        "comparisons.csv",
        "answers.csv",
        "resamples.csv",
        "familiarity.csv",
        "distances.csv",
        "layers.json",
        "decisions.json",
        "agreement.csv",
        "tiny-llama/city_locations/contextual/baseline_empty.json",
        "clusters/tiny-llama/city_locations/result.json",
        "report.html",
    ] {
        assert!(expected.contains_key(Path::new(table)), "no {table}");
    }
    let stability = String::from_utf8(expected[Path::new("stability.csv")].clone()).unwrap();
    for needle in [
        "representational,sawmil",
        "representational,mass_mean",
        "behavioral,prompt",
        "contextual,sawmil",
        "contextual,mass_mean",
        "synthetic_all",
    ] {
        assert!(stability.contains(needle), "no {needle} rows:\n{stability}");
    }
    let html = String::from_utf8(expected[Path::new("report.html")].clone()).unwrap();
    assert!(
        html.contains("Synthetic (all kinds)"),
        "the user condition's title"
    );

    // Stopped in every stage, at the first unit (before its results are written) or later
    // (after earlier units were), then resumed; the last run goes to the end.
    use_home(&dir.path().join("home-resumed"));
    let resumed = dir.path().join("resumed").join("run");
    for at in [
        ("representational", 1),
        ("representational", 2),
        ("representational", 4),
        ("behavioral", 1),
        ("behavioral", 9),
        ("contextual", 1),
        ("contextual", 5),
        ("familiarity", 1),
    ] {
        assert!(!run(&config, &resumed, Some(at)), "never reached {at:?}");
    }
    assert!(run(&config, &resumed, None));
    let got = files(&resumed);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for (path, bytes) in &expected {
        if got[path] != *bytes {
            let (a, b) = (
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&got[path]),
            );
            let line = a.lines().zip(b.lines()).position(|(x, y)| x != y);
            let show = |t: &str| {
                line.and_then(|i| t.lines().nth(i))
                    .unwrap_or("")
                    .to_string()
            };
            panic!(
                "{} differs at line {:?}:\n  uninterrupted: {}\n  resumed:       {}",
                path.display(),
                line.map(|i| i + 1),
                show(&a),
                show(&b)
            );
        }
    }
}
