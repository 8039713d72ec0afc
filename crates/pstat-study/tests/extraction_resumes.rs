//! An activation extraction interrupted after some blocks resumes from its finished blocks
//! (a damaged one is moved aside and recomputed) and writes the very bytes of an extraction
//! that ran in one piece, which holds the numbers of one pass of `pstat_lm::extract`: on the
//! tiny Llama (plain input) and on the tiny Qwen2 of `$PSTAT_TINY_MODELS` (chat input, whose
//! shared prefix every block reuses).

mod tiny_llama;

use pstat_data::activations::{f16_bits_to_f32, f32_to_f16_bits};
use pstat_data::{DataRoot, Domain, load_domain};
use pstat_study::activations::cached_activations_in_blocks;
use pstat_study::{LoadedModel, Progress};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use tiny_llama::{vocabulary, write_tiny_llama};

/// The payload of the panic that interrupts an extraction, told apart from a real failure.
struct Stop;

/// Records the progress it is given; panics (as a kill would stop the process) at the
/// `stop_at`-th batch.
#[derive(Default)]
struct Recorder {
    stop_at: Option<usize>,
    advances: Vec<usize>,
    notes: Vec<String>,
}

impl pstat_prompt::Progress for Recorder {
    fn start(&mut self, _: &str, _: usize) {}
    fn advance(&mut self, n: usize) {
        self.advances.push(n);
        if self.stop_at == Some(self.advances.len()) {
            std::panic::panic_any(Stop);
        }
    }
    fn finish(&mut self, _: bool) {}
}

impl Progress for Recorder {
    fn stage(&mut self, _: &str) {}
    fn note(&mut self, message: &str) {
        self.notes.push(message.to_string());
    }
}

/// Every file of the activation cache under `home` but the lock, by name.
fn cache_files(home: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![home.join("activations")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name != ".lock" {
                out.insert(name, path);
            }
        }
    }
    out
}

/// A safetensors file's header (parsed: its metadata is a map, written in hash-map order)
/// and its data section (the tensors' bytes, which must match exactly).
fn split(bytes: &[u8]) -> (serde_json::Value, &[u8]) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, &bytes[8 + n..])
}

fn use_home(home: &Path) {
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("PSTAT_HOME", home) };
}

#[test]
fn an_interrupted_extraction_resumes_from_its_finished_blocks_to_the_same_bytes() {
    let Some(vocab) = vocabulary() else { return };
    // A stop is not a failure: its panic message would only clutter the output.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<Stop>() {
            report(info);
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &path);
    // Plain input: every statement starts with BOS alone, no prefix is shared.
    resumes_to_the_same_bytes(&path, &dir.path().join("llama"), false);
    // Qwen2's chat template: the statements share a long prefix, run once for all blocks.
    let Some(models) = std::env::var_os("PSTAT_TINY_MODELS")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .or_else(|| {
            pstat_testkit::missing(
                "PSTAT_TINY_MODELS must name the folder `tools/fixtures/tiny_models.py build` wrote (scripts/test builds it)",
            )
        })
    else {
        return;
    };
    let qwen = models.join("tiny-qwen2-f32.gguf");
    resumes_to_the_same_bytes(&qwen, &dir.path().join("qwen2"), true);
}

