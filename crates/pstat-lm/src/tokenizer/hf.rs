//! The tokenizer of a Hugging Face folder: its `tokenizer.json`, run by the `tokenizers` crate
//! (the library behind transformers' fast tokenizers, so the ids are exactly those a Hugging
//! Face user gets). BOS/EOS come from `tokenizer_config.json`, else config.json's ids.

use super::{Algorithm, Tokenizer, TokenizerError, Vocab, attr};
use crate::hf::{self, HfError};
use serde_json::Value as Json;
use std::ops::Range;
use std::path::Path;
use tokenizers::DecoderWrapper;

pub(super) struct HfTokenizer {
    /// Splits special tokens out of the text (`parse_special`).
    parsing: tokenizers::Tokenizer,
    /// Encodes special-token texts as plain text; user-defined added tokens still split.
    literal: tokenizers::Tokenizer,
    /// Token texts are byte-level (`Ġ` for a space) rather than SentencePiece (`▁`, `<0xXX>`).
    pub(super) byte_level: bool,
}

impl HfTokenizer {
    pub(super) fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<(u32, Range<usize>)>, TokenizerError> {
        let tokenizer = if parse_special {
            &self.parsing
        } else {
            &self.literal
        };
        let encoding = tokenizer
            .encode(text, add_special)
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(encoding
            .get_ids()
            .iter()
            .zip(encoding.get_offsets())
            .map(|(&id, &(start, end))| (id, start..end))
            .collect())
    }
}

impl Tokenizer {
    /// The tokenizer of a GGUF file or of a Hugging Face folder.
    pub fn load(path: &Path) -> Result<Self, TokenizerError> {
        if hf::is_folder(path) {
            Self::from_hf_folder(path)
        } else {
            Self::from_gguf(&crate::gguf::GgufFile::open(path)?)
        }
    }

    /// The tokenizer of the Hugging Face folder `dir` (`tokenizer.json`).
    pub fn from_hf_folder(dir: &Path) -> Result<Self, TokenizerError> {
        let path = dir.join(hf::TOKENIZER);
        if !path.is_file() {
            return Err(HfError::Missing(path).into());
        }
        let parsing = tokenizers::Tokenizer::from_file(&path).map_err(|e| {
            TokenizerError::Unsupported(format!("{}: cannot be loaded: {e}", path.display()))
        })?;
        let mut literal = parsing.clone();
        literal.set_encode_special_tokens(true);
        let byte_level = matches!(parsing.get_decoder(), Some(DecoderWrapper::ByteLevel(_)));
        let ids = parsing.get_vocab(true);
        let n = ids.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut tokens = vec![String::new(); n];
        let mut attrs = vec![attr::UNUSED; n];
        for (text, &id) in &ids {
            tokens[id as usize] = text.clone();
            attrs[id as usize] = if !byte_level && super::parse_byte_token(text).is_some() {
                attr::BYTE
            } else {
                attr::NORMAL
            };
        }
        for (id, added) in parsing.get_added_tokens_decoder() {
            attrs[id as usize] = if added.special {
                attr::CONTROL
            } else {
                attr::USER_DEFINED
            };
        }
        let config = |name: &str| -> Result<Option<Json>, TokenizerError> {
            let file = dir.join(name);
            Ok(if file.is_file() {
                Some(hf::read_json(&file)?)
            } else {
                None
            })
        };
        let tokenizer_config = config(hf::TOKENIZER_CONFIG)?;
        let model_config = config(hf::CONFIG)?;
        let special = |field: &str| -> Option<u32> {
            let by_text = tokenizer_config.as_ref().and_then(|c| {
                let value = c.get(field)?;
                let text = value
                    .as_str()
                    .or_else(|| value.get("content").and_then(Json::as_str))?;
                ids.get(text).copied()
            });
            let by_id = || {
                let value = model_config.as_ref()?.get(format!("{field}_id"))?;
                let id = value
                    .as_u64()
                    .or_else(|| value.get(0).and_then(Json::as_u64))?;
                Some(id as u32).filter(|&id| (id as usize) < n)
            };
            by_text.or_else(by_id)
        };
        let bos = special("bos_token");
        let eos = special("eos_token");
        let hf = HfTokenizer {
            parsing,
            literal,
            byte_level,
        };
        // What the post-processor adds, as the GGUF flags would say it.
        let probe = hf.encode("a", true, true)?;
        let add_bos = bos.is_some() && probe.first().map(|t| t.0) == bos;
        let add_eos = eos.is_some() && probe.last().map(|t| t.0) == eos && probe.len() > 1;
        Ok(Self {
            vocab: Vocab {
                tokens,
                attrs,
                scores: vec![0.0; n],
                ids,
            },
            algorithm: Algorithm::HuggingFace(Box::new(hf)),
            specials: Vec::new(),
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }
}
