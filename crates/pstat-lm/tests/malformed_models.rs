//! Property tests: a GGUF file and a Hugging Face folder's safetensors, damaged (cut short,
//! bytes overwritten, junk spliced in, mostly within the header where the parsers work), load
//! as a model or fail with an error: never a panic, never a hang. The valid files are the tiny
//! random-weight models of tests/fixtures/hf.

use proptest::prelude::*;
use pstat_lm::LanguageModel;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(rel)
}

/// Runs `f` on another thread and fails if it panics or takes longer than a few seconds.
fn answers<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no answer within 20 s (a hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the loader panicked"),
    }
}

/// A damaged copy of `valid`: cut at some byte, a few bytes overwritten, or junk spliced in,
/// at positions within the first `focus` bytes (the header) three times in four.
fn mutations(valid: Vec<u8>, focus: usize) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len();
    let focus = focus.min(len);
    let position = prop_oneof![3 => 0..focus, 1 => 0..len];
    let (a, b, c) = (valid.clone(), valid.clone(), valid);
    prop_oneof![
        position.clone().prop_map(move |cut| a[..cut].to_vec()),
        prop::collection::vec((position.clone(), any::<u8>()), 1..6).prop_map(move |flips| {
            let mut bytes = b.clone();
            for (i, v) in flips {
                bytes[i] = v;
            }
            bytes
        }),
        (position, prop::collection::vec(any::<u8>(), 1..32)).prop_map(move |(at, junk)| {
            let mut bytes = c.clone();
            bytes.splice(at..at, junk);
            bytes
        }),
    ]
}

fn gguf() -> Vec<u8> {
    std::fs::read(fixture("qwen2/model.gguf")).unwrap()
}

fn safetensors() -> Vec<u8> {
    std::fs::read(fixture("qwen2/hf/model.safetensors")).unwrap()
}

/// Header length of a safetensors file plus its 8-byte length prefix.
fn safetensors_header(bytes: &[u8]) -> usize {
    8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

/// Loads `bytes` as `name` inside a copy of the folder `from` (or alone), answering whether it loaded.
fn load(bytes: Vec<u8>, name: &'static str, from: Option<PathBuf>) -> bool {
    answers(move || {
        let dir = tempfile::tempdir().unwrap();
        if let Some(from) = from {
            for entry in std::fs::read_dir(&from).unwrap() {
                let path = entry.unwrap().path();
                std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let target = if name.ends_with(".gguf") {
            path
        } else {
            dir.path().to_path_buf()
        };
        LanguageModel::load(&target).is_ok()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_damaged_gguf_file_loads_or_fails_cleanly(bytes in mutations(gguf(), 8192)) {
        load(bytes, "model.gguf", None);
    }

    #[test]
    fn random_bytes_as_a_gguf_file_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut with_magic = b"GGUF".to_vec();
        with_magic.extend_from_slice(&bytes);
        prop_assert!(!load(bytes, "model.gguf", None));
        prop_assert!(!load(with_magic, "model.gguf", None));
    }

    #[test]
    fn a_damaged_safetensors_file_loads_or_fails_cleanly(
        bytes in mutations(safetensors(), safetensors_header(&safetensors()))
    ) {
        load(bytes, "model.safetensors", Some(fixture("qwen2/hf")));
    }
}

#[test]
fn the_valid_files_load() {
    assert!(load(gguf(), "model.gguf", None));
    assert!(load(
        safetensors(),
        "model.safetensors",
        Some(fixture("qwen2/hf"))
    ));
}
