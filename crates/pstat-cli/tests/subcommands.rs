//! Every subcommand of the `pstat` binary: its happy path on small inputs (a tiny random-weight
//! Llama where a model is needed) and one bad input, which must end with exit status 1 or 2 and
//! a single `error:` line on stderr, never a panic.

#[path = "../../pstat-study/tests/tiny_llama/mod.rs"]
mod tiny_llama;

use safetensors::tensor::{Dtype, TensorView};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs `pstat args` with `stdin`, models and caches under `home`.
fn pstat(home: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(args)
        .env("PSTAT_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // pstat may exit before reading its input (bad input): a broken pipe here is expected.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn succeeds(out: &Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Exit status `code` and one line on stderr, `error: …` containing `needle`.
#[track_caller]
fn fails(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn write_safetensors(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            (*name, TensorView::new(*dtype, shape.clone(), data).unwrap())
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

#[test]
fn data_commands() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let stats: serde_json::Value =
        serde_json::from_str(&succeeds(&pstat(home, &["data", "stats", "--json"], ""))).unwrap();
    assert!(stats["city_locations"]["true"]["total"].as_u64().unwrap() > 0);
    let splits = dir.path().join("splits");
    succeeds(&pstat(
        home,
        &[
            "data",
            "split",
            "--domains",
            "city_locations",
            "--out",
            arg(&splits),
        ],
        "",
    ));
    assert!(splits.join("city_locations.json").is_file());
    let bigrams = dir.path().join("bigrams");
    succeeds(&pstat(
        home,
        &["data", "bigrams", "--out", arg(&bigrams)],
        "",
    ));
    assert!(bigrams.join("bigram_distances.csv").is_file());

    let missing = dir.path().join("no-such-data");
    fails(
        &pstat(home, &["data", "stats", "--data", arg(&missing)], ""),
        1,
        "no-such-data",
    );
}

#[test]
fn sawmil_fits_and_predicts() {
    let dir = tempfile::tempdir().unwrap();
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
    let offsets: Vec<u8> = (0..=bags)
        .flat_map(|b| ((b * size) as i64).to_le_bytes())
        .collect();
    let y: Vec<u8> = (0..bags)
        .map(|b| if b % 2 == 0 { 1u8 } else { 0xff })
        .collect();
    let file = dir.path().join("bags.safetensors");
    write_safetensors(
        &file,
        &[
            ("X", Dtype::F32, vec![bags * size, d], x),
            ("bag_offsets", Dtype::I64, vec![bags + 1], offsets),
            ("y", Dtype::I8, vec![bags], y),
        ],
    );
    let probe = dir.path().join("probe.safetensors");
    let fit = [
        "sawmil",
        "fit",
        "--bags",
        arg(&file),
        "--C",
        "1",
        "--out",
        arg(&probe),
    ];
    succeeds(&pstat(dir.path(), &fit, ""));
    let predict = [
        "sawmil",
        "predict",
        "--probe",
        arg(&probe),
        "--bags",
        arg(&file),
    ];
    let lines = succeeds(&pstat(dir.path(), &predict, ""));
    assert_eq!(lines.lines().count(), bags);

    let missing = dir.path().join("missing.safetensors");
    fails(
        &pstat(
            dir.path(),
            &[
                "sawmil",
                "predict",
                "--probe",
                arg(&probe),
                "--bags",
                arg(&missing),
            ],
            "",
        ),
        1,
        "missing.safetensors",
    );
}

#[test]
fn cluster_a_point_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let (n, d) = (40usize, 3usize);
    let x = f32_bytes((0..n * d).map(|i| {
        let group = (i / d) % 2;
        group as f32 * 10.0 + ((i * 7) % 11) as f32 * 0.05
    }));
    let file = dir.path().join("points.safetensors");
    write_safetensors(&file, &[("X", Dtype::F32, vec![n, d], x)]);
    let out = succeeds(&pstat(dir.path(), &["cluster", "--input", arg(&file)], ""));
    let result: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["n_points"], n);
    assert_eq!(result["labels"].as_array().unwrap().len(), n);

    fails(
        &pstat(
            dir.path(),
            &["cluster", "--input", arg(&file), "--tensor", "Y"],
            "",
        ),
        1,
        "Y",
    );
}

/// A folder with the tiny model and a run config of every stage on a few statements.
struct Setup {
    dir: tempfile::TempDir,
    model: PathBuf,
    config: PathBuf,
}

impl Setup {
    fn new() -> Option<Setup> {
        let vocab = tiny_llama::vocabulary()?;
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny-llama.gguf");
        tiny_llama::write_tiny_llama(&vocab, &model);
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
                model = arg(&model)
            ),
        )
        .unwrap();
        Some(Setup { dir, model, config })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn pstat(&self, args: &[&str], stdin: &str) -> Output {
        pstat(&self.path("home"), args, stdin)
    }
}

