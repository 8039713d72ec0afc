//! Byte-level BPE for `tokenizer.ggml.model = gpt2` vocabularies, as llama.cpp's
//! `llm_tokenizer_bpe_session` does it: the pre-tokenizer cuts the fragment into words
//! ([`super::pre`]), each word starts as one symbol per byte, and the adjacent pair with the
//! lowest merge rank (ties: leftmost) is merged until no pair is in the merge list.
//!
//! llama.cpp works on the GPT-2 byte-to-character encoding of the text; the encoding is one
//! character per byte and bijective, so this works on raw bytes with the vocabulary decoded
//! once, which gives the same merges and lets every token keep its source byte range.

use super::Vocab;
use super::pre::{self, Split};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;

pub(super) struct Bpe {
    /// Raw bytes of every token, and of merge parts that are not tokens, to an id; ids below
    /// `n_tokens` are the token ids.
    pieces: HashMap<Vec<u8>, u32>,
    n_tokens: u32,
    /// Rank (line in `tokenizer.ggml.merges`) of each mergeable pair of piece ids.
    ranks: HashMap<(u32, u32), u32>,
    splits: &'static [Split],
    /// llama.cpp's `ignore_merges` (Llama 3): a word that is a token is taken whole.
    ignore_merges: bool,
}

/// A candidate merge: (rank, left, right, left length, right length), smallest rank then
/// leftmost first; the lengths detect entries made stale by a later merge.
type Bigram = Reverse<(u32, usize, usize, usize, usize)>;

/// A live symbol: a byte range of the word, linked to its neighbours; `len == 0` once merged.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    next: Option<usize>,
    prev: Option<usize>,
}

impl Bpe {
    pub(super) fn new(
        vocab: &Vocab,
        merges: &[String],
        splits: &'static [Split],
        ignore_merges: bool,
    ) -> Self {
        let mut pieces: HashMap<Vec<u8>, u32> = HashMap::with_capacity(vocab.tokens.len());
        for (id, text) in vocab.tokens.iter().enumerate() {
            // A token with a character outside the byte alphabet (an added token such as
            // "<|im start|>" with a real space) never equals an encoded word or merge.
            if let Some(bytes) = decode_byte_level(text) {
                pieces.entry(bytes).or_insert(id as u32);
            }
        }
        let n_tokens = vocab.tokens.len() as u32;
        let mut ranks = HashMap::with_capacity(merges.len());
        let mut next_part = n_tokens;
        for (rank, merge) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte; a merge without one
            // never applies.
            let Some(at) = merge.bytes().skip(1).position(|b| b == b' ').map(|i| i + 1) else {
                continue;
            };
            let (Some(left), Some(right)) = (
                decode_byte_level(&merge[..at]),
                decode_byte_level(&merge[at + 1..]),
            ) else {
                continue;
            };
            let mut intern = |bytes: Vec<u8>| {
                *pieces.entry(bytes).or_insert_with(|| {
                    next_part += 1;
                    next_part - 1
                })
            };
            let pair = (intern(left), intern(right));
            ranks.entry(pair).or_insert(rank as u32);
        }
        Self {
            pieces,
            n_tokens,
            ranks,
            splits,
            ignore_merges,
        }
    }

    fn token(&self, bytes: &[u8]) -> Option<u32> {
        self.pieces
            .get(bytes)
            .copied()
            .filter(|&id| id < self.n_tokens)
    }

    fn rank(&self, word: &[u8], left: Symbol, right: Symbol) -> Option<u32> {
        let l = *self.pieces.get(&word[left.start..left.start + left.len])?;
        let r = *self
            .pieces
            .get(&word[right.start..right.start + right.len])?;
        self.ranks.get(&(l, r)).copied()
    }

    /// Tokenizes one raw-text fragment; offsets are byte ranges shifted by `base`.
    pub(super) fn tokenize(&self, text: &str, base: usize, out: &mut Vec<(u32, Range<usize>)>) {
        for word in pre::split(text, self.splits) {
            self.tokenize_word(&text.as_bytes()[word.clone()], base + word.start, out);
        }
    }

    fn tokenize_word(&self, word: &[u8], base: usize, out: &mut Vec<(u32, Range<usize>)>) {
        if self.ignore_merges
            && let Some(id) = self.token(word)
        {
            out.push((id, base..base + word.len()));
            return;
        }
        let n = word.len();
        let mut symbols: Vec<Symbol> = (0..n)
            .map(|i| Symbol {
                start: i,
                len: 1,
                prev: i.checked_sub(1),
                next: (i + 1 < n).then_some(i + 1),
            })
            .collect();
        let mut queue = BinaryHeap::new();
        let push = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: Option<usize>| {
            let Some(left) = left else { return };
            let Some(right) = symbols[left].next else {
                return;
            };
            let (l, r) = (symbols[left], symbols[right]);
            if let Some(rank) = self.rank(word, l, r) {
                queue.push(Reverse((rank, left, right, l.len, r.len)));
            }
        };
        for i in 0..n {
            push(&mut queue, &symbols, Some(i));
        }
        while let Some(Reverse((_, left, right, left_len, right_len))) = queue.pop() {
            let (l, r) = (symbols[left], symbols[right]);
            if l.len == 0 || r.len == 0 || l.len != left_len || r.len != right_len {
                continue;
            }
            symbols[left].len += r.len;
            symbols[right].len = 0;
            symbols[left].next = r.next;
            if let Some(next) = r.next {
                symbols[next].prev = Some(left);
            }
            push(&mut queue, &symbols, l.prev);
            push(&mut queue, &symbols, Some(left));
        }
        for sym in symbols.iter().filter(|s| s.len > 0) {
            let range = sym.start..sym.start + sym.len;
            match self.token(&word[range.clone()]) {
                Some(id) => out.push((id, base + range.start..base + range.end)),
                None => {
                    // llama.cpp looks each byte of the encoded symbol up as a one-byte token and
                    // drops the bytes that are none; only printable ASCII encodes as itself.
                    for at in range {
                        let byte = word[at];
                        if let Some(id) = matches!(byte, 0x21..=0x7E)
                            .then(|| self.token(&[byte]))
                            .flatten()
                        {
                            out.push((id, base + at..base + at + 1));
                        }
                    }
                }
            }
        }
    }
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

/// The byte a character of the byte-level alphabet stands for.
fn alphabet_byte(c: char) -> Option<u8> {
    match c as u32 {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(c as u32 as u8),
        0x100..=0x143 => byte_chars().iter().position(|&b| b == c).map(|b| b as u8),
        _ => None,
    }
}

/// The raw bytes of a byte-level token text, or None when it has a character outside the
/// alphabet.
fn decode_byte_level(text: &str) -> Option<Vec<u8>> {
    text.chars().map(alphabet_byte).collect()
}

/// Turns a byte-level token text back into its bytes (llama.cpp's `token_to_piece` for BPE).
pub(super) fn piece_bytes(token: &str) -> Vec<u8> {
    token
        .chars()
        .flat_map(|c| match alphabet_byte(c) {
            Some(byte) => vec![byte],
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
        assert_eq!(decode_byte_level("a b"), None);
        for b in 0..=255u8 {
            assert_eq!(alphabet_byte(byte_chars()[b as usize]), Some(b));
        }
    }
}
