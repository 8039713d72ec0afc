//! Token ids must equal llama.cpp's for every bundled statement and a set of tricky strings,
//! for both embedded models. Fixtures come from `tools/fixtures/tokens.py` (llama-cpp-python);
//! the models are pulled through the registry on first use.

use pstat_lm::GgufFile;
use pstat_lm::chat::{ChatError, ChatTemplate, Message};
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
    chats: Vec<Chat>,
    statements: HashMap<String, Vec<u32>>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    add_special: bool,
    parse_special: bool,
    ids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct Chat {
    messages: Vec<Message>,
    prefill: String,
    text: String,
    ids: Vec<u32>,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(model: &str) -> (Tokenizer, Fixture) {
    let (_, tokenizer, fixture) = load_with_gguf(model);
    (tokenizer, fixture)
}

fn load_with_gguf(model: &str) -> (GgufFile, Tokenizer, Fixture) {
    let path = registry::resolve(model).unwrap_or_else(|e| panic!("{e}"));
    let fixture = manifest_dir().join(format!("tests/fixtures/tokens-{model}.json"));
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    assert_eq!(
        registry::find(model).unwrap().sha256,
        fixture.gguf_sha256,
        "fixture made from another file"
    );
    let gguf = GgufFile::open(&path).unwrap();
    let tokenizer = Tokenizer::from_gguf(&gguf).unwrap();
    (gguf, tokenizer, fixture)
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

/// Offsets tile the text, so character spans (subject, object) map to tokens; decoding gives
/// the text back.
fn check_offsets_and_decode(model: &str) {
    let (tokenizer, fixture) = load(model);
    for case in fixture.tricky.iter().filter(|c| !c.parse_special) {
        let text = &case.text;
        let with_offsets = tokenizer
            .encode_with_offsets(text, case.add_special, false)
            .unwrap();
        let ids: Vec<u32> = with_offsets.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, case.ids);
        let (mut covered, mut prev_start) = (0, 0);
        for (_, range) in &with_offsets {
            assert!(
                range.start <= range.end && range.end <= text.len(),
                "{text:?}"
            );
            assert!(
                range.start >= prev_start,
                "{model}: offsets of {text:?} go backwards at {range:?}"
            );
            assert!(
                range.start <= covered,
                "{model}: offsets of {text:?} skip bytes {covered}..{}",
                range.start
            );
            prev_start = range.start;
            covered = covered.max(range.end);
        }
        assert_eq!(
            covered,
            text.len(),
            "{model}: offsets of {text:?} stop early"
        );
        if text.is_ascii() {
            let pieces: String = with_offsets.iter().map(|(_, r)| &text[r.clone()]).collect();
            assert_eq!(&pieces, text, "{model}: offsets do not tile {text:?}");
        }
        let plain = tokenizer.encode(text, false, false).unwrap();
        assert_eq!(tokenizer.decode(&plain), *text, "{model}: decode");
    }
}

#[test]
fn smollm2_offsets_and_decode() {
    check_offsets_and_decode("smollm2-135m-instruct");
}

#[test]
fn gemma3_offsets_and_decode() {
    check_offsets_and_decode("gemma-3-270m");
}

/// SmolLM2's own template renders as jinja2 does, and the rendering tokenizes as in llama.cpp.
#[test]
fn smollm2_chat_matches_jinja2_and_llama_cpp() {
    let (gguf, tokenizer, fixture) = load_with_gguf("smollm2-135m-instruct");
    let template = ChatTemplate::from_gguf(&gguf, &tokenizer).unwrap();
    assert!(!fixture.chats.is_empty());
    for chat in &fixture.chats {
        let text = if chat.prefill.is_empty() {
            template.render(&chat.messages, true).unwrap()
        } else {
            template
                .render_with_prefill(&chat.messages, &chat.prefill)
                .unwrap()
        };
        assert_eq!(text, chat.text);
        assert_eq!(template.tokenize(&tokenizer, &text).unwrap(), chat.ids);
    }
}

/// Gemma 3 270m is a base model: asking for chat is an error that says so.
#[test]
fn gemma3_has_no_chat_template() {
    let (gguf, tokenizer, fixture) = load_with_gguf("gemma-3-270m");
    assert!(fixture.chats.is_empty());
    let err = ChatTemplate::from_gguf(&gguf, &tokenizer).err().unwrap();
    assert!(matches!(err, ChatError::NoTemplate(_)), "{err}");
}
