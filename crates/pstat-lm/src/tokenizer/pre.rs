//! BPE pre-tokenization: the pieces llama.cpp's `unicode_regex_split` cuts a text fragment into
//! before merging, for the `tokenizer.ggml.pre` types pstat reproduces. llama.cpp matches the
//! GPT-2, Llama 3 and Qwen2 regexes with hand-written matchers rather than a regex engine; these
//! are ports of them, quirks included, over llama.cpp's own codepoint table (so `\p{L}`,
//! `\p{N}` and `\s` mean what they mean there, whatever Unicode release Rust ships).

use super::unicode_data::{CATEGORY_RANGES, WHITESPACE};
use std::ops::Range;

const NUMBER: u8 = 0x02;
const LETTER: u8 = 0x04;
const MARK: u8 = 0x10;

/// llama.cpp's `unicode_cpt_flags` for one codepoint; all zero outside the fragment.
#[derive(Clone, Copy, Default)]
struct Flags {
    category: u8,
    whitespace: bool,
}

impl Flags {
    fn of(c: char) -> Self {
        let cp = c as u32;
        let i = CATEGORY_RANGES.partition_point(|&(start, _)| start <= cp) - 1;
        Self {
            category: CATEGORY_RANGES[i].1,
            whitespace: WHITESPACE.contains(&cp),
        }
    }

    fn number(self) -> bool {
        self.category & NUMBER != 0
    }

    fn letter(self) -> bool {
        self.category & LETTER != 0
    }

    fn mark(self) -> bool {
        self.category & MARK != 0
    }

    /// `as_uint() != 0`: true for every codepoint inside the fragment.
    fn any(self) -> bool {
        self.category != 0 || self.whitespace
    }
}

/// One regex of a pre-tokenizer, applied to every piece the previous one left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// with D = `max_digits` (Llama 3: 3, Qwen2: 1); `marks` puts `\p{M}` beside `\p{L}`
    /// (Qwen 3.5).
    Words { max_digits: usize, marks: bool },
    /// `\p{N}`: every number codepoint is a piece of its own.
    Digits,
}

/// The codepoints of a fragment with their flags and byte offsets.
struct Text {
    cpts: Vec<char>,
    flags: Vec<Flags>,
    /// Byte offset of each codepoint, plus the text length.
    bytes: Vec<usize>,
}

/// A window `[ini, end)` of the text: llama.cpp's `_get_cpt`/`_get_flags`, which see nothing
/// outside the piece being split.
struct Window<'a> {
    text: &'a Text,
    ini: usize,
    end: usize,
}

impl Window<'_> {
    fn cpt(&self, pos: usize) -> Option<char> {
        (self.ini <= pos && pos < self.end).then(|| self.text.cpts[pos])
    }

    fn flags(&self, pos: usize) -> Flags {
        if self.ini <= pos && pos < self.end {
            self.text.flags[pos]
        } else {
            Flags::default()
        }
    }

    fn is(&self, pos: usize, c: char) -> bool {
        self.cpt(pos) == Some(c)
    }

    fn is_cr_or_lf(&self, pos: usize) -> bool {
        matches!(self.cpt(pos), Some('\r' | '\n'))
    }
}

/// llama.cpp's `_add_token`: closes the piece that ends at `end` (if not empty).
struct Pieces<'a> {
    out: &'a mut Vec<Range<usize>>,
    prev_end: usize,
}

impl Pieces<'_> {
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(self.prev_end..end);
        }
        self.prev_end = end;
        len
    }
}

/// The byte ranges of `text` that BPE merges separately, after applying `splits` in order.
pub(super) fn split(text: &str, splits: &[Split]) -> Vec<Range<usize>> {
    let cpts: Vec<char> = text.chars().collect();
    let mut bytes: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    bytes.push(text.len());
    let text = Text {
        flags: cpts.iter().map(|&c| Flags::of(c)).collect(),
        cpts,
        bytes,
    };
    let mut pieces: Vec<Range<usize>> = std::iter::once(0..text.cpts.len()).collect();
    for &step in splits {
        let mut next = Vec::with_capacity(pieces.len() * 2);
        for piece in pieces {
            let window = Window {
                text: &text,
                ini: piece.start,
                end: piece.end,
            };
            let mut out = Pieces {
                out: &mut next,
                prev_end: piece.start,
            };
            match step {
                Split::Gpt2 => gpt2(&window, &mut out),
                Split::Words { max_digits, marks } => words(&window, &mut out, max_digits, marks),
                Split::Digits => digits(&window, &mut out),
            }
        }
        pieces = next;
    }
    pieces
        .into_iter()
        .map(|r| text.bytes[r.start]..text.bytes[r.end])
        .collect()
}

/// `'s|'t|'m|'d` (2 codepoints) or `'re|'ve|'ll` (3), case-sensitively unless `ignore_case`.
fn contraction(w: &Window, pos: usize, ignore_case: bool) -> Option<usize> {
    if !w.is(pos, '\'') || pos + 1 >= w.end {
        return None;
    }
    let lower = |c: Option<char>| {
        let c = c?;
        Some(if ignore_case {
            c.to_ascii_lowercase()
        } else {
            c
        })
    };
    let next = lower(w.cpt(pos + 1));
    if matches!(next, Some('s' | 't' | 'm' | 'd')) {
        return Some(pos + 2);
    }
    if pos + 2 < w.end {
        let after = lower(w.cpt(pos + 2));
        if matches!(
            (next, after),
            (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))
        ) {
            return Some(pos + 3);
        }
    }
    None
}

