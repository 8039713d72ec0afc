//! vLLM's hidden-state files imported (`pstat activations import --from vllm`) on the tiny
//! random Llama: per-request files in the layout of vLLM's `ExampleHiddenStatesConnector`
//! (`token_ids` I64 [seq], `hidden_states` [seq, n_layers, hidden], named by request id),
//! built here from pstat's own extraction (vllm_engine.rs imports files vLLM wrote), grouped into the
//! cell's per-layer files, give the in-process run's representational tables byte for byte; a
//! file whose token ids are not pstat's is refused by name.

mod imported;
mod tiny_llama;

use imported::{config, use_home};
use pstat_data::activations::Activations;
use pstat_study::{Silent, execute};
use safetensors::{Dtype, tensor::TensorView};
use std::path::Path;
use tiny_llama::{vocabulary, write_tiny_llama};

/// One request's file as the connector writes it: each token's row of every layer.
fn vllm_file(path: &Path, ids: &[u32], layers: &[&[f32]], hidden: usize) {
    let id_bytes: Vec<u8> = ids.iter().flat_map(|&v| (v as i64).to_le_bytes()).collect();
    let hs: Vec<u8> = (0..ids.len())
        .flat_map(|t| layers.iter().map(move |l| &l[t * hidden..(t + 1) * hidden]))
        .flat_map(|row| row.iter().flat_map(|v| v.to_le_bytes()))
        .collect();
    let tensors = [
        (
            "token_ids",
            TensorView::new(Dtype::I64, vec![ids.len()], &id_bytes).unwrap(),
        ),
        (
            "hidden_states",
            TensorView::new(Dtype::F32, vec![ids.len(), layers.len(), hidden], &hs).unwrap(),
        ),
    ];
    std::fs::write(path, safetensors::serialize(tensors, None).unwrap()).unwrap();
}

#[test]
fn vllm_hidden_state_files_import_to_the_in_process_tables_and_foreign_tokens_are_refused() {
    let Some(vocab) = vocabulary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &model);

    use_home(&dir.path().join("home-a"));
    let plain = dir.path().join("plain");
    execute(config(&model, None), &plain, &mut Silent).unwrap();
    let ours = dir.path().join("ours");
    pstat_study::export::activations(config(&model, None), &ours, false, &mut Silent).unwrap();
    let layers = [2usize, 3, 4];
    let own: Vec<Activations> = layers
        .iter()
        .map(|l| {
            Activations::read(
                &ours
                    .join("tiny-llama/city_locations")
                    .join(format!("layer_{l:02}.safetensors")),
            )
            .unwrap()
        })
        .collect();

    // The statements to feed vLLM, then one file per request, in no particular order.
    let theirs = dir.path().join("theirs");
    pstat_study::export::activations(config(&model, None), &theirs, true, &mut Silent).unwrap();
    let cell = theirs.join("tiny-llama/city_locations");
    let files = dir.path().join("vllm-out");
    std::fs::create_dir_all(&files).unwrap();
    let hidden = own[0].hidden;
    for i in 0..own[0].len() {
        let ids = &own[0].token_ids[own[0].offsets[i]..own[0].offsets[i + 1]];
        let rows: Vec<&[f32]> = own.iter().map(|a| a.statement(i)).collect();
        let name = format!("cmpl-{:08x}-0.safetensors", (i * 7919) % 65521);
        vllm_file(&files.join(name), ids, &rows, hidden);
    }
    let written = pstat_study::vllm::import(&files, &cell, &layers).unwrap();
    assert_eq!(written.len(), 3);

    use_home(&dir.path().join("home-b"));
    let imported = dir.path().join("imported");
    execute(config(&model, Some(&theirs)), &imported, &mut Silent).unwrap();
    for table in ["stability.csv", "comparisons.csv"] {
        assert_eq!(
            std::fs::read(plain.join(table)).unwrap(),
            std::fs::read(imported.join(table)).unwrap(),
            "{table} differs"
        );
    }
    assert!(!dir.path().join("home-b/activations").exists());

    // A request fed other token ids (here one changed) is refused, naming its file.
    let first = &own[0];
    let mut ids = first.token_ids[first.offsets[0]..first.offsets[1]].to_vec();
    *ids.last_mut().unwrap() += 1;
    let rows: Vec<&[f32]> = own.iter().map(|a| a.statement(0)).collect();
    let foreign = files.join("cmpl-foreign-0.safetensors");
    vllm_file(&foreign, &ids, &rows, hidden);
    let err = format!(
        "{:#}",
        pstat_study::vllm::import(&files, &cell, &layers).unwrap_err()
    );
    assert!(
        err.contains(&foreign.display().to_string()) && err.contains("not those pstat feeds"),
        "{err}"
    );
    std::fs::remove_file(&foreign).unwrap();

    // A second file for a statement (a retried request) is refused, naming both files: its
    // numbers could differ, and which counts is not pstat's guess.
    let ids = &first.token_ids[first.offsets[0]..first.offsets[1]];
    let again = files.join("cmpl-retry-0.safetensors");
    vllm_file(&again, ids, &rows, hidden);
    let err = format!(
        "{:#}",
        pstat_study::vllm::import(&files, &cell, &layers).unwrap_err()
    );
    assert!(
        err.contains("cmpl-retry-0.safetensors") && err.contains("already has its file"),
        "{err}"
    );
    std::fs::remove_file(&again).unwrap();

    // Layers named twice, or beyond the model's blocks, would write files under the wrong name.
    for (bad, expect) in [
        ([2usize, 2, 3], "named twice"),
        ([2, 3, 99], "does not exist"),
    ] {
        let err = format!(
            "{:#}",
            pstat_study::vllm::import(&files, &cell, &bad).unwrap_err()
        );
        assert!(err.contains("--layers") && err.contains(expect), "{err}");
    }
}