#[test]
fn model_commands() {
    let Some(s) = Setup::new() else { return };
    let model = arg(&s.model);

    let ids = succeeds(&s.pstat(
        &["tokenize", "--model", model],
        "The city of Paris is in France.\n",
    ));
    assert_eq!(ids.lines().count(), 1);
    fails(
        &s.pstat(&["tokenize", "--model", arg(&s.path("none.gguf"))], "x\n"),
        2,
        "none.gguf",
    );
    // A damaged header is one line even where candle, which reads it, would append a backtrace.
    let bytes = std::fs::read(&s.model).unwrap();
    let damaged = s.path("damaged.gguf");
    std::fs::write(&damaged, &bytes[..bytes.len().min(4096)]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["tokenize", "--model", arg(&damaged)])
        .env("PSTAT_HOME", s.path("home"))
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    fails(&out, 2, "damaged.gguf");

    let prompts = s.path("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"Paris is in\", \"options\": [\" France\", \" Spain\"]}\n",
    )
    .unwrap();
    let scored = succeeds(&s.pstat(&["score", "--model", model, "--input", arg(&prompts)], ""));
    assert!(scored.contains("logprobs"), "{scored}");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"x\", \"options\": [\" a\", \" b\"]}\n{oops\n",
    )
    .unwrap();
    fails(
        &s.pstat(&["score", "--model", model, "--input", arg(&prompts)], ""),
        1,
        "prompts.jsonl:2: not a prompt object",
    );
    std::fs::write(
        &prompts,
        "{\"prompt\": \"x\", \"options\": [\" a\", \"\"]}\n",
    )
    .unwrap();
    fails(
        &s.pstat(&["score", "--model", model, "--input", arg(&prompts)], ""),
        1,
        "prompts.jsonl:1: option 1 is empty",
    );

    let text = s.path("lines.txt");
    std::fs::write(&text, "Paris is in France.\nRome is in Italy.\n").unwrap();
    let hidden = s.path("hidden.safetensors");
    let args = |layers: &'static str| {
        [
            "hidden",
            "--model",
            model,
            "--layers",
            layers,
            "--input",
            arg(&text),
            "--out",
            arg(&hidden),
        ]
    };
    succeeds(&s.pstat(&args("2"), ""));
    assert!(hidden.is_file());
    fails(
        &s.pstat(&args("9"), ""),
        1,
        "--layers: layer 9 does not exist",
    );
    fails(
        &s.pstat(&args("2,2"), ""),
        1,
        "--layers: layer 2 is named twice",
    );
    // Input that does not fit the model is blamed on its line, not on an option.
    let long = "Paris is in France. ".repeat(2000);
    std::fs::write(&text, format!("Paris is in France.\n{long}\n")).unwrap();
    fails(&s.pstat(&args("2"), ""), 1, "lines.txt:2: the line is");
    std::fs::write(
        &prompts,
        format!("{{\"prompt\": \"{long}\", \"options\": [\" a\", \" b\"]}}\n"),
    )
    .unwrap();
    fails(
        &s.pstat(&["score", "--model", model, "--input", arg(&prompts)], ""),
        1,
        "prompts.jsonl:1: the prompt is",
    );

    // A Hugging Face folder without its tokenizer is named once, as bad input.
    let folder = s.path("hf");
    std::fs::create_dir(&folder).unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../pstat-lm/tests/fixtures/hf/qwen2/hf");
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "tokenizer.json" {
            std::fs::copy(entry.path(), folder.join(entry.file_name())).unwrap();
        }
    }
    let out = s.pstat(
        &[
            "hidden",
            "--model",
            arg(&folder),
            "--layers",
            "1",
            "--input",
            arg(&text),
            "--out",
            arg(&hidden),
        ],
        "",
    );
    fails(&out, 2, "tokenizer.json: missing");
    assert_eq!(
        stderr(&out).matches("missing").count(),
        1,
        "{}",
        stderr(&out)
    );

    let extract = |layers: &'static str| {
        s.pstat(
            &[
                "extract",
                "--model",
                model,
                "--domain",
                "city_locations",
                "--layers",
                layers,
            ],
            "",
        )
    };
    assert!(succeeds(&extract("3")).contains("layer 3"));
    fails(&extract("7"), 1, "7");
}