/// llama.cpp's `unicode_regex_split_custom_gpt2`.
fn gpt2(w: &Window, out: &mut Pieces) {
    let mut pos = w.ini;
    while pos < w.end {
        if let Some(end) = contraction(w, pos, false) {
            pos += out.add(end);
            continue;
        }
        let space = w.is(pos, ' ');
        let mut f2 = if space {
            w.flags(pos + 1)
        } else {
            w.flags(pos)
        };
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        let classes: [fn(Flags) -> bool; 3] = [Flags::letter, Flags::number, |f| {
            !(f.whitespace || f.letter() || f.number()) && f.any()
        }];
        if let Some(class) = classes.into_iter().find(|class| class(f2)) {
            pos += usize::from(space);
            while class(f2) {
                pos += 1;
                f2 = w.flags(pos);
            }
            out.add(pos);
            continue;
        }
        let spaces = (pos..).take_while(|&p| w.flags(p).whitespace).count();
        // `\s+(?!\S)`: a run of spaces before a non-space leaves its last one to that word.
        if spaces > 1 && w.cpt(pos + spaces).is_some() {
            pos += spaces - 1;
            out.add(pos);
            continue;
        }
        if spaces > 0 {
            pos += spaces;
            out.add(pos);
            continue;
        }
        pos += 1;
        out.add(pos);
    }
}

/// llama.cpp's `unicode_regex_split_custom_llama3` (`max_digits` 3), `_qwen2` (1) and `_qwen35`
/// (1, `marks`).
fn words(w: &Window, out: &mut Pieces, max_digits: usize, marks: bool) {
    let word = |f: Flags| f.letter() || (marks && f.mark());
    let mut pos = w.ini;
    while pos < w.end {
        let flags = w.flags(pos);
        if let Some(end) = contraction(w, pos, true) {
            pos += out.add(end);
            continue;
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if !(w.is_cr_or_lf(pos) || flags.number()) && (word(flags) || word(w.flags(pos + 1))) {
            pos += 1;
            while word(w.flags(pos)) {
                pos += 1;
            }
            out.add(pos);
            continue;
        }
        // `\p{N}{1,max_digits}`
        if flags.number() {
            let mut ini = pos;
            while w.flags(pos).number() {
                pos += 1;
                if pos - ini >= max_digits {
                    out.add(pos);
                    ini = pos;
                }
            }
            out.add(pos);
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama.cpp tests the current codepoint's flags, not the
        // next one's, for "is inside the fragment")
        let space = w.is(pos, ' ');
        let mut f2 = if space { w.flags(pos + 1) } else { flags };
        let other = |f: Flags| !(f.whitespace || word(f) || f.number());
        if other(f2) && flags.any() {
            pos += usize::from(space);
            while other(f2) && f2.any() {
                pos += 1;
                f2 = w.flags(pos);
            }
            while w.is_cr_or_lf(pos) {
                pos += 1;
            }
            out.add(pos);
            continue;
        }
        let mut spaces = 0;
        let mut last_cr_or_lf_end = None;
        while w.flags(pos + spaces).whitespace {
            if w.is_cr_or_lf(pos + spaces) {
                last_cr_or_lf_end = Some(pos + spaces + 1);
            }
            spaces += 1;
        }
        // `\s*[\r\n]+`
        if let Some(end) = last_cr_or_lf_end {
            pos = end;
            out.add(pos);
            continue;
        }
        // `\s+(?!\S)`
        if spaces > 1 && w.cpt(pos + spaces).is_some() {
            pos += spaces - 1;
            out.add(pos);
            continue;
        }
        if spaces > 0 {
            pos += spaces;
            out.add(pos);
            continue;
        }
        pos += 1;
        out.add(pos);
    }
}

/// `\p{N}` as llama.cpp's std::regex fallback applies it: each number codepoint is a match, the
/// text between matches a piece of its own.
fn digits(w: &Window, out: &mut Pieces) {
    for pos in w.ini..w.end {
        if w.flags(pos).number() {
            out.add(pos);
            out.add(pos + 1);
        }
    }
    out.add(w.end);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces<'a>(text: &'a str, splits: &[Split]) -> Vec<&'a str> {
        split(text, splits).into_iter().map(|r| &text[r]).collect()
    }

    const LLAMA3: Split = Split::Words {
        max_digits: 3,
        marks: false,
    };

    #[test]
    fn gpt2_keeps_the_last_space_for_the_next_word() {
        assert_eq!(
            pieces("Hello  world's 123!!", &[Split::Gpt2]),
            ["Hello", " ", " world", "'s", " 123", "!!"]
        );
    }

    #[test]
    fn llama3_groups_digits_by_three_and_newlines_with_spaces() {
        assert_eq!(
            pieces("I'LL pay 1234567 \n\n ok", &[LLAMA3]),
            ["I", "'LL", " pay", " ", "123", "456", "7", " \n\n", " ok"]
        );
    }

    #[test]
    fn digits_stand_alone_before_gpt2() {
        assert_eq!(
            pieces("a12 b", &[Split::Digits, Split::Gpt2]),
            ["a", "1", "2", " b"]
        );
    }

    #[test]
    fn codepoint_table_matches_llama_cpp_classes() {
        assert!(Flags::of('é').letter() && Flags::of('東').letter());
        assert!(Flags::of('٣').number() && Flags::of('²').number());
        assert!(Flags::of('\u{3000}').whitespace && !Flags::of('\u{200b}').whitespace);
        assert!(Flags::of('\u{0301}').mark());
    }
}
