//! Snapshots with the real embedded models (pulled through the registry on first use): the
//! exact rendered prompt strings and token ids, the option ids, and prefix reuse giving the
//! same scores as full prompts. The pinned ids were produced independently by llama.cpp
//! (llama-cpp-python 0.3.36: `tokenize(text, add_bos = file's add_bos_token, special = True)`,
//! the chat string rendered by jinja2 from the GGUF's own template).

use pstat_lm::LanguageModel;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::scoring::render;
use pstat_prompt::{EncodedPrompts, OptionScorer, OptionTokens, PromptCodec, PromptFormat};

const CONTEXT: [&str; 2] = [
    "The city of Paris is located in France.",
    "The city of Tokyo is located in Japan.",
];
const STATEMENT: &str = "The city of Rome is located in Italy.";

const PLAIN: &str = "The city of Paris is located in France.\nThe city of Tokyo is located in Japan.\n\
Is the following statement correct?\nThe city of Rome is located in Italy.\n\
a. The statement is true.\nb. The statement is false.\nc. The statement is neither true nor false.\n\
The final answer is";

const SMOLLM2_CHAT: &str = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
<|im_start|>user\nThe city of Paris is located in France.\nThe city of Tokyo is located in Japan.\n\
Is the following statement correct?\nThe city of Rome is located in Italy.\n\
a. The statement is true.\nb. The statement is false.\nc. The statement is neither true nor false.<|im_end|>\n\
<|im_start|>assistant\nThe final answer is";

const SMOLLM2_PLAIN_IDS: &[u32] = &[
    504, 2240, 282, 7042, 314, 3807, 281, 4649, 30, 198, 504, 2240, 282, 19081, 314, 3807, 281,
    3085, 30, 198, 4182, 260, 1695, 4814, 2887, 47, 198, 504, 2240, 282, 7268, 314, 3807, 281,
    7158, 30, 198, 81, 30, 378, 4814, 314, 2629, 30, 198, 82, 30, 378, 4814, 314, 7065, 30, 198,
    83, 30, 378, 4814, 314, 7795, 2629, 5277, 7065, 30, 198, 504, 3403, 2988, 314,
];

const SMOLLM2_CHAT_IDS: &[u32] = &[
    1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407,
    19712, 8182, 2, 198, 1, 4093, 198, 504, 2240, 282, 7042, 314, 3807, 281, 4649, 30, 198, 504,
    2240, 282, 19081, 314, 3807, 281, 3085, 30, 198, 4182, 260, 1695, 4814, 2887, 47, 198, 504,
    2240, 282, 7268, 314, 3807, 281, 7158, 30, 198, 81, 30, 378, 4814, 314, 2629, 30, 198, 82, 30,
    378, 4814, 314, 7065, 30, 198, 83, 30, 378, 4814, 314, 7795, 2629, 5277, 7065, 30, 2, 198, 1,
    520, 9531, 198, 504, 3403, 2988, 314,
];

const GEMMA_PLAIN_IDS: &[u32] = &[
    2, 818, 3207, 529, 9079, 563, 5628, 528, 7001, 236761, 107, 818, 3207, 529, 21038, 563, 5628,
    528, 6056, 236761, 107, 4602, 506, 2269, 5456, 4338, 236881, 107, 818, 3207, 529, 13706, 563,
    5628, 528, 11702, 236761, 107, 236746, 236761, 669, 5456, 563, 1847, 236761, 107, 236763,
    236761, 669, 5456, 563, 2416, 236761, 107, 236755, 236761, 669, 5456, 563, 13637, 1847, 6271,
    2416, 236761, 107, 818, 1626, 3890, 563,
];

fn codec(model: &str) -> (std::path::PathBuf, EmbeddedCodec) {
    let path = pstat_lm::registry::resolve(model).unwrap_or_else(|e| panic!("{e}"));
    let codec = EmbeddedCodec::open(&path).unwrap();
    (path, codec)
}

fn encoded(codec: &EmbeddedCodec, format: PromptFormat) -> (String, Vec<u32>) {
    let text = render(codec, format, &CONTEXT, STATEMENT).unwrap();
    let ids = codec.encode_prompt(&text).unwrap();
    (text, ids)
}

#[test]
fn smollm2_prompts_are_pinned() {
    let (_, codec) = codec("smollm2-135m-instruct");
    assert!(codec.has_chat_template());
    assert_eq!(
        encoded(&codec, PromptFormat::Plain),
        (PLAIN.to_string(), SMOLLM2_PLAIN_IDS.to_vec())
    );
    assert_eq!(
        encoded(&codec, PromptFormat::Chat),
        (SMOLLM2_CHAT.to_string(), SMOLLM2_CHAT_IDS.to_vec())
    );
    let options = OptionTokens::new(&codec).unwrap();
    assert_eq!(
        options.ids,
        vec![vec![81, 253], vec![82, 278], vec![83, 265]]
    );
    assert_eq!(options.pieces[0], vec!["a".to_string(), " a".to_string()]);
}

#[test]
fn gemma_prompts_are_pinned() {
    let (_, codec) = codec("gemma-3-270m");
    assert!(!codec.has_chat_template(), "Gemma 3 270m is a base model");
    assert_eq!(
        encoded(&codec, PromptFormat::Plain),
        (PLAIN.to_string(), GEMMA_PLAIN_IDS.to_vec())
    );
    assert!(render(&codec, PromptFormat::Chat, &CONTEXT, STATEMENT).is_err());
    // BOS (2) is in every option's encoding and is dropped.
    let options = OptionTokens::new(&codec).unwrap();
    assert_eq!(
        options.ids,
        vec![vec![496, 236746], vec![518, 236763], vec![505, 236755]]
    );
}

/// Scoring suffixes against the shared prefix's KV cache equals scoring the full prompts.
#[test]
fn prefix_reuse_scores_like_full_prompts() {
    let (path, codec) = codec("smollm2-135m-instruct");
    let lm = LanguageModel::load(&path).unwrap();
    let statements = [
        "The city of Rome is located in Italy.",
        "The city of Lima is located in Peru.",
        "The city of Oslo is not located in Norway.",
        "The city of Bern is located in Switzerland.",
    ];
    let texts: Vec<String> = statements
        .iter()
        .map(|s| render(&codec, PromptFormat::Chat, &CONTEXT, s).unwrap())
        .collect();
    let shared = EncodedPrompts::new(&codec, texts).unwrap();
    assert!(
        shared.shared > 50,
        "context and header are shared: {}",
        shared.shared
    );
    let full = EncodedPrompts {
        shared: 0,
        ..shared.clone()
    };
    let mut scorer = EmbeddedScorer::new(&lm, OptionTokens::new(&codec).unwrap());
    let a = scorer.score(&shared, &mut |_| {}).unwrap();
    let b = scorer.score(&full, &mut |_| {}).unwrap();
    for (x, y) in a.iter().zip(&b) {
        for j in 0..3 {
            assert!((x.p[j] - y.p[j]).abs() < 1e-4, "{x:?} vs {y:?}");
        }
        assert_eq!(x.answer(), y.answer());
    }
}
