//! No file of a crate imports, through a chain of other files, a file that imports it: the
//! files of a crate form layers, each reading only those below it. A file's imports are the
//! `crate::` and `super::` paths outside its test module; a path is attributed to the longest
//! module file it names, and an item the crate root re-exports to the file that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's `crates/` folder.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The module path of `file` under `src`: `lib.rs`/`main.rs` → `[]`, `a/b.rs` and
/// `a/b/mod.rs` → `[a, b]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// The text of `file` without comments and without its `#[cfg(test)]` modules.
fn code_of(text: &str) -> String {
    let text: String = text
        .lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..i]);
        let after = &rest[i..];
        let Some(open) = after.find('{') else {
            rest = "";
            break;
        };
        // Only a test module is dropped, with its braces matched.
        if !after[..open].contains("mod ") {
            code.push_str("#[cfg(test)]");
            rest = &after["#[cfg(test)]".len()..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    code.push_str(rest);
    code
}

/// Every path that follows `prefix` (`crate::`, `super::`) in `code`, with `{a, b::c}` groups
/// expanded: `crate::{a::X, b}` gives `[a, X]` and `[b]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix) {
        let at = from + i;
        from = at + prefix.len();
        let before = at.checked_sub(1).map(|j| bytes[j]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            continue;
        }
        let mut pos = from;
        tree(code, &mut pos, Vec::new(), &mut paths);
    }
    paths
}

/// Reads one use-tree at `pos` below `base` into `out`.
fn tree(code: &str, pos: &mut usize, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let bytes = code.as_bytes();
    let skip_space = |pos: &mut usize| {
        while *pos < bytes.len() && bytes[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
    };
    let mut path = base;
    loop {
        skip_space(pos);
        if *pos < bytes.len() && bytes[*pos] == b'{' {
            *pos += 1;
            loop {
                tree(code, pos, path.clone(), out);
                skip_space(pos);
                match bytes.get(*pos) {
                    Some(b',') => *pos += 1,
                    Some(b'}') => {
                        *pos += 1;
                        break;
                    }
                    _ => break,
                }
                skip_space(pos);
                if bytes.get(*pos) == Some(&b'}') {
                    *pos += 1;
                    break;
                }
            }
            return;
        }
        let start = *pos;
        while *pos < bytes.len() && (bytes[*pos].is_ascii_alphanumeric() || bytes[*pos] == b'_') {
            *pos += 1;
        }
        if *pos == start {
            break;
        }
        path.push(code[start..*pos].to_string());
        if code[*pos..].starts_with("::") {
            *pos += 2;
        } else {
            break;
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The file-level import graph of one crate's `src`, keyed by module path (`a::b`, `` for
/// the root).
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let root_code = modules
        .get(&Vec::new())
        .map(|f| code_of(&std::fs::read_to_string(f).unwrap()))
        .unwrap_or_default();
    // Items the root re-exports: `pub use a::X` makes `crate::X` a path into `a`.
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in root_code.split(';') {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        let mut pos = 0;
        let mut paths = Vec::new();
        tree(rest, &mut pos, Vec::new(), &mut paths);
        for path in paths {
            if modules.contains_key(&path[..1]) && path.len() > 1 {
                reexports.insert(
                    path.last().unwrap().clone(),
                    path[..path.len() - 1].to_vec(),
                );
            }
        }
    }
    // The longest module file a path names.
    let resolve = |path: &[String]| -> Vec<String> {
        let path = match path.first().and_then(|first| reexports.get(first)) {
            Some(module) if !modules.contains_key(&path[..1]) => module.clone(),
            _ => path.to_vec(),
        };
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains_key(p))
            .unwrap_or_default()
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let code = code_of(&text);
        // `a/b.rs` and `a/b/mod.rs` are both module `a::b`, whose `super` is `a`.
        let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
        let own = module.join("::");
        let edges = graph.entry(own.clone()).or_default();
        let mut targets: Vec<Vec<String>> = paths_after(&code, "crate::")
            .into_iter()
            .map(|p| resolve(&p))
            .collect();
        // `super::` in a file names its parent module.
        for path in paths_after(&code, "super::") {
            let mut full = parent.clone();
            full.extend(path);
            targets.push(resolve(&full));
        }
        for target in targets {
            let target = target.join("::");
            // A module's own children and itself are not imports of another layer.
            if target != own && !target.starts_with(&format!("{own}::")) {
                edges.insert(target);
            }
        }
    }
    graph
}

/// The import circles of `graph`, each as the files along it.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan-free: a circle through `a` exists when `a` is reachable from one of its targets.
    let mut found = Vec::new();
    let mut reported: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in graph.keys() {
        // Breadth-first search for the shortest way back to `start`.
        let mut previous: BTreeMap<String, String> = BTreeMap::new();
        let mut queue: std::collections::VecDeque<String> = graph[start].iter().cloned().collect();
        for t in &graph[start] {
            previous.insert(t.clone(), start.clone());
        }
        while let Some(at) = queue.pop_front() {
            if at == *start {
                let mut circle = vec![start.clone()];
                let mut back = previous[start].clone();
                while back != *start {
                    circle.push(back.clone());
                    back = previous[&back].clone();
                }
                circle.reverse();
                let members: BTreeSet<String> = circle.iter().cloned().collect();
                if reported.insert(members) {
                    found.push(circle);
                }
                break;
            }
            for next in graph.get(&at).into_iter().flatten() {
                if !previous.contains_key(next) {
                    previous.insert(next.clone(), at.clone());
                    queue.push_back(next.clone());
                }
            }
        }
    }
    found
}

#[test]
fn no_crate_has_a_file_level_import_circle() {
    let mut all = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() > 10, "found only {crates:?}");
    for krate in crates {
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        let graph = import_graph(&krate.join("src"));
        for circle in circles(&graph) {
            let shown: Vec<String> = circle
                .iter()
                .map(|m| {
                    if m.is_empty() {
                        "(root)".to_string()
                    } else {
                        m.clone()
                    }
                })
                .collect();
            all.push(format!("{name}: {} → {}", shown.join(" → "), shown[0]));
        }
    }
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}

#[test]
fn use_trees_expand_to_paths() {
    let paths = paths_after(
        "use crate::{a::X, b::{c, d::Y}};\nlet z = crate::e::f();",
        "crate::",
    );
    let text: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(text, ["a::X", "b::c", "b::d::Y", "e::f"]);
}
