//! SentencePiece-style tokenization as llama.cpp does it for `tokenizer.ggml.model = llama`
//! vocabularies (Gemma, Llama 2, Mistral): start from UTF-8 characters, repeatedly merge the adjacent pair whose
//! concatenation is a token with the highest score (ties: leftmost), then emit each symbol as a
//! token, or as `<0xXX>` byte tokens when it is a single character outside the vocabulary.
//! (llama.cpp also keeps a merge history to re-split symbols that are not tokens, but a merge
//! only ever forms a token, so only unmerged characters can miss and the history is never used.)

use super::{TokenizerError, Vocab};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Range;

/// A run of the text (byte range), linked to its neighbours; `len == 0` once merged away.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of symbols `left` and `right`. `size` detects stale entries whose symbols
/// changed after the entry was queued.
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenizes one raw-text fragment (already without special tokens). `text` is the fragment
/// with spaces escaped to `▁`; `origin[i]` maps byte `i` of `text` (and `text.len()`) to a byte
/// offset in the caller's string, so every token carries its source range.
pub(super) fn tokenize(
    vocab: &Vocab,
    text: &str,
    origin: &[usize],
    out: &mut Vec<(u32, Range<usize>)>,
) -> Result<(), TokenizerError> {
    if text.is_empty() {
        return Ok(());
    }
    let mut symbols: Vec<Symbol> = Vec::new();
    for (i, (start, ch)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: ch.len_utf8(),
            prev: i.checked_sub(1),
            next: Some(i + 1),
        });
    }
    if let Some(last) = symbols.last_mut() {
        last.next = None;
    }
    let mut session = Session {
        vocab,
        text,
        symbols,
        queue: BinaryHeap::new(),
    };
    for i in 1..session.symbols.len() {
        session.try_add_bigram(Some(i - 1), Some(i));
    }
    while let Some(bigram) = session.queue.pop() {
        let (left, right) = (session.symbols[bigram.left], session.symbols[bigram.right]);
        if left.len == 0 || right.len == 0 || left.len + right.len != bigram.size {
            continue;
        }
        session.symbols[bigram.left].len += right.len;
        session.symbols[bigram.right].len = 0;
        session.symbols[bigram.left].next = right.next;
        if let Some(next) = right.next {
            session.symbols[next].prev = Some(bigram.left);
        }
        session.try_add_bigram(left.prev, Some(bigram.left));
        session.try_add_bigram(Some(bigram.left), right.next);
    }
    let mut at = Some(0);
    while let Some(i) = at {
        session.emit(i, origin, out)?;
        at = session.symbols[i].next;
    }
    Ok(())
}

struct Session<'a> {
    vocab: &'a Vocab,
    text: &'a str,
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

impl<'a> Session<'a> {
    fn piece(&self, start: usize, len: usize) -> &'a str {
        &self.text[start..start + len]
    }

    fn try_add_bigram(&mut self, left: Option<usize>, right: Option<usize>) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (self.symbols[left], self.symbols[right]);
        let piece = self.piece(l.start, l.len + r.len);
        let Some(id) = self.vocab.id(piece) else {
            return;
        };
        self.queue.push(Bigram {
            left,
            right,
            score: self.vocab.score(id),
            size: piece.len(),
        });
    }

    fn emit(
        &self,
        i: usize,
        origin: &[usize],
        out: &mut Vec<(u32, Range<usize>)>,
    ) -> Result<(), TokenizerError> {
        let sym = self.symbols[i];
        let piece = self.piece(sym.start, sym.len);
        match self.vocab.id(piece) {
            Some(id) => out.push((id, origin[sym.start]..origin[sym.start + sym.len])),
            None => {
                for (k, byte) in piece.bytes().enumerate() {
                    let at = sym.start + k;
                    out.push((self.vocab.byte_token(byte)?, origin[at]..origin[at + 1]));
                }
            }
        }
        Ok(())
    }
}
