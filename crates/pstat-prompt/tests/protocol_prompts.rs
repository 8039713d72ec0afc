//! The bytes of both protocols' prompts against fixtures written by hand from their sources:
//! `paper_*` from the prompt printed in Section 4.4.2 of the paper, `authors_*` from
//! `exp_zero_shot.py` (the question block) and `response/prompt_templates.py` (`ABC3Prompt`: the
//! options, the answer cue, the system turn and the prefill) of the authors' released code.
//! Chat prompts are rendered through real chat templates (pstat-lm's Hugging Face fixtures).

use pstat_prompt::embedded::EmbeddedCodec;
use pstat_prompt::scoring::render_as;
use pstat_prompt::template::authors;
use pstat_prompt::{EncodedPrompts, PromptCodec, PromptFormat, Protocol};
use std::path::{Path, PathBuf};

const STATEMENT: &str = "The city of Rome is located in Italy.";
const CONTEXT: [&str; 2] = [
    "The city of Quahog is located in Rhode Island.",
    "The city of Gotham is located in New Jersey.",
];

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/protocol")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hf(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pstat-lm/tests/fixtures/hf")
        .join(arch)
        .join("hf")
}

/// A codec that must not be asked to render a chat: plain prompts need none.
struct NoChat;

impl PromptCodec for NoChat {
    fn render_chat(&self, _: &str, _: &str) -> Result<String, pstat_prompt::PromptError> {
        unreachable!("plain prompts render no chat")
    }
    fn encode_prompt(&self, _: &str) -> Result<Vec<u32>, pstat_prompt::PromptError> {
        unreachable!()
    }
    fn encode_option(&self, _: &str) -> Result<Vec<u32>, pstat_prompt::PromptError> {
        unreachable!()
    }
    fn piece(&self, _: u32) -> Result<String, pstat_prompt::PromptError> {
        unreachable!()
    }
}

#[test]
fn plain_prompts_are_byte_for_byte_the_sources() {
    let plain = |protocol, context: &[&str]| {
        render_as(&NoChat, protocol, PromptFormat::Plain, context, STATEMENT).unwrap()
    };
    assert_eq!(
        plain(Protocol::Paper, &[]),
        fixture("paper_plain_empty.txt")
    );
    assert_eq!(
        plain(Protocol::Paper, &CONTEXT),
        fixture("paper_plain_context.txt")
    );
    assert_eq!(
        plain(Protocol::Authors, &[]),
        fixture("authors_plain_empty.txt")
    );
    assert_eq!(
        plain(Protocol::Authors, &CONTEXT),
        fixture("authors_plain_context.txt")
    );
}

#[test]
fn chat_turns_are_byte_for_byte_the_sources() {
    assert_eq!(
        pstat_prompt::template::user_turn(&CONTEXT, STATEMENT),
        fixture("paper_chat_user_context.txt")
    );
    assert_eq!(authors::SYSTEM, fixture("authors_chat_system.txt"));
    assert_eq!(
        authors::user_turn(&CONTEXT, STATEMENT),
        fixture("authors_chat_user_context.txt")
    );
    assert_eq!(authors::PREFILL, fixture("authors_chat_prefill.txt"));
}

#[test]
fn authors_chat_prompt_through_a_template_with_a_system_role() {
    let codec = EmbeddedCodec::open(&hf("llama")).unwrap();
    let text = render_as(
        &codec,
        Protocol::Authors,
        PromptFormat::Chat,
        &CONTEXT,
        STATEMENT,
    )
    .unwrap();
    assert_eq!(text, fixture("authors_chat_llama_context.txt"));
    // The template writes BOS; the authors' code tokenizes the rendering with special tokens
    // again, so the prompt starts with two BOS, where the paper's protocol has one.
    let twice = EncodedPrompts::for_protocol(
        &codec,
        vec![text.clone()],
        Protocol::Authors,
        PromptFormat::Chat,
    )
    .unwrap();
    let once =
        EncodedPrompts::for_protocol(&codec, vec![text], Protocol::Paper, PromptFormat::Chat)
            .unwrap();
    let bos = once.tokens[0][0];
    assert_eq!(&twice.tokens[0][..2], &[bos, bos]);
    assert_ne!(once.tokens[0][1], bos);
    assert_eq!(&twice.tokens[0][1..], &once.tokens[0][..]);
}

#[test]
fn authors_chat_prompt_merges_the_system_turn_where_the_template_refuses_it() {
    // Gemma 2's own template (it raises on a system message), on the gemma2 fixture's
    // tokenizer.
    const GEMMA2: &str = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";
    let dir = tempfile::tempdir().unwrap();
    let src = hf("gemma2");
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(src.join(file), dir.path().join(file)).unwrap();
    }
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("tokenizer_config.json")).unwrap()).unwrap();
    config["chat_template"] = serde_json::Value::String(GEMMA2.into());
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
    let codec = EmbeddedCodec::open(dir.path()).unwrap();
    let text = render_as(
        &codec,
        Protocol::Authors,
        PromptFormat::Chat,
        &CONTEXT,
        STATEMENT,
    )
    .unwrap();
    assert_eq!(text, fixture("authors_chat_gemma2_context.txt"));
}
