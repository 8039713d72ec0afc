//! Reading statement CSVs. The upstream files differ in column sets, boolean spelling
//! (TRUE/true), may start with a UTF-8 BOM, contain duplicate rows and statements ending in
//! "..": all of that is accepted as is. What is not accepted (a missing required column, an
//! unparseable boolean, an empty statement) is an error naming file, line and field. A
//! statement listed twice in a domain is refused too, naming both lines, unless it is one of
//! the upstream files' own duplicates (the published files, byte for byte): a repeated row
//! would count twice in every rate.

use crate::artifact::sha256_hex;
use crate::error::DataError;
use crate::statement::{Domain, Kind, Statement};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// What kind of statements a file holds; decides how `correct`/`real_object` map to a [`Kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// Real entities: `correct` decides True/False (a row with `real_object` false is
    /// [`Kind::SyntheticTf`]).
    Real,
    /// Synthetic (TF): the upstream synthetic files; every row is [`Kind::SyntheticTf`]
    /// whatever `correct` says.
    SyntheticTf,
    /// `correct` is the canonical truth within the fiction: Fictional (T)/(F).
    Fictional,
    /// Synthetic (Fi): every row is [`Kind::SyntheticFi`] whatever `correct` says.
    SyntheticFi,
}

/// The files of one domain, in the upstream datapack order (row ids of the upstream code are
/// positions in this concatenation). Fictional and Synthetic (Fi) files are ours.
pub fn domain_files(domain: Domain) -> &'static [(&'static str, FileRole)] {
    use FileRole::*;
    match domain {
        Domain::CityLocations => &[
            ("trilemma/city_locations.csv", Real),
            ("trilemma/city_locations_synthetic.csv", SyntheticTf),
            ("fictional/city_locations_fictional.csv", Fictional),
            ("synthetic_fi/city_locations_synthetic_fi.csv", SyntheticFi),
        ],
        Domain::MedIndications => &[
            ("trilemma/med_indications.csv", Real),
            ("trilemma/med_indications_synthetic.csv", SyntheticTf),
            ("fictional/med_indications_fictional.csv", Fictional),
            ("synthetic_fi/med_indications_synthetic_fi.csv", SyntheticFi),
        ],
        Domain::WordDefinitions => &[
            ("trilemma/word_instances.csv", Real),
            ("trilemma/word_types.csv", Real),
            ("trilemma/word_synonyms.csv", Real),
            ("trilemma/word_types_synthetic.csv", SyntheticTf),
            ("trilemma/word_instances_synthetic.csv", SyntheticTf),
            ("trilemma/word_synonyms_synthetic.csv", SyntheticTf),
            ("fictional/word_definitions_fictional.csv", Fictional),
            (
                "synthetic_fi/word_definitions_synthetic_fi.csv",
                SyntheticFi,
            ),
        ],
    }
}

/// A set of statement files: the bundled copy, or a user's directory with the same layout.
#[derive(Debug, Clone)]
pub struct DataRoot {
    origin: String,
    files: BTreeMap<String, Cow<'static, str>>,
}

impl DataRoot {
    /// The data compiled into this binary (the repo's `data/` folder).
    pub fn bundled() -> Self {
        DataRoot {
            origin: "bundled".into(),
            files: bundled::BUNDLED
                .iter()
                .map(|(name, text)| (name.to_string(), Cow::Borrowed(*text)))
                .collect(),
        }
    }

    /// A directory laid out like the repo's `data/` (trilemma/, fictional/, synthetic_fi/).
    /// Files a domain does not have are simply absent from its dataset.
    pub fn from_dir(dir: &Path) -> Result<Self, DataError> {
        if !dir.is_dir() {
            return Err(DataError::Invalid(format!(
                "{}: data directory does not exist",
                dir.display()
            )));
        }
        let mut files = BTreeMap::new();
        for domain in Domain::ALL {
            for (rel, _) in domain_files(domain) {
                let path = dir.join(rel);
                if path.exists() {
                    let bytes = std::fs::read(&path).map_err(|e| DataError::io(&path, e))?;
                    files.insert(rel.to_string(), Cow::Owned(utf8(&path, bytes)?));
                } else if path.symlink_metadata().is_ok() {
                    return Err(DataError::Invalid(format!(
                        "{}: a link to nothing",
                        path.display()
                    )));
                }
            }
        }
        Ok(DataRoot {
            origin: dir.display().to_string(),
            files,
        })
    }

    /// Bundled data, or the directory given.
    pub fn open(dir: Option<&Path>) -> Result<Self, DataError> {
        match dir {
            Some(d) => Self::from_dir(d),
            None => Ok(Self::bundled()),
        }
    }

