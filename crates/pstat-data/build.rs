//! Embeds every statement CSV under the workspace `data/` folder into the library, so the
//! `pstat` binary carries its bundled data wherever it is installed.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            // Raw generator name lists are provenance, not statements.
            if path.file_name().is_some_and(|n| n == "synthetic_names") {
                continue;
            }
            collect(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "csv") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, path));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let data = manifest
        .join("../../data")
        .canonicalize()
        .expect("workspace data/ folder");
    println!("cargo:rerun-if-changed={}", data.display());
    let mut files = Vec::new();
    collect(&data, &data, &mut files);
    files.sort();
    let mut code = String::from("pub static BUNDLED: &[(&str, &str)] = &[\n");
    for (rel, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("bundled.rs");
    std::fs::write(out, code).unwrap();
}
