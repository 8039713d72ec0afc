//! docs/architecture.md's errand lists match the code: every file named exists and holds the
//! item named beside it, and an errand of more than four files says that it is not yet four.
//! For a new probe the list is also complete: outside its files, no code names a
//! representational probe, so none needs an edit for another one.

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

/// Files outside the errand "A new probe" that may name a representational probe, and why; a
/// new probe still needs no edit in any of them.
const NAMES_A_PROBE: &[&str] = &[
    // Reads probe files of earlier versions, which spelled Mass-Mean `mass-mean`.
    "crates/pstat-probe/src/probe.rs",
    // The Python bindings: a class per probe, each loading only its own files. A new probe is
    // reachable from Python once it has a class, which it does not need.
    "crates/pstat-py/src/lib.rs",
];

/// Every `.rs` file under `dir`, as paths relative to the workspace root.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The representational probes' variants, as `Probe::REPRESENTATIONAL` lists them.
fn representational_variants() -> Vec<String> {
    let keys = std::fs::read_to_string(root().join("crates/pstat-tables/src/keys.rs")).unwrap();
    let list = keys
        .split_once("pub const REPRESENTATIONAL: &[Probe] = &[")
        .and_then(|(_, rest)| rest.split_once("];"))
        .expect("keys.rs lists Probe::REPRESENTATIONAL")
        .0;
    let variants: Vec<String> = list
        .split(',')
        .filter_map(|v| v.trim().strip_prefix("Probe::"))
        .map(str::to_string)
        .collect();
    assert!(!variants.is_empty(), "no variant in `{list}`");
    variants
}

#[test]
fn no_file_outside_the_new_probe_errand_names_a_representational_probe() {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let errands = errands(&page);
    let (_, _, entries) = errands
        .iter()
        .find(|(heading, _, _)| heading == "A new probe")
        .expect("an errand `A new probe`");
    // The errand's files; for its new file, every file beside it that holds the item (an
    // existing probe's module) and that module's own folder.
    let mut allowed: Vec<PathBuf> = NAMES_A_PROBE.iter().map(|p| root().join(p)).collect();
    for entry in entries {
        for (path, text) in texts(entry) {
            if text.contains(&entry.item) {
                allowed.push(path.with_extension(""));
                allowed.push(path);
            }
        }
    }
    let names: Vec<String> = representational_variants()
        .iter()
        .map(|v| format!("Probe::{v}"))
        .collect();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        rust_files(&krate.path().join("src"), &mut files);
    }
    let mut problems = Vec::new();
    for file in files {
        if allowed.iter().any(|a| file == *a || file.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Tests name the probes they exercise; a file's test module comes last.
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            if let Some(name) = names.iter().find(|name| line.contains(name.as_str())) {
                let shown = file.strip_prefix(root()).unwrap_or(&file).display();
                problems.push(format!("{shown}:{}: {name}", n + 1));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "code outside the errand `A new probe` names a representational probe (read the \
         registered ones: Probe::REPRESENTATIONAL, Probe::PRIMARY, pstat_probe::readout):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_conditions_file_is_the_one_the_data_crate_builds_in() {
    // A new Θ is one entry in this file: the condition set every stage and the report read.
    let condition =
        std::fs::read_to_string(root().join("crates/pstat-data/src/condition.rs")).unwrap();
    assert!(condition.contains("include_str!(\"conditions.toml\")"));
}
