#![warn(missing_docs)]
//! A test whose input lives outside the repository (a tiny random-weight model, llama.cpp's
//! vocabularies, a llama.cpp server, Chromium, an embedded model) must never pass by doing
//! nothing. Without its input it calls [`missing`]: under `CI=true` that fails the test; anywhere
//! else the test records a skip and returns. A skip is a line `SKIPPED <test>: <why>` written
//! to stderr past the test harness's capture (so it shows with `cargo test` alone) and appended
//! to the file `$PSTAT_TEST_SKIPS` names, which `scripts/test` counts in its closing summary.

use std::fmt::Display;
use std::io::Write;

/// Whether this is a CI run, where every input must be present.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The input `why` describes is missing: panics under `CI=true`, otherwise records a skip of the
/// calling test and returns `None`, so a test reads `let Some(x) = find().or_else(|| missing(..))`.
pub fn missing<T>(why: impl Display) -> Option<T> {
    assert!(!ci(), "CI=true and a test input is missing: {why}");
    record_skip(&why);
    None
}

fn record_skip(why: &dyn Display) {
    // libtest names each test's thread after the test; with one test thread it runs on `main`,
    // where the test binary's name is the better label.
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.to_string(),
        _ => std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "test".into()),
    };
    let line = format!("SKIPPED {test}: {why}\n");
    // Through the handle, not eprintln!: the harness captures the macros' output of passing tests.
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("PSTAT_TEST_SKIPS") {
        // One short append per skip; O_APPEND keeps lines of parallel test binaries whole.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        match file {
            Ok(mut f) => {
                let _ = f.write_all(line.as_bytes());
            }
            Err(e) => panic!("PSTAT_TEST_SKIPS={}: {e}", path.to_string_lossy()),
        }
    }
}
