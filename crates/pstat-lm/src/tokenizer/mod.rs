//! The tokenizer stored in a GGUF file, reproducing llama.cpp's token ids: special and
//! user-defined tokens are split out of the text first (longest first, control tokens only when
//! parsing specials), then each remaining fragment goes through the vocabulary's algorithm
//! (`bpe` for `gpt2` vocabularies, `spm` for `llama` ones), and BOS/EOS are added as the
//! file's `add_bos_token`/`add_eos_token` say. Tokenizer types llama.cpp knows but pstat does not
//! reproduce exactly are refused, never approximated.

mod bpe;
mod hf;
mod pre;
mod spm;
mod unicode_data;

use crate::gguf::{GgufError, GgufFile};
use candle_core::quantized::gguf_file::Value;
use pre::Split;
use std::collections::HashMap;
use std::ops::Range;

/// Why a tokenizer could not be loaded or could not encode.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// Reading the GGUF file failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// Reading a Hugging Face folder's tokenizer files failed.
    #[error(transparent)]
    Hf(#[from] crate::hf::HfError),
    /// A tokenizer type (model or pre-tokenizer) pstat cannot reproduce exactly.
    #[error("{0}")]
    Unsupported(String),
    /// The tokenizer metadata is missing or inconsistent (the field says how).
    #[error("tokenizer metadata: {0}")]
    Metadata(String),
    /// Text could not be encoded (the field says why).
    #[error("encoding failed: {0}")]
    Encode(String),
}

/// llama.cpp's `llama_token_attr` bits, derived from `tokenizer.ggml.token_type` and adjusted
/// by the rules llama.cpp applies at load time.
mod attr {
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
    pub const LSTRIP: u32 = 1 << 7;
    pub const RSTRIP: u32 = 1 << 8;

    /// `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`) to attributes; 0 and unknown
    /// codes are "undefined" (no bit).
    pub fn from_token_type(code: i64) -> u32 {
        match code {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => 0,
        }
    }
}

/// Token texts, attributes and scores, with the reverse lookup every algorithm needs.
struct Vocab {
    tokens: Vec<String>,
    attrs: Vec<u32>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
}

impl Vocab {
    fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    fn has(&self, id: u32, bits: u32) -> bool {
        self.attrs[id as usize] & bits != 0
    }

    /// llama.cpp's `byte_to_token` for SentencePiece vocabularies: `<0xXX>`, else the byte as a
    /// one-character token; llama.cpp fails when neither exists.
    fn byte_token(&self, byte: u8) -> Result<u32, TokenizerError> {
        self.id(&format!("<0x{byte:02X}>"))
            .or_else(|| std::str::from_utf8(&[byte]).ok().and_then(|s| self.id(s)))
            .ok_or_else(|| {
                TokenizerError::Encode(format!(
                    "the vocabulary has no token for byte 0x{byte:02X} (neither <0x{byte:02X}> nor the byte itself)"
                ))
            })
    }
}

enum Algorithm {
    Bpe(Box<bpe::Bpe>),
    Spm {
        add_space_prefix: bool,
    },
    /// A Hugging Face `tokenizer.json`, which does the whole encoding itself.
    HuggingFace(Box<hf::HfTokenizer>),
}

/// A piece of the input after splitting out special tokens: raw text or one token.
enum Fragment {
    Text(Range<usize>),
    Token(u32, Range<usize>),
}

/// What a `tokenizer.ggml.pre` value means for llama.cpp's BPE: the pre-tokenizer regexes,
/// `ignore_merges`, and whether BOS is added when the file does not say.
struct PreTokenizer {
    splits: &'static [Split],
    ignore_merges: bool,
    add_bos: bool,
}

const GPT2: &[Split] = &[Split::Gpt2];
const DIGITS_GPT2: &[Split] = &[Split::Digits, Split::Gpt2];
const LLAMA3: &[Split] = &[Split::Words {
    max_digits: 3,
    marks: false,
}];
const QWEN2: &[Split] = &[Split::Words {
    max_digits: 1,
    marks: false,
}];
const QWEN35: &[Split] = &[Split::Words {
    max_digits: 1,
    marks: true,
}];

