//! The sentence templates of the three domains, exactly as the upstream Trilemma generator
//! wrote the real data (notes §1.4), and their inverse: [`parse`] recovers subject, object,
//! negation and relation from a sentence, so every shipped statement can be checked against
//! the template it claims to follow.
//!
//! The word templates need English morphology: an indefinite article chosen by sound ("an
//! hour", "a unicorn", "a one"), dropped when the object's first word looks plural. Upstream
//! used Python `inflect` 7.3.1 for both; [`indefinite_article`] and [`looks_plural`] are our
//! own rules, tested to reproduce all 8,500 bundled word statements and inflect's verdicts
//! over a committed dictionary fixture.

use pstat_data::error::UnknownName;
use pstat_data::statement::Domain;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The relation a statement asserts; the upstream `category` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// City Locations: "The city of X is located in Y."
    Cities,
    /// Medical Indications: "X is indicated for the treatment of Y."
    Indications,
    /// Word Definitions: "X is" followed by Y with its article (if any).
    Instances,
    /// Word Definitions: "X is a type of" followed by Y with its article (if any).
    Types,
    /// Word Definitions: "X is a synonym of" followed by Y with its article (if any).
    Synonyms,
}

impl Relation {
    /// Every relation, domain by domain.
    pub const ALL: [Relation; 5] = [
        Relation::Cities,
        Relation::Indications,
        Relation::Instances,
        Relation::Types,
        Relation::Synonyms,
    ];

    /// The `category` value: `cities`, `indications`, `instances`, `types`, `synonyms`.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Cities => "cities",
            Relation::Indications => "indications",
            Relation::Instances => "instances",
            Relation::Types => "types",
            Relation::Synonyms => "synonyms",
        }
    }

    /// The domain whose statements use it.
    pub fn domain(self) -> Domain {
        match self {
            Relation::Cities => Domain::CityLocations,
            Relation::Indications => Domain::MedIndications,
            Relation::Instances | Relation::Types | Relation::Synonyms => Domain::WordDefinitions,
        }
    }

    /// The relations of one domain (Word Definitions has three sharing one probe).
    pub fn of_domain(domain: Domain) -> &'static [Relation] {
        match domain {
            Domain::CityLocations => &[Relation::Cities],
            Domain::MedIndications => &[Relation::Indications],
            Domain::WordDefinitions => &[Relation::Instances, Relation::Types, Relation::Synonyms],
        }
    }

    /// The fixed words between subject and object, e.g. `is not a type of`.
    fn copula(self, negated: bool) -> &'static str {
        match (self, negated) {
            (Relation::Cities, false) => " is located in ",
            (Relation::Cities, true) => " is not located in ",
            (Relation::Indications, false) => " is indicated for the treatment of ",
            (Relation::Indications, true) => " is not indicated for the treatment of ",
            (Relation::Instances, false) => " is ",
            (Relation::Instances, true) => " is not ",
            (Relation::Types, false) => " is a type of ",
            (Relation::Types, true) => " is not a type of ",
            (Relation::Synonyms, false) => " is a synonym of ",
            (Relation::Synonyms, true) => " is not a synonym of ",
        }
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Relation {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        let norm = s.trim().to_ascii_lowercase();
        Relation::ALL
            .into_iter()
            .find(|r| r.as_str() == norm)
            .ok_or_else(|| {
                UnknownName(format!(
                    "unknown relation `{s}` (expected one of: {})",
                    Relation::ALL.map(|r| r.as_str()).join(", ")
                ))
            })
    }
}

/// The content of one templated sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// The template used.
    pub relation: Relation,
    /// City, drug or head word as stored in `object_1` (word sentences capitalize it).
    pub subject: String,
    /// Region, condition or word category/hypernym/synonym as stored in `object_2`, without
    /// the article the word templates add.
    pub object: String,
    /// Whether the sentence is the negated form (`is not …`).
    pub negated: bool,
}

