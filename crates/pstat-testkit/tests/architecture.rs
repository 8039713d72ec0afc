//! docs/architecture.md's errand lists match the code: every file named exists and holds the
//! item named beside it, and an errand of more than four files says that it is not yet four.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One file of an errand: its path (with `<name>` for a new file) and the item it holds.
struct Entry {
    path: String,
    item: String,
}

/// The errands of the page: heading, whether its text says it is not yet four files, entries.
fn errands(page: &str) -> Vec<(String, bool, Vec<Entry>)> {
    let section = page
        .split_once("\n## Errands\n")
        .expect("docs/architecture.md has an `## Errands` section")
        .1;
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut errands = Vec::new();
    for block in section.split("\n### ").skip(1) {
        let (heading, body) = block.split_once('\n').unwrap_or((block, ""));
        let mut entries = Vec::new();
        for line in body.lines() {
            let Some(rest) = line.strip_prefix("- `") else {
                continue;
            };
            let (path, rest) = rest.split_once('`').expect("a closing backtick");
            let item = rest
                .strip_prefix(": `")
                .and_then(|r| r.split_once('`'))
                .map(|(item, _)| item.to_string())
                .unwrap_or_else(|| panic!("{heading}: `{path}` names no item"));
            entries.push(Entry {
                path: path.to_string(),
                item,
            });
        }
        let not_yet = body.trim_start().starts_with("Not yet four files");
        errands.push((heading.trim().to_string(), not_yet, entries));
    }
    errands
}

/// The texts the entry's item must be found in: the file, or for a new file (`<name>`) the
/// files of the same kind beside it.
fn texts(entry: &Entry) -> Vec<(PathBuf, String)> {
    let path = root().join(&entry.path);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    if !name.starts_with("<name>") {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", entry.path));
        return vec![(path, text)];
    }
    let ext = name.trim_start_matches("<name>").to_string();
    let dir = path.parent().unwrap();
    let mut found = Vec::new();
    for sibling in std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
    {
        let p = sibling.path();
        if p.to_string_lossy().ends_with(&ext) {
            found.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    found
}

#[test]
fn the_errand_lists_name_files_that_hold_what_the_code_reads() {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let errands = errands(&page);
    let headings: Vec<&str> = errands.iter().map(|(h, _, _)| h.as_str()).collect();
    assert_eq!(
        headings,
        [
            "A new model architecture",
            "A new perturbation Θ",
            "A new figure",
            "A new probe"
        ]
    );
    let mut problems = Vec::new();
    for (heading, not_yet, entries) in &errands {
        if entries.is_empty() {
            problems.push(format!("{heading}: no files listed"));
        }
        if entries.len() > 4 && !not_yet {
            problems.push(format!(
                "{heading}: {} files, and the page does not say it is not yet four",
                entries.len()
            ));
        }
        if entries.len() <= 4 && *not_yet {
            problems.push(format!(
                "{heading}: four files or fewer now; drop `Not yet`"
            ));
        }
        for entry in entries {
            let texts = texts(entry);
            if !texts.iter().any(|(_, text)| text.contains(&entry.item)) {
                problems.push(format!(
                    "{heading}: `{}` does not hold `{}`",
                    entry.path, entry.item
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_conditions_file_is_the_one_the_data_crate_builds_in() {
    // A new Θ is one entry in this file: the condition set every stage and the report read.
    let condition =
        std::fs::read_to_string(root().join("crates/pstat-data/src/condition.rs")).unwrap();
    assert!(condition.contains("include_str!(\"conditions.toml\")"));
}