/// Extracts 1000 statements of `model` in one piece, then in blocks of one batch, stopped in
/// the third block, one partial file damaged, and resumed: the same files and activations,
/// only the unfinished blocks computed. Caches go under `dir`.
fn resumes_to_the_same_bytes(path: &Path, dir: &Path, shares_prefix: bool) {
    let model = LoadedModel::load(path.to_str().unwrap(), pstat_lm::Precision::F32).unwrap();
    let data = load_domain(&DataRoot::open(None).unwrap(), Domain::CityLocations).unwrap();
    let ids: Vec<String> = data
        .statements
        .iter()
        .take(1000)
        .map(|s| s.id.clone())
        .collect();
    let layers = [1, 2];
    let tokens = model.encode_statements(&data, &ids).unwrap();
    assert_eq!(
        pstat_lm::extract::shared_prefix_len(&tokens) >= 4,
        shares_prefix,
        "{}",
        path.display()
    );
    // Blocks of one statement are single batches: enough of them to stop after two.
    let blocks = pstat_lm::extract::blocks(&tokens, 1);
    assert!(blocks.len() >= 4, "{blocks:?}");

    // In one piece (one block), as the cache was written before blocks existed.
    let home_whole = dir.join("home-whole");
    use_home(&home_whole);
    let mut progress = Recorder::default();
    let whole =
        cached_activations_in_blocks(&model, &data, &ids, &layers, usize::MAX, &mut progress)
            .unwrap();
    assert_eq!(progress.advances.iter().sum::<usize>(), ids.len());
    let expected = cache_files(&home_whole);
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        ["layer_01.safetensors", "layer_02.safetensors"],
        "only the layer files stay"
    );
    // The cache holds one pass of the extraction, rounded to f16.
    let one_pass = pstat_lm::extract::extract(&model.lm, &ids, &tokens, &layers, |_| {}).unwrap();
    for (acts, layer) in one_pass.iter().zip(layers) {
        let cached = &whole[&layer];
        assert_eq!(cached.statement_ids, acts.statement_ids);
        assert_eq!(cached.offsets, acts.offsets);
        assert_eq!(cached.token_ids, acts.token_ids);
        let rounded: Vec<f32> = acts
            .values
            .iter()
            .map(|&x| f16_bits_to_f32(f32_to_f16_bits(x)))
            .collect();
        assert!(rounded == cached.values, "layer {layer}: other numbers");
    }

    // Interrupted in its third block: the first two are stored, one file per layer.
    let home = dir.join("home-resumed");
    use_home(&home);
    let mut progress = Recorder {
        stop_at: Some(3),
        ..Recorder::default()
    };
    let stopped = catch_unwind(AssertUnwindSafe(|| {
        cached_activations_in_blocks(&model, &data, &ids, &layers, 1, &mut progress)
    }));
    assert!(stopped.is_err_and(|p| p.is::<Stop>()), "not interrupted");
    let part = |b: usize, layer: usize| {
        format!(
            "partial_{:06}-{:06}_layer_{layer:02}.safetensors",
            blocks[b].start, blocks[b].end
        )
    };
    let partial = cache_files(&home);
    assert_eq!(
        partial.keys().cloned().collect::<Vec<_>>(),
        [part(0, 1), part(0, 2), part(1, 1), part(1, 2)]
    );
    // The second block's file of layer 2 is damaged on disk.
    let damaged = &partial[&part(1, 2)];
    let mut bytes = std::fs::read(damaged).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(damaged, bytes).unwrap();

    // Resumed: the first block is read back, the damaged second recomputed, so is the rest.
    let mut progress = Recorder::default();
    let resumed =
        cached_activations_in_blocks(&model, &data, &ids, &layers, 1, &mut progress).unwrap();
    let done = blocks[0].len();
    assert_eq!(
        progress.advances[0], done,
        "progress starts at the done statements"
    );
    assert_eq!(
        progress.advances[1..].iter().sum::<usize>(),
        ids.len() - done,
        "only the unfinished blocks run: {:?}",
        progress.advances
    );
    assert!(
        progress
            .notes
            .iter()
            .any(|n| n.contains(&format!("resuming, {done} of {} statements", ids.len()))),
        "{:?}",
        progress.notes
    );
    let aside = format!("{}.corrupt", part(1, 2));
    assert!(
        progress
            .notes
            .iter()
            .any(|n| n.contains("corrupt activation file") && n.contains(&aside)),
        "{:?}",
        progress.notes
    );
    assert!(
        resumed == whole,
        "the resumed extraction returns other activations"
    );
    let got = cache_files(&home);
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        [
            "layer_01.safetensors".to_string(),
            "layer_02.safetensors".to_string(),
            aside
        ],
        "the partial files are removed, the damaged one kept aside"
    );
    for (name, path) in &expected {
        let (want, have) = (
            std::fs::read(path).unwrap(),
            std::fs::read(&got[name]).unwrap(),
        );
        let ((header, data), (got_header, got_data)) = (split(&want), split(&have));
        assert!(
            got_header == header && got_data == data,
            "{name} differs from the extraction in one piece"
        );
    }
    // Read back from the cache now: nothing is extracted.
    let mut progress = Recorder::default();
    let again =
        cached_activations_in_blocks(&model, &data, &ids, &layers, 1, &mut progress).unwrap();
    assert!(again == whole && progress.advances.is_empty());
}
