//! The tokenizer stored in a GGUF file, reproducing llama.cpp's token ids: special and
//! user-defined tokens are split out of the text first (longest first, control tokens only when
//! parsing specials), then each remaining fragment goes through the vocabulary's algorithm
//! ([`bpe`] for `gpt2` vocabularies, [`spm`] for `llama` ones), and BOS/EOS are added as the
//! file's `add_bos_token`/`add_eos_token` say.

mod bpe;
mod hf;
mod spm;

use crate::gguf::{GgufError, GgufFile};
use candle_core::quantized::gguf_file::Value;
use std::collections::HashMap;
use std::ops::Range;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Hf(#[from] crate::hf::HfError),
    #[error("unsupported tokenizer: {0}")]
    Unsupported(String),
    #[error("tokenizer metadata: {0}")]
    Metadata(String),
    #[error("encoding failed: {0}")]
    Encode(String),
}

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_gguf(code: i64) -> Self {
        match code {
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Normal,
        }
    }
}

/// Token texts, types and scores, with the reverse lookup every algorithm needs.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<TokenType>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    unk: Option<u32>,
}

impl Vocab {
    fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    /// llama.cpp's `byte_to_token` for SentencePiece vocabularies: `<0xXX>`, else the byte as a
    /// one-character token, else the unknown token.
    fn byte_token(&self, byte: u8) -> u32 {
        self.id(&format!("<0x{byte:02X}>"))
            .or_else(|| std::str::from_utf8(&[byte]).ok().and_then(|s| self.id(s)))
            .or(self.unk)
            .unwrap_or(0)
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
    /// Builds the tokenizer described by the `tokenizer.ggml.*` metadata of `gguf`.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self, TokenizerError> {
        let tokens: Vec<String> = strings(gguf, "tokenizer.ggml.tokens")?;
        let n = tokens.len();
        let types: Vec<TokenType> = if gguf.metadata().contains_key("tokenizer.ggml.token_type") {
            integers(gguf, "tokenizer.ggml.token_type")?
                .into_iter()
                .map(TokenType::from_gguf)
                .collect()
        } else {
            vec![TokenType::Normal; n]
        };
        let scores: Vec<f32> = if gguf.metadata().contains_key("tokenizer.ggml.scores") {
            floats(gguf, "tokenizer.ggml.scores")?
        } else {
            vec![0.0; n]
        };
        if types.len() != n || scores.len() != n {
            return Err(TokenizerError::Metadata(format!(
                "{}: {n} tokens but {} token types and {} scores",
                gguf.path().display(),
                types.len(),
                scores.len()
            )));
        }
        let mut ids = HashMap::with_capacity(n);
        for (id, text) in tokens.iter().enumerate().rev() {
            // Duplicate texts: the lowest id wins, as in llama.cpp's token_to_id map.
            ids.insert(text.clone(), id as u32);
        }
        let model = gguf.get_str("tokenizer.ggml.model")?;
        let token_id = |key: &str| -> Result<Option<u32>, TokenizerError> {
            let id = gguf.opt_usize(key)?;
            Ok(id.filter(|&id| id < n).map(|id| id as u32))
        };
        // llama.cpp's defaults when the file does not say.
        let (default_bos, default_eos, default_add_bos) = match model {
            "gpt2" => (11, 11, false),
            _ => (1, 2, true),
        };
        let bos = token_id("tokenizer.ggml.bos_token_id")?.or(Some(default_bos));
        let eos = token_id("tokenizer.ggml.eos_token_id")?.or(Some(default_eos));
        let unk = token_id("tokenizer.ggml.unknown_token_id")?;
        let add_bos = gguf
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(default_add_bos);
        let add_eos = gguf
            .opt_bool("tokenizer.ggml.add_eos_token")?
            .unwrap_or(false);
        let vocab = Vocab {
            tokens,
            types,
            scores,
            ids,
            unk,
        };
        let algorithm = match model {
            "gpt2" => {
                let merges = strings(gguf, "tokenizer.ggml.merges")?;
                let pre = gguf.opt_str("tokenizer.ggml.pre")?.unwrap_or("default");
                Algorithm::Bpe(Box::new(bpe::Bpe::new(&vocab, &merges, pre)?))
            }
            "llama" => Algorithm::Spm {
                add_space_prefix: gguf
                    .opt_bool("tokenizer.ggml.add_space_prefix")?
                    .unwrap_or(true),
            },
            other => {
                return Err(TokenizerError::Unsupported(format!(
                    "{}: tokenizer model `{other}` (supported: gpt2, llama)",
                    gguf.path().display()
                )));
            }
        };
        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&id| {
                matches!(
                    vocab.types[id as usize],
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                ) && !vocab.tokens[id as usize].is_empty()
            })
            .collect();
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
            out.extend(self.bos.map(|id| (id, 0..0)));
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
                        Algorithm::Bpe(bpe) => bpe.tokenize(raw, range.start, &mut out)?,
                        Algorithm::Spm { add_space_prefix } => {
                            let prefix = *add_space_prefix && after_special;
                            let (escaped, origin) = escape_spaces(raw, range.start, prefix);
                            spm::tokenize(&self.vocab, &escaped, &origin, &mut out);
                        }
                        Algorithm::HuggingFace(_) => unreachable!("encoded above"),
                    }
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos.map(|id| (id, text.len()..text.len())));
        }
        Ok(out)
    }

    /// Splits special tokens out of `text` as llama.cpp's `tokenizer_st_partition` does:
    /// for each special token, longest first, every occurrence inside the remaining raw text.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut fragments = vec![Fragment::Text(0..text.len())];
        for &id in &self.specials {
            let kind = self.vocab.types[id as usize];
            if !parse_special && kind != TokenType::UserDefined {
                continue;
            }
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
                    if at > start {
                        next.push(Fragment::Text(start..at));
                    }
                    next.push(Fragment::Token(id, at..at + needle.len()));
                    start = at + needle.len();
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
    /// byte-level and `<0xXX>` tokens become raw bytes, `▁` a space. A piece can be part of a
    /// UTF-8 character, hence bytes.
    pub fn token_to_piece(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.vocab.tokens.get(id as usize) else {
            return Vec::new();
        };
        match (&self.algorithm, self.vocab.types[id as usize]) {
            (_, TokenType::Control | TokenType::UserDefined | TokenType::Unknown) => {
                text.as_bytes().to_vec()
            }
            (Algorithm::Bpe(_), _) => bpe::piece_bytes(text),
            (Algorithm::HuggingFace(hf), _) if hf.byte_level => bpe::piece_bytes(text),
            (Algorithm::Spm { .. } | Algorithm::HuggingFace(_), TokenType::Byte) => {
                parse_byte_token(text)
                    .map(|b| vec![b])
                    .unwrap_or_else(|| text.as_bytes().to_vec())
            }
            (Algorithm::Spm { .. } | Algorithm::HuggingFace(_), _) => {
                text.replace('▁', " ").into_bytes()
            }
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

    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS (the file's `add_bos_token`).
    pub fn adds_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }
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
