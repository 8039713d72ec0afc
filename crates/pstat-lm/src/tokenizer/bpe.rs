//! Byte-level BPE for `tokenizer.ggml.model = gpt2` vocabularies, built on the `tokenizers`
//! crate (candle-core already depends on it). llama.cpp picks its pre-tokenizer regexes from
//! `tokenizer.ggml.pre`; the ones implemented here are reproduced with `tokenizers`
//! pre-tokenizers and were checked id-for-id against llama.cpp (fixtures in tests/).

use super::{TokenizerError, Vocab};
use std::ops::Range;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;

/// `tokenizer.ggml.pre` values supported, with the pre-tokenization llama.cpp applies:
/// `smollm` (also StarCoder, Refact): each digit alone, then the GPT-2 regex; `gpt2` and
/// `default`: the GPT-2 regex alone.
const SUPPORTED_PRE: [&str; 5] = ["smollm", "starcoder", "refact", "gpt2", "default"];

pub(super) struct Bpe {
    inner: tokenizers::Tokenizer,
}

impl Bpe {
    pub(super) fn new(vocab: &Vocab, merges: &[String], pre: &str) -> Result<Self, TokenizerError> {
        let split_digits = match pre {
            "smollm" | "starcoder" | "refact" => true,
            "gpt2" | "default" => false,
            other => {
                return Err(TokenizerError::Unsupported(format!(
                    "BPE pre-tokenizer `{other}` (supported: {})",
                    SUPPORTED_PRE.join(", ")
                )));
            }
        };
        let token_ids: tokenizers::models::bpe::Vocab = vocab
            .tokens
            .iter()
            .enumerate()
            .map(|(id, text)| (text.clone(), id as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|m| split_merge(m))
            .collect::<Result<Vec<_>, _>>()?;
        let model = BPE::builder()
            .vocab_and_merges(token_ids, merges)
            .build()
            .map_err(|e| TokenizerError::Unsupported(format!("BPE vocabulary: {e}")))?;
        // trim_offsets = false keeps a token's leading space inside its offsets, so the offsets
        // of consecutive tokens tile the text.
        let byte_level = ByteLevel::new(false, false, true);
        let pre_tokenizer: PreTokenizerWrapper = if split_digits {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        let mut inner = tokenizers::Tokenizer::new(model);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        Ok(Self { inner })
    }

    /// Tokenizes one raw-text fragment; offsets are byte ranges shifted by `base`.
    pub(super) fn tokenize(
        &self,
        text: &str,
        base: usize,
        out: &mut Vec<(u32, Range<usize>)>,
    ) -> Result<(), TokenizerError> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        out.extend(
            encoding
                .get_ids()
                .iter()
                .zip(encoding.get_offsets())
                .map(|(&id, &(start, end))| (id, base + start..base + end)),
        );
        Ok(())
    }
}

/// A GGUF merge is "left right"; llama.cpp splits at the first space after the first byte, so a
/// left part that is itself a space survives.
fn split_merge(merge: &str) -> Result<(String, String), TokenizerError> {
    merge
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == ' ')
        .map(|(i, _)| (merge[..i].to_string(), merge[i + 1..].to_string()))
        .ok_or_else(|| TokenizerError::Unsupported(format!("merge without a space: {merge:?}")))
}

/// GPT-2's byte-level alphabet: byte `b` is written as `BYTE_CHARS[b]` in token texts.
fn byte_chars() -> [char; 256] {
    let mut chars = ['\0'; 256];
    let mut extra = 0u32;
    for (b, slot) in chars.iter_mut().enumerate() {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        *slot = if printable {
            char::from(b as u8)
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("U+0100..U+0143 are chars")
        };
    }
    chars
}

/// Turns a byte-level token text back into its bytes (llama.cpp's `token_to_piece` for BPE).
pub(super) fn piece_bytes(token: &str) -> Vec<u8> {
    let chars = byte_chars();
    token
        .chars()
        .flat_map(|c| match chars.iter().position(|&b| b == c) {
            Some(byte) => vec![byte as u8],
            // Not part of the byte alphabet (possible in hand-made vocabularies): keep as UTF-8.
            None => c.to_string().into_bytes(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_round_trips_space_and_newline() {
        assert_eq!(piece_bytes("Ġhello"), b" hello");
        assert_eq!(piece_bytes("Ċ"), b"\n");
        assert_eq!(piece_bytes("Ã©"), "é".as_bytes());
    }

    #[test]
    fn merges_split_after_the_first_character() {
        assert_eq!(split_merge("Ġ t").unwrap(), ("Ġ".into(), "t".into()));
        assert_eq!(split_merge("  x").unwrap(), (" ".into(), "x".into()));
        assert!(split_merge("ab").is_err());
    }
}
