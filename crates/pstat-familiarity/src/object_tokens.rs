//! Fam(s) of Appendix H: the mean next-token probability p(t_i | t_<i) over the statement's
//! object tokens O(s) — the tokens covering the subject and object strings — read from the
//! final-layer logits on the statement as the model reads it plainly (BOS + statement).
//!
//! Locating O(s): the subject is the first case-insensitive occurrence of object_1 in the
//! text, the object the last occurrence of object_2 (the templates put it last). A token
//! belongs to O(s) when its byte range overlaps either span at all, so a token straddling a
//! boundary (e.g. "ĠParis." merged with punctuation, or a leading space piece) counts as an
//! object token: it carries part of the entity. The first token of a sequence has no
//! conditional probability and is never counted.

use std::ops::Range;

/// Byte span of the first case-insensitive occurrence of `needle` in `text` at or after
/// `from`, or of the last occurrence when `last` is set.
fn find_span(text: &str, needle: &str, last: bool) -> Option<Range<usize>> {
    if needle.is_empty() {
        return None;
    }
    let hay = text.to_lowercase();
    let pat = needle.to_lowercase();
    // Lower-casing can change byte lengths for a few scripts; fall back to exact search then.
    let (hay, pat) = if hay.len() == text.len() && pat.len() == needle.len() {
        (hay, pat)
    } else {
        (text.to_string(), needle.to_string())
    };
    let start = if last {
        hay.rfind(&pat)?
    } else {
        hay.find(&pat)?
    };
    Some(start..start + pat.len())
}

/// Byte spans of the subject and the object in `text` (those found).
pub fn entity_spans(text: &str, subject: &str, object: &str) -> Vec<Range<usize>> {
    let subject_span = find_span(text, subject, false);
    let object_span = find_span(text, object, true)
        .filter(|o| subject_span.as_ref().is_none_or(|s| o.start >= s.end));
    subject_span.into_iter().chain(object_span).collect()
}

/// Indices of the tokens whose byte ranges (into the statement text) overlap any span.
/// `token_spans[i]` is token i's byte range; special tokens such as BOS have empty ranges.
pub fn object_token_indices(token_spans: &[Range<usize>], spans: &[Range<usize>]) -> Vec<usize> {
    token_spans
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            *i > 0 && t.start < t.end && spans.iter().any(|s| t.start < s.end && s.start < t.end)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Fam(s): the mean of p(t_i | t_<i) over the object tokens i, given those probabilities;
/// `None` when the statement has no object token (e.g. an entity the text does not contain
/// verbatim).
pub fn familiarity(object_token_probs: &[f32]) -> Option<f64> {
    (!object_token_probs.is_empty()).then(|| {
        object_token_probs
            .iter()
            .map(|&p| f64::from(p))
            .sum::<f64>()
            / object_token_probs.len() as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_case_insensitive_and_object_is_last() {
        let text = "Hoagy is a synonym of an Italian sandwich.";
        let spans = entity_spans(text, "hoagy", "Italian sandwich");
        assert_eq!(&text[spans[0].clone()], "Hoagy");
        assert_eq!(&text[spans[1].clone()], "Italian sandwich");
        let text = "The city of Singapore is located in Singapore.";
        let spans = entity_spans(text, "Singapore", "Singapore");
        assert_eq!(
            spans,
            vec![12..21, 36..45],
            "object_1 == object_2 gives two spans"
        );
    }

    #[test]
    fn straddling_tokens_count_and_bos_never_does() {
        // "<bos>", "The", " city", " of", " Paris", "." ; object span covers "Paris".
        let tokens = [0..0, 0..3, 3..8, 8..11, 11..17, 17..18];
        let paris = 12..17;
        assert_eq!(
            object_token_indices(&tokens, std::slice::from_ref(&paris)),
            vec![4]
        );
        assert_eq!(familiarity(&[0.5]), Some(0.5));
        assert_eq!(familiarity(&[0.5, 0.25]), Some(0.375));
        assert_eq!(familiarity(&[]), None);
    }
}