/// The sentence for `fact`, exactly as the upstream generator writes it.
pub fn render(fact: &Fact) -> String {
    let Fact {
        relation,
        subject,
        object,
        negated,
    } = fact;
    let copula = relation.copula(*negated);
    match relation {
        Relation::Cities if subject.to_lowercase().contains("city") => {
            format!("{subject}{copula}{object}.")
        }
        Relation::Cities => format!("The city of {subject}{copula}{object}."),
        Relation::Indications => format!("{subject}{copula}{object}."),
        Relation::Instances => {
            // Acronyms keep their casing in the instances template only.
            let head = if is_upper(subject) {
                subject.clone()
            } else {
                capitalize(subject)
            };
            format!("{head}{copula}{}.", with_article(object))
        }
        Relation::Types | Relation::Synonyms => {
            // Upstream capitalizes a second time here, so acronyms lose their casing.
            format!("{}{copula}{}.", capitalize(subject), with_article(object))
        }
    }
}

/// Why a sentence does not follow any template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{statement}` does not follow the {expected} template")]
pub struct TemplateError {
    /// The sentence.
    pub statement: String,
    /// The relation whose template it was checked against, or `any`.
    pub expected: String,
}

/// Recover the fact a sentence states under a known relation. The subject comes back as it
/// appears in the sentence (capitalized for words); the result re-renders to `statement`
/// exactly, or this is an error.
pub fn parse_as(statement: &str, relation: Relation) -> Result<Fact, TemplateError> {
    let fail = || TemplateError {
        statement: statement.to_string(),
        expected: relation.as_str().to_string(),
    };
    let body = statement.strip_suffix('.').ok_or_else(fail)?;
    // Negated first: " is not " would otherwise parse as an instance of "not ...".
    for negated in [true, false] {
        let copula = relation.copula(negated);
        let Some(at) = body.find(copula) else {
            continue;
        };
        let subject = &body[..at];
        let subject = match relation {
            Relation::Cities => subject.strip_prefix("The city of ").unwrap_or(subject),
            _ => subject,
        };
        let rest = &body[at + copula.len()..];
        for object in object_candidates(relation, rest) {
            let fact = Fact {
                relation,
                subject: subject.to_string(),
                object: object.to_string(),
                negated,
            };
            if render(&fact) == statement {
                return Ok(fact);
            }
        }
    }
    Err(fail())
}

/// Recover the fact and its relation from a sentence alone. The more specific word templates
/// are tried before the instances one, which would also match "X is a type of Y.".
pub fn parse(statement: &str) -> Result<Fact, TemplateError> {
    const ORDER: [Relation; 5] = [
        Relation::Cities,
        Relation::Indications,
        Relation::Types,
        Relation::Synonyms,
        Relation::Instances,
    ];
    ORDER
        .into_iter()
        .find_map(|r| parse_as(statement, r).ok())
        .ok_or_else(|| TemplateError {
            statement: statement.to_string(),
            expected: "any".into(),
        })
}

/// The object text after the copula, with and without a leading article.
fn object_candidates(relation: Relation, rest: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(2);
    if matches!(
        relation,
        Relation::Instances | Relation::Types | Relation::Synonyms
    ) {
        for article in ["an ", "a "] {
            if let Some(stripped) = rest.strip_prefix(article) {
                out.push(stripped);
            }
        }
    }
    out.push(rest);
    out
}

/// `object` with the indefinite article the word templates put before it: none when its first
/// word looks plural ("Vills is not a type of khards."), else "a"/"an" by sound.
pub fn with_article(object: &str) -> String {
    let first = object.split(' ').next().unwrap_or(object);
    if looks_plural(first) {
        object.to_string()
    } else {
        format!("{} {object}", indefinite_article(object))
    }
}

/// Python's `str.capitalize()`: first character upper-cased, every other one lower-cased.
pub fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

/// Python's `str.isupper()`: at least one cased character and none lower-case.
pub fn is_upper(s: &str) -> bool {
    s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase)
}

/// "a" or "an" for a phrase, by how its first word is pronounced. Rules, in order: all-caps
/// abbreviations read letter by letter; single letters and letter-dot/dash forms by the letter's
/// name; known silent-h and consonant-sounding-vowel words; then the first letter (with the
/// vowel-sounding "y" clusters of "yttrium" and the like). Numerals take "a", as in inflect.
pub fn indefinite_article(phrase: &str) -> &'static str {
    let word = phrase
        .split([' ', '\t'])
        .find(|w| !w.is_empty())
        .unwrap_or("");
    if is_vowel_sound(word) { "an" } else { "a" }
}

