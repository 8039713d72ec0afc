//! The contextual stage on a tiny random-weight Llama (`tiny_llama`): what each unit records
//! is the baseline probe's reading of the statement run after its context from scratch — the
//! context's KV cache reused across statements changes no judgment — and with an empty
//! context it is the representational stage's own reading. The hidden states after each
//! context, exported and read back by another run (`contextual.activations`), give the same
//! tables; a file made after another context is refused.

mod tiny_llama;

use pstat_data::activations::{Activations, Precision};
use pstat_probe::TrainedProbe;
use pstat_study::{LoadedModel, RunConfig, Silent, Study, execute};
use serde_json::Value;
use std::path::Path;
use tiny_llama::{vocabulary, write_tiny_llama};

fn config(model: &Path) -> RunConfig {
    let text = format!(
        r#"
        seed = 11
        models = [{model:?}]
        domains = ["city_locations"]
        test_limit = 20
        train_limit = 80
        bootstrap_resamples = 20
        [representational]
        veracity_layer = 3
        probes = ["sawmil", "mass_mean"]
        layer_offsets = [-1, 0]
        mass_mean_layer_offsets = [0]
        sawmil_c = 1.0
        [behavioral]
        k = [4]
        baselines = ["empty"]
        formats = ["plain"]
        [familiarity]
        enabled = false
        [clustering]
        enabled = false
        "#,
        model = model.display().to_string()
    );
    let config: RunConfig = toml::from_str(&text).unwrap();
    config.validate().unwrap();
    config
}

/// `(id, score)` of every judgment under `key` of a unit record.
fn scores(path: &Path, key: &str) -> Vec<(String, f32)> {
    let record: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    record["record"]["judgments"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no judgments under {key}", path.display()))
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap().to_string(),
                j["score"].as_f64().unwrap() as f32,
            )
        })
        .collect()
}

fn close(a: f32, b: f32, tolerance: f32) -> bool {
    (a - b).abs() <= tolerance * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn contextual_units_read_the_statement_after_its_context_as_a_whole_sequence_would() {
    let Some(vocab) = vocabulary() else { return };
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", dir.path().join("home")) };
    let model_path = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &model_path);
    let config = config(&model_path);
    let out = dir.path().join("run");
    execute(config.clone(), &out, &mut Silent).unwrap();
    let cell = out.join("tiny-llama/city_locations");
    let stability = std::fs::read_to_string(out.join("stability.csv")).unwrap();
    for needle in ["contextual,sawmil", "contextual,mass_mean"] {
        assert!(stability.contains(needle), "no {needle} rows:\n{stability}");
    }

    // With no context the probe reads what the representational stage read (its activations
    // went through the f16 cache, hence the tolerance).
    let empty = scores(&cell.join("contextual/baseline_empty.json"), "sawmil@3");
    let representational = scores(
        &cell.join("representational/sawmil/layer_03/unit.json"),
        "baseline",
    );
    assert_eq!(empty.len(), representational.len());
    for ((id, a), (rid, b)) in empty.iter().zip(&representational) {
        assert_eq!(id, rid);
        assert!(
            close(*a, *b, 2e-3),
            "{id}: {a} without context, {b} as probed"
        );
    }

    // Each statement after the context, run from scratch as one sequence: BOS, the context's
    // lines, the statement; the bag leaves the context's rows out.
    let study = Study::preview(config, &out).unwrap();
    let model = LoadedModel::load(model_path.to_str().unwrap(), pstat_lm::Precision::F32).unwrap();
    let record: Value = serde_json::from_slice(
        &std::fs::read(cell.join("contextual/k4/synthetic_tf.json")).unwrap(),
    )
    .unwrap();
    let data = study.data(pstat_data::Domain::CityLocations);
    let text = |id: &str| {
        data.statements
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.text.clone())
            .unwrap()
    };
    let context: Vec<String> = record["record"]["inputs"]["context_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| text(id.as_str().unwrap()))
        .collect();
    assert_eq!(context.len(), 4);
    let block: String = context.iter().map(|l| format!("{l}\n")).collect();
    let context_tokens = model
        .encoder
        .tokenizer()
        .encode(&block, false, false)
        .unwrap();
    let unit = scores(&cell.join("contextual/k4/synthetic_tf.json"), "sawmil@3");
    let probe = TrainedProbe::load(
        &cell.join("representational/sawmil/layer_03/baseline.probe.safetensors"),
    )
    .unwrap();
    let mut flips = 0;
    for (id, stored) in &unit {
        let (tokens, span) = model.encoder.encode_with_statement_span(&text(id)).unwrap();
        let (lead, tail) = tokens.split_at(span.start);
        let whole: Vec<u32> = [lead, &context_tokens, tail].concat();
        let rows = model
            .lm
            .hidden_states(&[whole], &[3])
            .unwrap()
            .remove(0)
            .remove(0);
        let hidden = model.lm.hidden_size();
        let mut bag = rows[..lead.len() * hidden].to_vec();
        bag.extend_from_slice(&rows[(lead.len() + context_tokens.len()) * hidden..]);
        let from_scratch = probe.score(&bag);
        assert!(
            close(*stored, from_scratch, 1e-4),
            "{id}: {stored} after the cached context, {from_scratch} from scratch"
        );
        flips += usize::from((*stored > 0.0) != (from_scratch > 0.0));
    }
    assert_eq!(flips, 0, "no judgment depends on the cache");
    // The context moved the probe's reading: the stage measures something.
    let moved = unit
        .iter()
        .zip(&empty)
        .filter(|((_, a), (_, b))| !close(*a, *b, 1e-3))
        .count();
    assert!(moved > 0, "the context changed no score");

    imported_contexts_give_the_same_tables(&study, dir.path(), &out, &context_tokens);
}

