//! Token ids must equal llama.cpp's on hard cases (digits, CJK, emoji, whitespace runs, mixed-case
//! contractions, other families' special-token texts, the P-StaT prompt) for the vocabulary-only
//! GGUFs of llama.cpp's tokenizer tests: Llama 3 (llama-bpe), Qwen2.5 (qwen2), Llama 2 / Mistral
//! SentencePiece (llama-spm), Phi-3, GPT-2 and the SmolLM-style digit splitters. Fixture from
//! `tools/fixtures/vocab_tokens.py`; the files from `$PSTAT_LLAMA_VOCAB_DIR` (set by .ci/run).

use pstat_lm::GgufFile;
use pstat_lm::tokenizer::Tokenizer;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(serde::Deserialize)]
struct Fixture {
    vocabularies: BTreeMap<String, Vocabulary>,
}

#[derive(serde::Deserialize)]
struct Vocabulary {
    gguf_sha256: String,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    add_special: bool,
    parse_special: bool,
    ids: Vec<u32>,
}

#[test]
fn hard_cases_equal_llama_cpp_for_every_vocabulary() {
    let Some(dir) = std::env::var_os("PSTAT_LLAMA_VOCAB_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            pstat_testkit::missing("PSTAT_LLAMA_VOCAB_DIR is not set (scripts/test sets it)")
        })
    else {
        return;
    };
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokens-vocab-files.json");
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    assert!(fixture.vocabularies.len() >= 4);
    let mut wrong = Vec::new();
    for (vocab, expected) in &fixture.vocabularies {
        let path = dir.join(format!("ggml-vocab-{vocab}.gguf"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            expected.gguf_sha256,
            "{}: not the file the fixture was made from",
            path.display()
        );
        let tokenizer =
            Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        for case in &expected.cases {
            let ids = tokenizer
                .encode(&case.text, case.add_special, case.parse_special)
                .unwrap();
            if ids != case.ids {
                wrong.push(format!(
                    "{vocab}: {:?} (add_special {}, parse_special {}): pstat {ids:?}, llama.cpp {:?}",
                    case.text, case.add_special, case.parse_special, case.ids
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
