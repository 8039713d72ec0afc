//! What counts as an existing word or entity when fictional and synthetic names are checked:
//! an English word list (Debian's `wamerican`, shipped in `data/english_words/`) and every
//! entity of the bundled statement data.

use pstat_data::error::DataError;
use pstat_data::load::{DataRoot, domain_files};
use pstat_data::statement::Domain;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The shipped copy of Debian's `wamerican` list, relative to the repository root (see its
/// SOURCE.md); the same file `apt-get install wamerican` puts at /usr/share/dict/words.
pub const DEFAULT_WORD_LIST: &str = "data/english_words/american-english";

/// A set of English words, compared case-insensitively. Possessive entries ("aardvark's")
/// are skipped: they are forms, not words.
#[derive(Debug, Clone, Default)]
pub struct EnglishWords {
    words: HashSet<String>,
    origin: PathBuf,
}

impl EnglishWords {
    /// Load a one-word-per-line list. A missing list is an error that says how to get one,
    /// never an empty set (which would silently let every name pass).
    pub fn load(path: &Path) -> Result<Self, DataError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            DataError::Invalid(format!(
                "{}: cannot read the English word list ({e}); pass a one-word-per-line list such as the \
                 repository's data/english_words/american-english (Debian's wamerican)",
                path.display()
            ))
        })?;
        let words: HashSet<String> = text
            .lines()
            .map(str::trim)
            .filter(|w| !w.is_empty() && !w.ends_with("'s"))
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            return Err(DataError::Invalid(format!(
                "{}: the English word list is empty",
                path.display()
            )));
        }
        Ok(EnglishWords {
            words,
            origin: path.to_path_buf(),
        })
    }

    /// From words given in code (tests).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        EnglishWords {
            words: words.into_iter().map(str::to_lowercase).collect(),
            origin: PathBuf::from("<inline>"),
        }
    }

    /// The word list's file (`<inline>` for words given in code).
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    /// Number of distinct words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the list holds no word.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Whether `word` is in the list, ignoring case.
    pub fn contains(&self, word: &str) -> bool {
        self.words.contains(&word.to_lowercase())
    }

    /// Whether every space- or hyphen-separated part of `name` is an English word ("the Great
    /// Sea", "sea-green"): upstream's test for a generated object that is just English.
    pub fn is_english_phrase(&self, name: &str) -> bool {
        let mut parts = name_parts(name).peekable();
        parts.peek().is_some() && parts.all(|p| self.contains(p))
    }
}

/// Every subject and object (lower-cased) of the bundled True/False, Synthetic (TF) and
/// Fictional statements of all domains: names a new synthetic entity must not reuse.
#[derive(Debug, Clone, Default)]
pub struct KnownEntities {
    entities: HashSet<String>,
    /// Lower-cased space/hyphen-separated parts of the entities ("minas", "tirith").
    parts: HashSet<String>,
}

impl KnownEntities {
    /// Subjects and objects of the files of `root` whose data path starts with one of
    /// `prefixes` (e.g. `trilemma/`, `fictional/`), all domains.
    pub fn from_root(root: &DataRoot, prefixes: &[&str]) -> Result<Self, DataError> {
        let files = Domain::ALL
            .iter()
            .flat_map(|d| domain_files(*d).iter().map(|(rel, _)| *rel))
            .filter(|rel| prefixes.iter().any(|p| rel.starts_with(p)));
        Self::from_files(root, files, &["object_1", "object_2"])
    }

    /// The given `columns` of the given files of `root` (absent files are skipped).
    pub fn from_files<'a>(
        root: &DataRoot,
        files: impl IntoIterator<Item = &'a str>,
        columns: &[&str],
    ) -> Result<Self, DataError> {
        let mut known = KnownEntities::default();
        for rel in files {
            let Some(text) = root.file(rel) else {
                continue;
            };
            let mut reader = csv::Reader::from_reader(text.as_bytes());
            let headers = reader.headers().map_err(|e| csv_error(rel, &e))?.clone();
            let positions: Vec<usize> = columns
                .iter()
                .filter_map(|c| headers.iter().position(|h| h == *c))
                .collect();
            for record in reader.records() {
                let record = record.map_err(|e| csv_error(rel, &e))?;
                for &c in &positions {
                    known.insert(&record[c]);
                }
            }
        }
        Ok(known)
    }

    /// Adds an entity (trimmed, lower-cased) and its space/hyphen-separated parts.
    pub fn insert(&mut self, entity: &str) {
        let lower = entity.trim().to_lowercase();
        self.parts.extend(name_parts(&lower).map(str::to_string));
        self.entities.insert(lower);
    }

    /// Whether some part of `name` that is not an English word is a part of a known entity:
    /// "Twin Zanarkand" reuses "zanarkand", "Kharal fever" reuses "kharal"; "Dords fever" is new.
    pub fn shares_proper_part(&self, name: &str, words: &EnglishWords) -> bool {
        let lower = name.to_lowercase();
        name_parts(&lower).any(|p| !words.contains(p) && self.parts.contains(p))
    }

    /// Whether `entity` (trimmed, ignoring case) is a known entity.
    pub fn contains(&self, entity: &str) -> bool {
        self.entities.contains(&entity.trim().to_lowercase())
    }

    /// Number of distinct known entities.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether no entity is known.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }
}

/// Space- and hyphen-separated parts of a name.
fn name_parts(name: &str) -> impl Iterator<Item = &str> {
    name.split([' ', '-']).filter(|p| !p.is_empty())
}

fn csv_error(rel: &str, e: &csv::Error) -> DataError {
    DataError::Csv {
        path: PathBuf::from("data").join(rel),
        line: e.position().map_or(0, |p| p.line()),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_word_list_is_an_error_naming_the_package() {
        let err = EnglishWords::load(Path::new("/nonexistent/words")).unwrap_err();
        assert!(err.to_string().contains("wamerican"), "{err}");
    }

    #[test]
    fn phrases_are_english_only_when_every_part_is() {
        let words = EnglishWords::from_words(["the", "great", "sea", "green"]);
        assert!(words.is_english_phrase("the Great Sea"));
        assert!(words.is_english_phrase("sea-green"));
        assert!(!words.is_english_phrase("the Slovorgypru Islands"));
        assert!(!words.is_english_phrase(""));
    }

    #[test]
    fn bundled_real_entities_are_known() {
        let known = KnownEntities::from_root(&DataRoot::bundled(), &["trilemma/"]).unwrap();
        assert!(known.contains("palembang"));
        assert!(known.contains("The Dominican Republic"));
        assert!(known.contains("Pentobarbital"));
        assert!(!known.contains("Quahog"));
    }

    #[test]
    fn proper_parts_of_known_entities_are_recognized() {
        let mut known = KnownEntities::default();
        known.insert("Minas Tirith");
        known.insert("Sand Pest");
        let words = EnglishWords::from_words(["sand", "pest", "fever"]);
        assert!(known.shares_proper_part("Tirith fever", &words));
        assert!(!known.shares_proper_part("Sand fever", &words));
        assert!(!known.shares_proper_part("Tirath", &words));
    }
}