/// The run's contexts exported (hidden states computed by the model) and read back by another
/// run give the same tables; a file whose context tokens are not the run's is refused, naming
/// the file and the field.
fn imported_contexts_give_the_same_tables(
    study: &Study,
    dir: &Path,
    out: &Path,
    context_tokens: &[u32],
) {
    let exported = dir.join("exported");
    pstat_study::export::activations(study.config.clone(), &exported, false, &mut Silent).unwrap();
    let unit = exported.join("tiny-llama/city_locations/contextual/k4/synthetic_tf");
    let context: Value =
        serde_json::from_slice(&std::fs::read(unit.join("context.json")).unwrap()).unwrap();
    let listed: Vec<u32> = context["context_token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(
        listed, context_tokens,
        "context.json lists the context's tokens"
    );
    for file in ["layer_02.safetensors", "layer_03.safetensors"] {
        assert!(unit.join(file).exists(), "no {file}");
    }

    let run = |contexts: &Path, name: &str| {
        let mut config = study.config.clone();
        config.contextual.activations = Some(contexts.display().to_string());
        let out = dir.join(name);
        execute(config, &out, &mut Silent).map(|()| out)
    };
    let imported = run(&exported, "imported").unwrap();
    for table in ["stability.csv", "comparisons.csv", "agreement.csv"] {
        assert_eq!(
            std::fs::read_to_string(out.join(table)).unwrap(),
            std::fs::read_to_string(imported.join(table)).unwrap(),
            "{table} differs"
        );
    }
    let record: Value = serde_json::from_slice(
        &std::fs::read(imported.join("tiny-llama/city_locations/contextual/k4/synthetic_tf.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        record["record"]["inputs"]["imported"]["layer_03.safetensors"].is_string(),
        "the unit names the files it read: {record}"
    );

    // Hidden states computed after another context: refused.
    let file = unit.join("layer_03.safetensors");
    let mut acts = Activations::read(&file).unwrap();
    acts.metadata
        .insert("context_tokens_sha256".into(), "0".repeat(64));
    acts.write(&file, Precision::F32).unwrap();
    let err = format!("{:#}", run(&exported, "tampered").unwrap_err());
    assert!(
        err.contains(&file.display().to_string())
            && err.contains("metadata `context_tokens_sha256`"),
        "{err}"
    );
}
