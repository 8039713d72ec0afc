//! `pstat tokenize` on llama.cpp's own tokenizer test vocabularies: vocabulary-only GGUFs with
//! every `.inp` case's expected ids in `.out` (llama.cpp's test-tokenizer-0: no BOS, no special
//! parsing). The files come from the llama-cpp-python 0.3.36 sdist, which `.ci/run` unpacks into
//! `$PSTAT_LLAMA_VOCAB_DIR`; vocabularies pstat cannot reproduce must be refused with exit code 2.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn vocab_dir() -> Option<PathBuf> {
    std::env::var_os("PSTAT_LLAMA_VOCAB_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            pstat_testkit::missing("PSTAT_LLAMA_VOCAB_DIR is not set (scripts/test sets it)")
        })
}

/// llama.cpp's `read_tests`: inputs separated by "\n__ggml_vocab_test__\n", one line of
/// space-separated ids per input.
fn read_cases(gguf: &std::path::Path) -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let path = PathBuf::from(format!("{}.{ext}", gguf.display()));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let raw = read("inp");
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        match raw[pos..].find(sep) {
            Some(next) => {
                inputs.push(raw[pos..pos + next].to_string());
                pos += next + sep.len();
            }
            None => {
                inputs.push(raw[pos..].to_string());
                break;
            }
        }
    }
    let outputs: Vec<Vec<u32>> = read("out")
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    assert_eq!(inputs.len(), outputs.len(), "{}", gguf.display());
    inputs.into_iter().zip(outputs).collect()
}

fn tokenize(gguf: &std::path::Path, texts: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["tokenize", "--no-bos", "--json", "--model"])
        .arg(gguf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for text in texts {
        writeln!(stdin, "{}", serde_json::to_string(text).unwrap()).unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn check(vocab: &str) {
    let Some(dir) = vocab_dir() else { return };
    let gguf = dir.join(format!("ggml-vocab-{vocab}.gguf"));
    let cases = read_cases(&gguf);
    let texts: Vec<&str> = cases.iter().map(|(t, _)| t.as_str()).collect();
    let output = tokenize(&gguf, &texts);
    assert!(
        output.status.success(),
        "{vocab}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), cases.len());
    let wrong: Vec<String> = cases
        .iter()
        .zip(&lines)
        .filter_map(|((text, expected), line)| {
            let ids: Vec<u32> = serde_json::from_value(line["ids"].clone()).unwrap();
            (&ids != expected).then(|| format!("{text:?}: pstat {ids:?}, llama.cpp {expected:?}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{vocab}: {} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

macro_rules! vocab_tests {
    ($($name:ident => $vocab:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check($vocab);
            }
        )*
    };
}

vocab_tests! {
    llama_bpe_matches_llama_cpp => "llama-bpe",
    qwen2_matches_llama_cpp => "qwen2",
    qwen35_matches_llama_cpp => "qwen35",
    llama_spm_matches_llama_cpp => "llama-spm",
    phi3_matches_llama_cpp => "phi-3",
    gpt2_matches_llama_cpp => "gpt-2",
    mpt_matches_llama_cpp => "mpt",
    starcoder_matches_llama_cpp => "starcoder",
    refact_matches_llama_cpp => "refact",
    command_r_matches_llama_cpp => "command-r",
}

/// Falcon's pre-tokenizer and BERT's WordPiece are not reproduced: refused, one line, exit 2.
#[test]
fn unsupported_tokenizers_are_refused_with_exit_code_2() {
    let Some(dir) = vocab_dir() else { return };
    for (vocab, field) in [
        ("falcon", "tokenizer.ggml.pre = \"falcon\""),
        ("bert-bge", "tokenizer.ggml.model = \"bert\""),
    ] {
        let gguf = dir.join(format!("ggml-vocab-{vocab}.gguf"));
        let output = tokenize(&gguf, &["Hello world"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{vocab}: {stderr}");
        assert!(output.stdout.is_empty(), "{vocab}: tokenized anyway");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{vocab}: {stderr}");
        assert!(
            stderr.contains(&gguf.display().to_string()) && stderr.contains(field),
            "{vocab}: {stderr}"
        );
    }
}
