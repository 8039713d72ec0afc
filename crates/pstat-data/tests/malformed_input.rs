//! Property tests: the statement CSV loader and the activation-cache reader, fed random bytes
//! and mutations (truncation, byte flips, spliced junk) of valid files, answer with a value or
//! an error: never a panic, never a hang.

use proptest::prelude::*;
use pstat_data::activations::{Activations, Precision};
use pstat_data::load::{FileRole, parse_csv};
use pstat_data::{DataRoot, Domain};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on another thread and fails if it panics or takes longer than a few seconds.
fn answers<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no answer within 10 s (a hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the reader panicked"),
    }
}

/// A mutation of `valid`: cut at some byte, a few bytes overwritten, or junk spliced in.
fn mutations(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len();
    let (a, b, c) = (valid.clone(), valid.clone(), valid);
    prop_oneof![
        (0..len).prop_map(move |cut| a[..cut].to_vec()),
        prop::collection::vec((0..len, any::<u8>()), 1..8).prop_map(move |flips| {
            let mut bytes = b.clone();
            for (i, v) in flips {
                bytes[i] = v;
            }
            bytes
        }),
        (0..len, prop::collection::vec(any::<u8>(), 1..64)).prop_map(move |(at, junk)| {
            let mut bytes = c.clone();
            bytes.splice(at..at, junk);
            bytes
        }),
    ]
}

fn csv(bytes: Vec<u8>) {
    answers(move || {
        let text = String::from_utf8_lossy(&bytes);
        for role in [FileRole::Real, FileRole::Fictional] {
            let _ = parse_csv(
                Path::new("x.csv"),
                "trilemma/x.csv",
                &text,
                Domain::CityLocations,
                role,
            );
        }
    });
}

/// The first 40 lines of a bundled file: every column the loader reads.
fn valid_csv() -> Vec<u8> {
    let root = DataRoot::bundled();
    let text = root.file("trilemma/city_locations.csv").unwrap();
    let head: Vec<&str> = text.lines().take(40).collect();
    (head.join("\n") + "\n").into_bytes()
}

fn valid_activations() -> Vec<u8> {
    let mut acts = Activations::new(4);
    for i in 0..6u32 {
        let rows: Vec<f32> = (0..12).map(|j| (i * 12 + j) as f32 * 0.25 - 3.0).collect();
        acts.push(&format!("s:{i}"), &[i, i + 1, i + 2], &rows);
    }
    acts.metadata.insert("layer".into(), "3".into());
    acts.to_bytes(Precision::F16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_csv_loader_never_panics_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        csv(bytes);
    }

    #[test]
    fn the_csv_loader_never_panics_on_a_damaged_file(bytes in mutations(valid_csv())) {
        csv(bytes);
    }

    #[test]
    fn the_activation_reader_never_panics_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        answers(move || Activations::from_bytes(&bytes).err());
    }

    #[test]
    fn a_damaged_activation_file_is_refused(bytes in mutations(valid_activations())) {
        let valid = valid_activations();
        let changed = bytes != valid;
        let read = answers(move || Activations::from_bytes(&bytes).map(|a| a.to_bytes(Precision::F16)));
        // What is accepted reads back as the original: the content hash covers the data and
        // the metadata, so only a change that means the same (header padding) gets through.
        if let Ok(again) = read {
            prop_assert!(!changed || again == valid, "a changed file read back as something else");
        }
    }
}

#[test]
fn the_valid_inputs_parse() {
    let rows = parse_csv(
        Path::new("x.csv"),
        "trilemma/x.csv",
        std::str::from_utf8(&valid_csv()).unwrap(),
        Domain::CityLocations,
        FileRole::Real,
    )
    .unwrap();
    assert_eq!(rows.len(), 39);
    assert_eq!(
        Activations::from_bytes(&valid_activations()).unwrap().len(),
        6
    );
}