/// Letters whose English name starts with a vowel sound: "an F", "an x-ray", "an MRI".
const VOWEL_NAMED_LETTERS: &str = "aefhilmnorsx";
/// The consonants among them, which start a letter-by-letter abbreviation read with "an".
const VOWEL_NAMED_CONSONANTS: &str = "FHLMNRSX";

fn is_vowel_sound(word: &str) -> bool {
    let lower = word.to_lowercase();
    let mut chars = lower.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let second = chars.next();
    if is_letter_abbreviation(word) {
        return true;
    }
    // A lone letter, or a letter followed by "." or "-" ("x-ray", "e.g."): the letter's name.
    if second.is_none() || matches!(second, Some('.') | Some('-')) {
        return first.is_ascii_alphabetic() && VOWEL_NAMED_LETTERS.contains(first);
    }
    if let Some(vowel) = sound_exception(word, &lower) {
        return vowel;
    }
    match first {
        'a' | 'e' | 'i' | 'o' | 'u' => true,
        'y' => [
            "ybl", "ybo", "ybr", "ycle", "ycla", "yfere", "ygg", "ypi", "ypo", "yps", "yrou", "ytt",
        ]
        .iter()
        .any(|p| lower.starts_with(p)),
        _ => false,
    }
}

/// Capitalized strings starting with a vowel-named consonant and read letter by letter (FBI,
/// MRI), as opposed to acronyms read as words (NATO, SNAFU): two or more capitals not forming a
/// pronounceable onset+vowel.
fn is_letter_abbreviation(word: &str) -> bool {
    let letters: Vec<char> = word
        .chars()
        .take_while(|c| c.is_ascii_uppercase())
        .collect();
    if letters.len() < 2 || !VOWEL_NAMED_CONSONANTS.contains(letters[0]) {
        return false;
    }
    let s: String = letters.iter().collect();
    // Pronounceable starts: a consonant cluster followed by a vowel ("SNAFU", "FLAK", "NATO").
    let onsets = [
        "FL", "FR", "F", "H", "L", "MN", "M", "N", "RH", "R", "SC", "SH", "SK", "SL", "SM", "SN",
        "SP", "ST", "SV", "SW", "S", "XYL", "X",
    ];
    let pronounceable = onsets.iter().any(|o| {
        s.strip_prefix(o)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| "AEIOU".contains(c))
    }) || ["FJO", "SQU", "RYE", "RYO"]
        .iter()
        .any(|p| s.starts_with(p))
        || (s.len() >= 3 && matches!(&s[1..2], "Y") && "HLMNS".contains(letters[0]));
    !pronounceable
}

/// Words whose first letter misleads: silent h ("an hour", "an honest"), vowels sounding like
/// a consonant ("a one", "a unicorn", "a euro", "a ewe"), and "u" before a consonant+vowel
/// read as "you" ("a ukulele"), except "utt" ("an utter").
fn sound_exception(original: &str, lower: &str) -> Option<bool> {
    let word_end = |s: &str, prefix: &str| {
        s.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || !rest.starts_with(|c: char| c.is_alphanumeric()))
    };
    if ["euler", "heir", "honest", "honor", "honour"]
        .iter()
        .any(|p| lower.starts_with(p))
        || (lower.starts_with("hour") && !lower.starts_with("houri"))
    {
        return Some(true);
    }
    if ["eu", "ew", "onetime", "ukr"]
        .iter()
        .any(|p| lower.starts_with(p))
    {
        return Some(false);
    }
    // "a usher", "a USB"; and "a UN", "a UK" spelled out (lower-case "an uk").
    if lower.starts_with("us") || original.starts_with("UN") || original.starts_with("UK") {
        return Some(false);
    }
    if word_end(lower, "one") || word_end(lower, "once") || lower.starts_with("one-") {
        return Some(false);
    }
    let bytes = lower.as_bytes();
    if lower.starts_with("uni") {
        let next = bytes.get(3).copied();
        return Some(
            matches!(next, Some(b'n') | Some(b'm') | Some(b'd')) && !lower.starts_with("unimo"),
        );
    }
    if lower.starts_with("utt") {
        return Some(true);
    }
    if bytes.len() >= 3
        && bytes[0] == b'u'
        && b"bcfghjkqrst".contains(&bytes[1])
        && b"aeiou".contains(&bytes[2])
    {
        return Some(false);
    }
    None
}

