//! Token ids must equal llama.cpp's for every bundled statement and a set of tricky strings,
//! for both embedded models. Fixtures come from `tools/fixtures/tokens.py` (llama-cpp-python);
//! the models are pulled through the registry on first use.

use pstat_lm::GgufFile;
use pstat_lm::registry;
use pstat_lm::tokenizer::Tokenizer;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
struct Fixture {
    gguf_sha256: String,
    statements_add_special: bool,
    statements_parse_special: bool,
    tricky: Vec<Case>,
    statements: HashMap<String, Vec<u32>>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    add_special: bool,
    parse_special: bool,
    ids: Vec<u32>,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(model: &str) -> (Tokenizer, Fixture) {
    let path = registry::resolve(model).unwrap_or_else(|e| panic!("{e}"));
    let fixture = manifest_dir().join(format!("tests/fixtures/tokens-{model}.json"));
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    assert_eq!(
        registry::find(model).unwrap().sha256,
        fixture.gguf_sha256,
        "fixture made from another file"
    );
    let gguf = GgufFile::open(&path).unwrap();
    (Tokenizer::from_gguf(&gguf).unwrap(), fixture)
}

/// Every `statement` of every CSV under data/.
fn bundled_statements(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            bundled_statements(&path, out);
        } else if path.extension().is_some_and(|e| e == "csv") {
            let mut reader = csv::Reader::from_path(&path).unwrap();
            let headers = reader.headers().unwrap().clone();
            let Some(col) = headers.iter().position(|h| h == "statement") else {
                continue;
            };
            for record in reader.records() {
                out.push((path.clone(), record.unwrap()[col].to_string()));
            }
        }
    }
}

fn check(model: &str) {
    let (tokenizer, fixture) = load(model);
    for case in &fixture.tricky {
        let ids = tokenizer
            .encode(&case.text, case.add_special, case.parse_special)
            .unwrap();
        assert_eq!(
            ids, case.ids,
            "{model}: {:?} (add_special {}, parse_special {})",
            case.text, case.add_special, case.parse_special
        );
    }
    let mut statements = Vec::new();
    bundled_statements(&manifest_dir().join("../../data"), &mut statements);
    assert!(statements.len() > 20_000, "bundled data not found");
    let (mut missing, mut wrong) = (Vec::new(), Vec::new());
    for (file, text) in &statements {
        let key = hex::encode(&Sha256::digest(text.as_bytes())[..8]);
        let Some(expected) = fixture.statements.get(&key) else {
            missing.push(format!("{}: {text:?}", file.display()));
            continue;
        };
        let ids = tokenizer
            .encode(
                text,
                fixture.statements_add_special,
                fixture.statements_parse_special,
            )
            .unwrap();
        if &ids != expected {
            wrong.push(format!("{text:?}: ours {ids:?}, llama.cpp {expected:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{model}: {} of {} statements differ from llama.cpp, e.g.\n{}",
        wrong.len(),
        statements.len(),
        wrong[..wrong.len().min(10)].join("\n")
    );
    assert!(
        missing.is_empty(),
        "{model}: {} statements have no llama.cpp fixture (data changed? rerun tools/fixtures/tokens.py), e.g.\n{}",
        missing.len(),
        missing[..missing.len().min(5)].join("\n")
    );
}

#[test]
fn smollm2_ids_equal_llama_cpp() {
    check("smollm2-135m-instruct");
}

#[test]
fn gemma3_ids_equal_llama_cpp() {
    check("gemma-3-270m");
}