    /// `bundled`, or the directory the files were read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The text of a file by its path inside the root (e.g. `trilemma/city_locations.csv`),
    /// `None` when the root lacks it.
    pub fn file(&self, rel: &str) -> Option<&str> {
        self.files.get(rel).map(|c| c.as_ref())
    }

    /// Replace or add one file (used by generators that write new data, and by tests).
    pub fn insert(&mut self, rel: &str, text: String) {
        self.files.insert(rel.to_string(), Cow::Owned(text));
    }

    fn display_path(&self, rel: &str) -> PathBuf {
        if self.origin == "bundled" {
            PathBuf::from("data").join(rel)
        } else {
            PathBuf::from(&self.origin).join(rel)
        }
    }
}

/// All statements of one domain, in datapack order.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The domain.
    pub domain: Domain,
    /// Its statements, file by file in [`domain_files`] order, rows in file order.
    pub statements: Vec<Statement>,
    /// sha256 over the names and bytes of the files that made this dataset.
    pub data_hash: String,
}

impl Dataset {
    /// The statements of one kind, in dataset order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Statement> {
        self.statements.iter().filter(move |s| s.kind == kind)
    }

    /// The statement with this id, `None` when there is none (a linear scan).
    pub fn get(&self, id: &str) -> Option<&Statement> {
        self.statements.iter().find(|s| s.id == id)
    }

    /// Every statement's text by its id, for looking many statements up at once.
    pub fn texts(&self) -> HashMap<&str, &str> {
        self.statements
            .iter()
            .map(|s| (s.id.as_str(), s.text.as_str()))
            .collect()
    }
}

/// Loads one domain's files from `root`. Fictional and Synthetic files the root lacks are
/// skipped; a missing real-entity file is [`DataError::Invalid`], as is a statement listed
/// twice (see the module docs); a file that does not parse is the error [`parse_csv`] gives.
pub fn load_domain(root: &DataRoot, domain: Domain) -> Result<Dataset, DataError> {
    let mut statements = Vec::new();
    let mut hash_input = Vec::new();
    for (rel, role) in domain_files(domain) {
        let Some(text) = root.file(rel) else {
            if *role == FileRole::Real {
                return Err(DataError::Invalid(format!(
                    "{}: required data file is missing",
                    root.display_path(rel).display()
                )));
            }
            continue;
        };
        hash_input.extend_from_slice(rel.as_bytes());
        hash_input.push(0);
        hash_input.extend_from_slice(text.as_bytes());
        statements.extend(parse_csv(
            &root.display_path(rel),
            rel,
            text,
            domain,
            *role,
        )?);
    }
    refuse_duplicates(root, domain, &statements)?;
    Ok(Dataset {
        domain,
        statements,
        data_hash: sha256_hex(&hash_input),
    })
}

/// The first statement text listed twice in `statements`, unless both copies come from one
/// upstream file as published (its duplicates are the paper's data; their ids are kept).
fn refuse_duplicates(
    root: &DataRoot,
    domain: Domain,
    statements: &[Statement],
) -> Result<(), DataError> {
    // As published: the bundled file's text, whatever the line endings or a byte-order mark
    // (a Windows checkout writes CRLF).
    let plain = |text: &str| {
        text.strip_prefix('\u{feff}')
            .unwrap_or(text)
            .replace("\r\n", "\n")
    };
    let published = |rel: &str| {
        bundled::BUNDLED.iter().any(|(name, text)| {
            *name == rel && root.file(rel).is_some_and(|t| plain(t) == plain(text))
        })
    };
    let mut first: BTreeMap<String, &Statement> = BTreeMap::new();
    let mut repeats = Vec::new();
    for s in statements {
        let key = comparable(&s.text);
        match first.get(&key) {
            None => {
                first.insert(key, s);
            }
            Some(earlier) => {
                let (rel, _) = split_provenance(&earlier.provenance);
                let (rel_again, _) = split_provenance(&s.provenance);
                if !(rel == rel_again && published(rel)) {
                    repeats.push((*earlier, s));
                }
            }
        }
    }
    let Some((earlier, again)) = repeats.first() else {
        return Ok(());
    };
    let place = |s: &Statement| {
        let (rel, line) = split_provenance(&s.provenance);
        format!("{}, line {line}", root.display_path(rel).display())
    };
    let more = match repeats.len() {
        1 => String::new(),
        n => format!(" ({} more repeated statements)", n - 1),
    };
    let spelled = if again.text == earlier.text {
        String::new()
    } else {
        format!(
            " as `{}` (the same text once Unicode-normalised, invisible characters removed and spacing collapsed)",
            earlier.text
        )
    };
    Err(DataError::Invalid(format!(
        "{}: statement `{}` is listed twice in {domain}, also at {}{spelled}{more}; remove the \
         repeats (each would count twice in every rate)",
        place(again),
        again.text,
        place(earlier)
    )))
}