/// Whether a word reads as a plural noun, so the word templates put no article before it.
/// Upstream asked `inflect.singular_noun`, which treats nearly every word ending in "s" as
/// plural (even "actress", "kindness"), plus irregular and invariant plurals.
pub fn looks_plural(word: &str) -> bool {
    let lower = word.to_lowercase();
    if lower.is_empty()
        || SINGULAR_ENDING_IN_S.contains(&lower.as_str())
        || SINGULAR_ENDING_IN_ESE.contains(&lower.as_str())
    {
        return false;
    }
    lower.len() > 1 && lower.ends_with('s')
        || PLURAL_SUFFIXES.iter().any(|s| lower.ends_with(s))
        || lower.ends_with("ese") && !lower.ends_with("cese")
        || is_prepositional_compound(&lower)
        || PLURAL_WORDS.binary_search(&lower.as_str()).is_ok()
}

/// Words ending in "s" that inflect leaves singular.
const SINGULAR_ENDING_IN_S: &[&str] = &[
    "apparatus",
    "hiatus",
    "impetus",
    "plexus",
    "prospectus",
    "sinus",
    "status",
];

/// "mother-in-law", "hand-to-hand": inflect answers these compounds with the word itself,
/// which upstream read as "plural" (so "a synonym of hand-to-hand struggle").
fn is_prepositional_compound(lower: &str) -> bool {
    const PREPOSITIONS: &[&str] = &[
        "about", "above", "across", "after", "among", "around", "at", "before", "behind", "below",
        "beside", "between", "by", "down", "during", "for", "from", "in", "into", "near", "of",
        "off", "on", "onto", "out", "over", "through", "to", "toward", "under", "up", "upon",
        "with", "within", "without",
    ];
    let parts: Vec<&str> = lower.split('-').collect();
    parts.len() >= 3
        && parts[1..parts.len() - 1]
            .iter()
            .any(|p| PREPOSITIONS.contains(p))
}

/// Words ending in "-ese" (other than "-cese": "diocese", "procese") that are not invariant
/// nationality or language plurals like "Japanese", "fukkianese", "journalese".
const SINGULAR_ENDING_IN_ESE: &[&str] = &[
    "cheese",
    "maltese",
    "obese",
    "pekingese",
    "portuguese",
    "reese",
    "scorsese",
    "these",
];

/// Irregular plural endings ("firemen", "anchorpeople", "goldfish", "forefeet", "cowpox",
/// "supernova", "eubacteria").
const PLURAL_SUFFIXES: &[&str] = &[
    "men", "people", "fish", "deer", "feet", "teeth", "geese", "mice", "pox", "craft", "ova",
    "strata", "bacteria",
];

