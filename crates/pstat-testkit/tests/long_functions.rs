//! No function grows to the size the long ones were split from: a function of
//! [`MAX_LINES`] lines or more is a sequence of steps waiting for names. The exceptions are
//! listed, each no longer than it is now, so the list only shrinks.

use std::path::{Path, PathBuf};

/// The size from which a function must be split into named steps.
const MAX_LINES: usize = 150;

/// Functions still at or over [`MAX_LINES`]: (file, function, its length today).
const EXCEPTIONS: &[(&str, &str, usize)] = &[
    // The Hugging Face config translation: one arm per architecture's keys.
    ("crates/pstat-lm/src/hf.rs", "translate", 295),
    // GGUF metadata keys with llama.cpp's defaults, one after another.
    ("crates/pstat-lm/src/gguf.rs", "config", 160),
];

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The name of the function a line starts (`pub(crate) async fn name(`), if it does.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// Every function of `text` with a body: (name, first line, lines).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        // A declaration without a body (a trait's) ends in `;` before any `{`.
        let body = lines[i..]
            .iter()
            .find(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'))
            .is_some_and(|l| l.trim_end().ends_with('{'));
        if !body || line.trim_end().ends_with('}') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        if let Some(end) = lines[i + 1..].iter().position(|l| l.trim_end() == close) {
            found.push((name.to_string(), i + 1, end + 2));
        }
    }
    found
}

#[test]
fn no_function_reaches_the_size_that_was_split() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = krate.path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        for (name, line, n) in functions(&text) {
            if n < MAX_LINES {
                continue;
            }
            match EXCEPTIONS.iter().find(|e| e.0 == rel && e.1 == name) {
                Some(&(_, _, allowed)) if n <= allowed => seen.push((rel.clone(), name)),
                Some(&(_, _, allowed)) => problems.push(format!(
                    "{rel}:{line}: `{name}` grew to {n} lines (listed at {allowed}): split it"
                )),
                None => problems.push(format!(
                    "{rel}:{line}: `{name}` is {n} lines: split it into named steps"
                )),
            }
        }
    }
    for (file, name, _) in EXCEPTIONS {
        if !seen.iter().any(|(f, n)| f == file && n == name) {
            problems.push(format!(
                "{file}: `{name}` is under {MAX_LINES} lines now: drop it from EXCEPTIONS"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn functions_are_measured_from_signature_to_closing_brace() {
    let text = "fn a() {\n    x();\n}\n\ntrait T {\n    fn b(&self);\n    fn c(\n        &self,\n    );\n}\n    pub fn d(\n        y: u8,\n    ) -> u8 {\n        y\n    }\n";
    let found = functions(text);
    assert_eq!(found, [("a".to_string(), 1, 3), ("d".to_string(), 11, 5)]);
}