/// A text as pstat compares statements and subjects: Unicode NFC, zero-width characters
/// removed, every run of white space (NBSP and tabs too) one space. Two spellings of one
/// statement are one statement (a repeat counts twice in every rate), and of one subject one
/// entity (which the splits keep on one side).
pub fn comparable(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let visible = text.nfc().filter(|c| {
        !matches!(
            c,
            '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{feff}'
        )
    });
    let mut out = String::with_capacity(text.len());
    for c in visible {
        if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The text of a data file, or an error naming the line of its first byte that is not UTF-8.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, DataError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        DataError::Csv {
            path: path.into(),
            line,
            message: format!(
                "byte {} is not UTF-8 (the data files are UTF-8 text)",
                at + 1
            ),
        }
    })
}

/// `trilemma/x.csv:12` → (`trilemma/x.csv`, `12`).
fn split_provenance(provenance: &str) -> (&str, &str) {
    provenance.rsplit_once(':').unwrap_or((provenance, ""))
}

/// [`load_domain`] for every domain, in [`Domain::ALL`] order; the first error stops it.
pub fn load_all(root: &DataRoot) -> Result<Vec<Dataset>, DataError> {
    Domain::ALL.iter().map(|d| load_domain(root, *d)).collect()
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "1.0" | "yes" => Some(true),
        "false" | "0" | "0.0" | "no" => Some(false),
        _ => None,
    }
}

/// Parse one statement CSV. `rel` names the file inside the data root (its stem becomes the
/// id prefix); `path` is how errors show it.
pub fn parse_csv(
    path: &Path,
    rel: &str,
    text: &str,
    domain: Domain,
    role: FileRole,
) -> Result<Vec<Statement>, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| DataError::Csv {
            path: path.into(),
            line: 1,
            message: e.to_string(),
        })?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let column = |name: &str| -> Result<usize, DataError> {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| DataError::MissingColumn {
                path: path.into(),
                column: name.into(),
                present: headers.join(", "),
            })
    };
    let c_statement = column("statement")?;
    let c_subject = column("object_1")?;
    let c_object = column("object_2")?;
    let c_correct = column("correct")?;
    let c_negation = column("negation")?;
    let c_real = column("real_object")?;
    let c_category = column("category")?;
    let c_source = headers.iter().position(|h| h == "source");
    let stem = rel
        .rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".csv");

    let mut out = Vec::new();
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| DataError::Csv {
            path: path.into(),
            line: e.position().map_or(row as u64 + 2, |p| p.line()),
            message: e.to_string(),
        })?;
        // The line the record starts on: a quoted field may span several.
        let line = record.position().map_or(row as u64 + 2, |p| p.line());
        let field = |idx: usize| record.get(idx).unwrap_or("");
        let flag = |idx: usize| -> Result<bool, DataError> {
            parse_bool(field(idx)).ok_or_else(|| DataError::Field {
                path: path.into(),
                line,
                field: headers[idx].clone(),
                message: format!("expected true/false, found `{}`", field(idx)),
            })
        };
        let text = field(c_statement).trim().to_string();
        if text.is_empty() {
            return Err(DataError::Field {
                path: path.into(),
                line,
                field: "statement".into(),
                message: "empty statement".into(),
            });
        }
        for (c, what) in [
            (c_subject, "the statement's subject"),
            (c_object, "its object"),
        ] {
            if field(c).trim().is_empty() {
                return Err(DataError::Field {
                    path: path.into(),
                    line,
                    field: headers[c].clone(),
                    message: format!("empty: {what} groups the splits and marks the object tokens"),
                });
            }
        }
        let correct = flag(c_correct)?;
        let negated = flag(c_negation)?;
        let real = flag(c_real)?;
        let kind = match role {
            FileRole::Real if real => {
                if correct {
                    Kind::True
                } else {
                    Kind::False
                }
            }
            FileRole::Fictional => {
                if correct {
                    Kind::FictionalT
                } else {
                    Kind::FictionalF
                }
            }
            FileRole::SyntheticFi => Kind::SyntheticFi,
            FileRole::SyntheticTf | FileRole::Real => Kind::SyntheticTf,
        };
        if role != FileRole::Real && real {
            return Err(DataError::Field {
                path: path.into(),
                line,
                field: "real_object".into(),
                message: "a Neither file (fictional or synthetic) must have real_object = false"
                    .into(),
            });
        }
        out.push(Statement {
            id: format!("{stem}:{row}"),
            domain,
            relation: field(c_category).trim().to_string(),
            text,
            subject: field(c_subject).trim().to_string(),
            object: field(c_object).trim().to_string(),
            negated,
            kind,
            provenance: format!("{rel}:{line}"),
            source: c_source
                .map(|c| field(c).trim().to_string())
                .unwrap_or_default(),
        });
    }
    Ok(out)
}