#[test]
fn stage_commands_and_the_report() {
    let Some(s) = Setup::new() else { return };
    let (model, config) = (arg(&s.model), arg(&s.config));
    let stage = |command: &str, out: &Path, extra: &[&str]| {
        let mut args = vec![
            command,
            "--model",
            model,
            "--domain",
            "city_locations",
            "--config",
            config,
            "--out",
            arg(out),
        ];
        args.extend(extra);
        s.pstat(&args, "")
    };
    // Without --layers the config's offsets hold (they are what the later stages ask for).
    let probed = s.path("probed");
    succeeds(&stage("probe", &probed, &[]));
    assert!(probed.join("stability.csv").is_file());
    fails(&stage("probe", &probed, &["--layers", "x"]), 1, "--layers");

    // The stage commands build one study in one folder.
    let familiar = probed.clone();
    succeeds(&stage("familiarity", &familiar, &[]));
    assert!(familiar.join("familiarity.csv").is_file());
    let bad_config = s.path("bad.toml");
    std::fs::write(&bad_config, "sed = 1\n").unwrap();
    fails(
        &s.pstat(
            &[
                "familiarity",
                "--model",
                model,
                "--domain",
                "city_locations",
                "--config",
                arg(&bad_config),
                "--out",
                arg(&familiar),
            ],
            "",
        ),
        1,
        "bad.toml, line 1: invalid run config: unknown field `sed`",
    );

    let prompted = probed.clone();
    let prompt = |k: &'static str| stage("prompt", &prompted, &["--k", k, "--format", "plain"]);
    succeeds(&prompt("2"));
    let stability = std::fs::read_to_string(prompted.join("stability.csv")).unwrap();
    assert!(
        stability.contains(",representational,") && stability.contains(",behavioral,"),
        "{stability}"
    );
    assert!(prompted.join("familiarity.csv").is_file());
    fails(&prompt("0"), 1, "--k");
    // Chat asked of a model without a chat template: prompted plain, and said so.
    let chat = s.path("chat");
    let out = stage("prompt", &chat, &["--k", "2", "--format", "chat"]);
    succeeds(&out);
    assert!(
        stderr(&out).contains("has no chat template: behavioral.formats lists chat"),
        "{}",
        stderr(&out)
    );
    // The clustering joins the same study when given the same config.
    succeeds(&stage("cluster", &prompted, &[]));
    assert!(prompted.join("clusters").is_dir());
    // Another study is refused, naming the setting.
    fails(
        &prompt("3"),
        1,
        "`behavioral.k` = [2], this command asks for [3]",
    );

    let run = s.path("run");
    succeeds(&s.pstat(&["run", "--config", config, "--out", arg(&run)], ""));
    for file in [
        "stability.csv",
        "familiarity.csv",
        "layers.json",
        "report.html",
    ] {
        assert!(run.join(file).is_file(), "no {file}");
    }
    std::fs::write(&bad_config, "test_limit = 0\n").unwrap();
    fails(
        &s.pstat(
            &[
                "run",
                "--config",
                arg(&bad_config),
                "--out",
                arg(&s.path("other")),
            ],
            "",
        ),
        1,
        "test_limit",
    );

    std::fs::remove_file(run.join("report.html")).unwrap();
    succeeds(&s.pstat(&["report", "--run", arg(&run)], ""));
    assert!(run.join("report.html").is_file());
    // A table edited after the run no longer matches the sha256 its manifest vouches for: the
    // report refuses it instead of drawing it.
    let table = run.join("stability.csv");
    let text = std::fs::read_to_string(&table).unwrap();
    let at = text.find("0.").expect("a rate in the table");
    let digit = if &text[at + 2..at + 3] == "7" {
        "3"
    } else {
        "7"
    };
    std::fs::write(
        &table,
        format!("{}{digit}{}", &text[..at + 2], &text[at + 3..]),
    )
    .unwrap();
    fails(
        &s.pstat(&["report", "--run", arg(&run)], ""),
        1,
        "stability.csv: does not match the sha256",
    );
    let empty = s.path("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(
        &s.pstat(&["report", "--run", arg(&empty)], ""),
        1,
        "stability.csv",
    );
}