/// `tokenizer.ggml.pre` values pstat reproduces, grouped as llama.cpp's `llama_vocab::load`
/// groups them (every name of a group runs the same code there).
const PRE_TOKENIZERS: &[(&[&str], &[Split], bool, bool)] = &[
    (
        &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
        ],
        LLAMA3,
        true,
        true,
    ),
    (&["dbrx", "smaug-bpe"], LLAMA3, false, false),
    (
        &[
            "qwen2",
            "deepseek-r1-qwen",
            "kormo",
            "f2llmv2",
            "megrez",
            "stablelm2",
            "hunyuan",
            "solar-open",
            "grok-2",
        ],
        QWEN2,
        false,
        false,
    ),
    (&["qwen35"], QWEN35, false, false),
    (
        &[
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "mpt",
            "olmo",
            "jais",
            "trillion",
            "granite-docling",
            "exaone4",
            "modern-bert",
            "jina-v1-en",
            "jina-v2-code",
            "roberta-bpe",
        ],
        GPT2,
        false,
        false,
    ),
    (
        &[
            "starcoder",
            "refact",
            "command-r",
            "smollm",
            "codeshell",
            "exaone",
            "minerva-7b",
            "mellum2",
        ],
        DIGITS_GPT2,
        false,
        false,
    ),
];

impl PreTokenizer {
    fn find(name: &str) -> Option<Self> {
        PRE_TOKENIZERS
            .iter()
            .find(|(names, ..)| names.contains(&name))
            .map(|&(_, splits, ignore_merges, add_bos)| Self {
                splits,
                ignore_merges,
                add_bos,
            })
    }