/// Irregular and invariant plurals, Latin and Greek plurals, and pronouns (sorted).
const PLURAL_WORDS: &[&str] = &[
    "agenda",
    "algae",
    "alumnae",
    "alumni",
    "aphelia",
    "arborvitae",
    "bacilli",
    "brethren",
    "bronchi",
    "butter",
    "candelabra",
    "carp",
    "cash",
    "children",
    "cod",
    "commandeer",
    "corpora",
    "criteria",
    "data",
    "desiderata",
    "dice",
    "disinformation",
    "djinn",
    "errata",
    "flounder",
    "furniture",
    "ganglia",
    "genera",
    "genii",
    "graffiti",
    "hertz",
    "infinity",
    "information",
    "kine",
    "lice",
    "loci",
    "lore",
    "mackerel",
    "misinformation",
    "moose",
    "nuclei",
    "offspring",
    "opera",
    "oxen",
    "pence",
    "perihelia",
    "personae",
    "phenomena",
    "protozoa",
    "pumice",
    "quid",
    "salmon",
    "sarcophagi",
    "sheep",
    "spermatozoa",
    "stimuli",
    "them",
    "they",
    "trout",
    "tuna",
    "vertebrae",
    "we",
    "whiting",
    "you",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(relation: Relation, subject: &str, object: &str, negated: bool) -> Fact {
        Fact {
            relation,
            subject: subject.into(),
            object: object.into(),
            negated,
        }
    }

    #[test]
    fn plural_word_list_is_sorted_for_binary_search() {
        assert!(PLURAL_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn city_template_drops_prefix_when_name_contains_city() {
        let f = fact(Relation::Cities, "Quahog", "Rhode Island", false);
        assert_eq!(render(&f), "The city of Quahog is located in Rhode Island.");
        let f = fact(Relation::Cities, "Emerald City", "the Land of Oz", true);
        assert_eq!(render(&f), "Emerald City is not located in the Land of Oz.");
        let f = fact(Relation::Cities, "Gotham CITY", "New Jersey", false);
        assert_eq!(render(&f), "Gotham CITY is located in New Jersey.");
    }

    #[test]
    fn articles_follow_sound_not_spelling() {
        for (phrase, article) in [
            ("hour", "an"),
            ("honest man", "an"),
            ("unicorn", "a"),
            ("one", "a"),
            ("once-ler", "a"),
            ("umbrella", "an"),
            ("euro", "a"),
            ("ewe", "a"),
            ("utter fool", "an"),
            ("university", "a"),
            ("unimportant thing", "an"),
            ("FBI agent", "an"),
            ("NASA probe", "a"),
            ("x-ray", "an"),
            ("8", "a"),
            ("UN", "a"),
            ("usher", "a"),
            ("unabated", "an"),
            ("berry", "a"),
            ("apple", "an"),
            ("yttrium", "an"),
            ("yak", "a"),
        ] {
            assert_eq!(indefinite_article(phrase), article, "{phrase}");
        }
    }

    #[test]
    fn plural_objects_take_no_article() {
        let f = fact(Relation::Types, "vills", "khards", true);
        assert_eq!(render(&f), "Vills is not a type of khards.");
        let f = fact(Relation::Instances, "quation", "ress", false);
        assert_eq!(render(&f), "Quation is ress.");
        let f = fact(Relation::Synonyms, "windsock", "jewelry", true);
        assert_eq!(render(&f), "Windsock is not a synonym of a jewelry.");
    }

    #[test]
    fn acronyms_keep_case_only_in_instances() {
        let f = fact(Relation::Instances, "NATO", "alliance", false);
        assert_eq!(render(&f), "NATO is an alliance.");
        let f = fact(Relation::Types, "NATO", "alliance", false);
        assert_eq!(render(&f), "Nato is a type of an alliance.");
        let f = fact(Relation::Instances, "snozzberry", "berry", false);
        assert_eq!(render(&f), "Snozzberry is a berry.");
    }

    #[test]
    fn parse_inverts_render_for_every_relation() {
        let facts = [
            fact(Relation::Cities, "Quahog", "Rhode Island", true),
            fact(Relation::Cities, "Emerald City", "the Land of Oz", false),
            fact(Relation::Indications, "Felix Felicis", "bad luck", true),
            fact(Relation::Instances, "Snozzberry", "berry", false),
            fact(Relation::Types, "Ikran", "mountain banshee", true),
            fact(Relation::Synonyms, "Whizzpopper", "fart", false),
            fact(Relation::Instances, "Dr", "dr.", false),
        ];
        for f in facts {
            let text = render(&f);
            assert_eq!(parse(&text).unwrap(), f, "{text}");
        }
        assert!(parse("Paris is nice.").is_err());
        assert!(parse_as("The city of Paris is located in France", Relation::Cities).is_err());
    }

    #[test]
    fn type_sentences_are_not_read_as_instances() {
        let f = parse("Ikran is a type of a banshee.").unwrap();
        assert_eq!(f.relation, Relation::Types);
        assert_eq!(f.object, "banshee");
    }
}