    fn supported() -> String {
        PRE_TOKENIZERS
            .iter()
            .flat_map(|(names, ..)| names.iter().copied())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A model's tokenizer (from a GGUF file or a Hugging Face folder), giving llama.cpp's token
/// ids.
pub struct Tokenizer {
    vocab: Vocab,
    algorithm: Algorithm,
    /// Control, user-defined and unknown tokens, longest text first: the order llama.cpp splits
    /// them out of the input.
    specials: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

impl Tokenizer {
    /// Builds the tokenizer described by the `tokenizer.ggml.*` metadata of `gguf`, as
    /// llama.cpp's `llama_vocab::load` does. Needs no tensors (vocabulary-only files work).
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self, TokenizerError> {
        let path = gguf.path().display();
        let model = gguf.get_str("tokenizer.ggml.model")?;
        let pre = gguf.opt_str("tokenizer.ggml.pre")?;
        // Refuse before reading the (large) arrays.
        let bpe_pre = match model {
            "llama" => None,
            "gpt2" => {
                let name = pre.ok_or_else(|| {
                    TokenizerError::Unsupported(format!(
                        "{path}: tokenizer.ggml.pre is missing (llama.cpp then uses its `default` pre-tokenizer, which pstat does not reproduce; supported: {})",
                        PreTokenizer::supported()
                    ))
                })?;
                Some(PreTokenizer::find(name).ok_or_else(|| {
                    TokenizerError::Unsupported(format!(
                        "{path}: tokenizer.ggml.pre = {name:?} is not a pre-tokenizer pstat reproduces exactly (supported: {})",
                        PreTokenizer::supported()
                    ))
                })?)
            }
            other => {
                return Err(TokenizerError::Unsupported(format!(
                    "{path}: tokenizer.ggml.model = {other:?} is not a tokenizer pstat reproduces exactly (supported: \"gpt2\", \"llama\")"
                )));
            }
        };
        let mut tokens: Vec<String> = strings(gguf, "tokenizer.ggml.tokens")?;
        let n = tokens.len();
        for (i, text) in tokens.iter_mut().enumerate() {
            if text.is_empty() {
                // llama.cpp's name for an empty token, so that it can never match.
                *text = format!("[EMPTY_{i}]");
            }
        }
        let mut attrs: Vec<u32> = if gguf.metadata().contains_key("tokenizer.ggml.token_type") {
            integers(gguf, "tokenizer.ggml.token_type")?
                .into_iter()
                .map(attr::from_token_type)
                .collect()
        } else {
            vec![attr::NORMAL; n]
        };
        let scores: Vec<f32> = if gguf.metadata().contains_key("tokenizer.ggml.scores") {
            floats(gguf, "tokenizer.ggml.scores")?
        } else {
            vec![0.0; n]
        };
        if attrs.len() < n || scores.len() < n {
            return Err(TokenizerError::Metadata(format!(
                "{path}: {n} tokens but {} token types and {} scores",
                attrs.len(),
                scores.len()
            )));
        }
        attrs.truncate(n);
        let mut ids = HashMap::with_capacity(n);
        for (id, text) in tokens.iter().enumerate() {
            if ids.insert(text.clone(), id as u32).is_some() {
                return Err(TokenizerError::Metadata(format!(
                    "{path}: tokenizer.ggml.tokens holds {text:?} twice (llama.cpp refuses such a vocabulary)"
                )));
            }
        }
        // llama.cpp's defaults when the file does not say; a default outside the vocabulary
        // is no token, a file's id outside it is ignored.
        let (default_bos, default_eos) = match model {
            "gpt2" => (11, 11),
            _ => (1, 2),
        };
        let special = |key: &str, default: u32| -> Result<Option<u32>, TokenizerError> {
            let default = Some(default).filter(|&id| (id as usize) < n);
            Ok(match gguf.opt_usize(key)? {
                Some(id) if id < n => Some(id as u32),
                _ => default,
            })
        };
        let bos = special("tokenizer.ggml.bos_token_id", default_bos)?;
        let eos = special("tokenizer.ggml.eos_token_id", default_eos)?;
        let default_add_bos = bpe_pre.as_ref().is_none_or(|p| p.add_bos);
        let add_bos = gguf
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(default_add_bos);
        let add_eos = gguf
            .opt_bool("tokenizer.ggml.add_eos_token")?
            .unwrap_or(false);
        adjust_attributes(gguf, &tokens, &ids, &mut attrs)?;
        let vocab = Vocab {
            tokens,
            attrs,
            scores,
            ids,
        };
        let algorithm = match bpe_pre {
            Some(pre) => {
                let merges = strings(gguf, "tokenizer.ggml.merges")?;
                Algorithm::Bpe(Box::new(bpe::Bpe::new(
                    &vocab,
                    &merges,
                    pre.splits,
                    pre.ignore_merges,
                )))
            }
            None => Algorithm::Spm {
                add_space_prefix: gguf
                    .opt_bool("tokenizer.ggml.add_space_prefix")?
                    .unwrap_or(true),
            },
        };
        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&id| vocab.has(id, attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN))
            .collect();
        // Equal lengths keep id order (llama.cpp's std::sort leaves their order unspecified; it
        // matters only when two special texts of one length overlap in the input).
        specials.sort_by_key(|&id| std::cmp::Reverse(vocab.tokens[id as usize].len()));
        Ok(Self {
            vocab,
            algorithm,
            specials,
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }

    /// Token ids of `text`. `add_special` adds BOS/EOS where the model's metadata asks for them
    /// (llama.cpp's `add_special`); `parse_special` turns control-token texts such as
    /// `<|im_start|>` into their ids instead of tokenizing them as plain text.
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        Ok(self
            .encode_with_offsets(text, add_special, parse_special)?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// Like [`Tokenizer::encode`], with the byte range of `text` each token came from (empty for
    /// added BOS/EOS). A character split over several byte tokens gives each token its byte.
    /// Whitespace that a special token strips (llama.cpp's lstrip/rstrip, e.g. Phi-3) belongs
    /// to no token.
    pub fn encode_with_offsets(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<(u32, Range<usize>)>, TokenizerError> {
        if let Algorithm::HuggingFace(hf) = &self.algorithm {
            return hf.encode(text, add_special, parse_special);
        }
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.push((self.required(self.bos, "BOS")?, 0..0));
        }
        // SentencePiece's "prefix with a space at the start and after each special token".
        let mut after_special = true;
        for fragment in self.partition(text, parse_special) {
            match fragment {
                Fragment::Token(id, range) => {
                    out.push((id, range));
                    after_special = true;
                }
                Fragment::Text(range) => {
                    let raw = &text[range.clone()];
                    match &self.algorithm {
                        Algorithm::Bpe(bpe) => bpe.tokenize(raw, range.start, &mut out),
                        Algorithm::Spm { add_space_prefix } => {
                            let prefix = *add_space_prefix && after_special;
                            let (escaped, origin) = escape_spaces(raw, range.start, prefix);
                            spm::tokenize(&self.vocab, &escaped, &origin, &mut out)?;
                        }
                        Algorithm::HuggingFace(_) => unreachable!("encoded above"),
                    }
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.push((self.required(self.eos, "EOS")?, text.len()..text.len()));
        }
        Ok(out)
    }

    /// A BOS/EOS the metadata asks to add must exist (llama.cpp aborts otherwise).
    fn required(&self, id: Option<u32>, what: &str) -> Result<u32, TokenizerError> {
        id.ok_or_else(|| {
            TokenizerError::Encode(format!(
                "the model asks to add {what} but has no {what} token in its vocabulary"
            ))
        })
    }

    /// Splits special tokens out of `text` as llama.cpp's `tokenizer_st_partition` does:
    /// for each special token, longest first, every occurrence inside the remaining raw text;
    /// control and unknown tokens only when `parse_special`.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let bytes = text.as_bytes();
        // C's isspace, which llama.cpp's lstrip/rstrip use.
        let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r');
        let mut fragments = vec![Fragment::Text(0..text.len())];
        for &id in &self.specials {
            if !parse_special && self.vocab.has(id, attr::CONTROL | attr::UNKNOWN) {
                continue;
            }
            let lstrip = self.vocab.has(id, attr::LSTRIP);
            let rstrip = self.vocab.has(id, attr::RSTRIP);
            let needle = self.vocab.tokens[id as usize].as_str();
            let mut next = Vec::with_capacity(fragments.len());
            for fragment in fragments {
                let Fragment::Text(range) = fragment else {
                    next.push(fragment);
                    continue;
                };
                let mut start = range.start;
                while let Some(found) = text[start..range.end].find(needle) {
                    let at = start + found;
                    let mut left_end = at;
                    while lstrip && left_end > start && is_space(bytes[left_end - 1]) {
                        left_end -= 1;
                    }
                    if left_end > start {
                        next.push(Fragment::Text(start..left_end));
                    }
                    next.push(Fragment::Token(id, at..at + needle.len()));
                    start = at + needle.len();
                    while rstrip && start < range.end && is_space(bytes[start]) {
                        start += 1;
                    }
                }
                if start < range.end {
                    next.push(Fragment::Text(start..range.end));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// The bytes token `id` stands for (llama.cpp's `token_to_piece` with specials rendered):
    /// byte-level and `<0xXX>` tokens become raw bytes, `▁` a space; unused and undefined
    /// tokens are empty. A piece can be part of a UTF-8 character, hence bytes.
    pub fn token_to_piece(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.vocab.tokens.get(id as usize) else {
            return Vec::new();
        };
        let bpe = match &self.algorithm {
            Algorithm::Bpe(_) => true,
            Algorithm::HuggingFace(hf) => hf.byte_level,
            Algorithm::Spm { .. } => false,
        };
        if self
            .vocab
            .has(id, attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED)
        {
            text.as_bytes().to_vec()
        } else if self.vocab.has(id, attr::NORMAL) {
            if bpe {
                bpe::piece_bytes(text)
            } else {
                text.replace('▁', " ").into_bytes()
            }
        } else if self.vocab.has(id, attr::BYTE) {
            parse_byte_token(text)
                .map(|b| vec![b])
                .unwrap_or_else(|| text.as_bytes().to_vec())
        } else {
            Vec::new()
        }
    }

    /// Concatenated pieces of `ids` as text (invalid UTF-8 replaced); special tokens appear as
    /// their text.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.token_to_piece(id)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The token's text as stored in the vocabulary (`Ġ`/`▁` markers included).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of a token given by its exact vocabulary text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    /// How many tokens the vocabulary holds.
    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// The beginning-of-sequence token (the file's, else llama.cpp's default); `None` when
    /// neither is inside the vocabulary.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token (the file's, else llama.cpp's default); `None` when
    /// neither is inside the vocabulary.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS (the file's `add_bos_token`).
    pub fn adds_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }
}

/// Token texts llama.cpp treats as end-of-generation whatever their stored type: it makes
/// them control tokens (so they are split out only when parsing specials).
const END_OF_GENERATION: [&str; 22] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Fill-in-the-middle tokens: metadata keys, then the texts llama.cpp looks for when none of
/// the keys is set; the one it finds becomes a control token.
const FILL_IN_THE_MIDDLE: [(&[&str], &[&str]); 6] = [
    (
        &[
            "tokenizer.ggml.fim_pre_token_id",
            "tokenizer.ggml.prefix_token_id",
        ],
        &[
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<｜fim▁begin｜>",
            "<PRE>",
            "▁<PRE>",
            "<|code_prefix|>",
            "<|prefix|>",
        ],
    ),
    (
        &[
            "tokenizer.ggml.fim_suf_token_id",
            "tokenizer.ggml.suffix_token_id",
        ],
        &[
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<｜fim▁hole｜>",
            "<SUF>",
            "▁<SUF>",
            "<|code_suffix|>",
            "<|suffix|>",
        ],
    ),
    (
        &[
            "tokenizer.ggml.fim_mid_token_id",
            "tokenizer.ggml.middle_token_id",
        ],
        &[
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<｜fim▁end｜>",
            "<MID>",
            "▁<MID>",
            "<|code_middle|>",
            "<|middle|>",
        ],
    ),
    (
        &["tokenizer.ggml.fim_pad_token_id"],
        &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    ),
    (
        &["tokenizer.ggml.fim_rep_token_id"],
        &[
            "<|fim_repo|>",
            "<|repo_name|>",
            "<fim-repo>",
            "<REPO>",
            "<reponame>",
        ],
    ),
    (&["tokenizer.ggml.fim_sep_token_id"], &["<|file_sep|>"]),
];

/// The attribute changes llama.cpp's `llama_vocab::load` makes after reading the token types:
/// control-looking tokens become control tokens, a few model-specific overrides, and the
/// lstrip/rstrip flags it sets by model name.
fn adjust_attributes(
    gguf: &GgufFile,
    tokens: &[String],
    ids: &HashMap<String, u32>,
    attrs: &mut [u32],
) -> Result<(), TokenizerError> {
    let n = tokens.len();
    for (keys, texts) in FILL_IN_THE_MIDDLE {
        let mut set = false;
        for key in keys {
            set |= gguf.opt_usize(key)?.is_some_and(|id| id < n);
        }
        if set {
            continue;
        }
        let found: Vec<u32> = texts.iter().filter_map(|t| ids.get(*t).copied()).collect();
        match found[..] {
            [] => {}
            [id] => attrs[id as usize] |= attr::CONTROL,
            _ if found
                .iter()
                .all(|&id| attrs[id as usize] & attr::CONTROL != 0) => {}
            _ => {
                // llama.cpp makes whichever its hash map yields first a control token.
                return Err(TokenizerError::Unsupported(format!(
                    "{}: tokenizer.ggml.tokens holds several fill-in-the-middle tokens of one kind ({}) and no `{}`: which one llama.cpp treats as a control token is not reproducible",
                    gguf.path().display(),
                    found
                        .iter()
                        .map(|&id| tokens[id as usize].as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    keys[0]
                )));
            }
        }
    }
    let id = |text: &str| ids.get(text).map(|&id| id as usize);
    for text in END_OF_GENERATION {
        if let Some(i) = id(text) {
            attrs[i] |= attr::CONTROL;
        }
    }
    // gpt-oss: always rendered.
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(i) = id(text) {
            attrs[i] = attr::USER_DEFINED;
        }
    }
    // o200k_harmony and solar-open: "<|end|>" is not an end of generation there.
    let has = |text: &str| id(text).is_some();
    let call = has("<|call|>") || has("<|calls|>");
    if let Some(end) = id("<|end|>")
        && call
        && (has("<|return|>") || has("<|flush|>"))
    {
        attrs[end] = attr::USER_DEFINED;
    }
    // Gemma 4: "</s>" is a normal token.
    if let Some(s) = id("</s>")
        && has("<|tool_response>")
    {
        attrs[s] = attr::NORMAL;
    }
    let name = gguf
        .opt_str("general.name")?
        .unwrap_or("")
        .to_ascii_lowercase();
    let pre = gguf.opt_str("tokenizer.ggml.pre")?.unwrap_or("");
    let arch = gguf.opt_str("general.architecture")?.unwrap_or("");
    let set = |attrs: &mut [u32], text: &str, bits: u32, on: bool| {
        if let Some(i) = id(text) {
            if on {
                attrs[i] |= bits;
            } else {
                attrs[i] &= !bits;
            }
        }
    };
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
        .iter()
        .any(|p| pre.contains(p))
        || ["nomic-bert-moe", "jina-bert-v3"]
            .iter()
            .any(|a| arch.contains(a))
    {
        set(attrs, "<mask>", attr::LSTRIP, true);
    } else if name.contains("phi-3") || name.contains("phi3") {
        for a in attrs.iter_mut() {
            if *a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
                *a |= attr::RSTRIP;
            }
        }
        set(attrs, "</s>", attr::RSTRIP, true);
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            set(attrs, text, attr::RSTRIP, false);
        }
    } else if name.contains("modern-bert") {
        set(attrs, "[MASK]", attr::LSTRIP, true);
    }
    Ok(())
}

/// SentencePiece input escaping: ' ' → '▁' (and an optional leading '▁'), with the map from
/// each byte of the escaped text back to a byte offset of the original (shifted by `base`).
fn escape_spaces(raw: &str, base: usize, prefix: bool) -> (String, Vec<usize>) {
    let mut escaped = String::with_capacity(raw.len() + 8);
    let mut origin = Vec::with_capacity(raw.len() + 9);
    if prefix {
        escaped.push('▁');
        origin.extend([base; 3]);
    }
    for (i, ch) in raw.char_indices() {
        if ch == ' ' {
            // The three bytes of '▁' all stand for the one space.
            escaped.push('▁');
            origin.extend([base + i; 3]);
        } else {
            escaped.push(ch);
            origin.extend((0..ch.len_utf8()).map(|j| base + i + j));
        }
    }
    origin.push(base + raw.len());
    (escaped, origin)
}

fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

fn strings(gguf: &GgufFile, key: &str) -> Result<Vec<String>, TokenizerError> {
    array_of(gguf, key, "strings", |v| match v {
        Value::String(s) => Some(s.clone()),
        _ => None,
    })
}

fn integers(gguf: &GgufFile, key: &str) -> Result<Vec<i64>, TokenizerError> {
    array_of(gguf, key, "integers", |v| match *v {
        Value::I32(x) => Some(x as i64),
        Value::U32(x) => Some(x as i64),
        Value::I8(x) => Some(x as i64),
        Value::U8(x) => Some(x as i64),
        Value::I16(x) => Some(x as i64),
        Value::U16(x) => Some(x as i64),
        Value::I64(x) => Some(x),
        _ => None,
    })
}

fn floats(gguf: &GgufFile, key: &str) -> Result<Vec<f32>, TokenizerError> {
    array_of(gguf, key, "floats", |v| match *v {
        Value::F32(x) => Some(x),
        Value::F64(x) => Some(x as f32),
        _ => None,
    })
}

fn array_of<T>(
    gguf: &GgufFile,
    key: &str,
    what: &str,
    convert: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>, TokenizerError> {
    gguf.get_array(key)?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            convert(v).ok_or_else(|| {
                TokenizerError::Metadata(format!(
                    "{}: `{key}` should hold {what}, element {i} is {:?}",
                    gguf.path().display(),
                    v.value_type()
                ))
            })
        })
        .collect()
}
