//! Synthetic (Fi) statements (Appendix B.1.2): names from character Markov chains trained on
//! the Fictional names, screened against every known entity and the English dictionary, then
//! paired as upstream paired its synthetic names: each subject gets two random generated
//! objects as its "correct" values and the four-row expansion, with every row `correct =
//! false` (Neither), and a seeded subsample to the Table 1 size.

use crate::fictional::domain_rng;
use crate::lexicon::{EnglishWords, KnownEntities};
use crate::markov::{MarkovNames, NameSettings};
use crate::pairing::{Candidate, Row, Subject, Truth, four_rows};
use crate::template::Relation;
use pstat_data::error::DataError;
use pstat_data::load::{DataRoot, load_domain};
use pstat_data::statement::Domain;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// Sizes and chain settings for one domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Subject names generated (each serving every relation of the domain).
    pub subjects: usize,
    /// Generated objects per relation.
    pub objects: usize,
    /// The Markov chain settings for subject names.
    pub subject_settings: NameSettings,
    /// The Markov chain settings for object names.
    pub object_settings: NameSettings,
    /// Rows kept per relation (Table 1: City 960, Medical 1000, Word 2394 split 1:3:3 like
    /// the upstream 500/1500/1500 word files).
    pub targets: Vec<(Relation, usize)>,
}

/// Each subject yields 2 objects × 4 rows = 8 rows per relation before subsampling, so the
/// subject counts leave room above every target.
pub fn plan(domain: Domain) -> Plan {
    match domain {
        Domain::CityLocations => Plan {
            subjects: 150,
            objects: 100,
            subject_settings: NameSettings::NAMES,
            object_settings: NameSettings::REGIONS,
            targets: vec![(Relation::Cities, 960)],
        },
        Domain::MedIndications => Plan {
            subjects: 150,
            objects: 100,
            subject_settings: NameSettings::NAMES,
            object_settings: NameSettings::NAMES,
            targets: vec![(Relation::Indications, 1000)],
        },
        Domain::WordDefinitions => Plan {
            subjects: 160,
            objects: 100,
            subject_settings: NameSettings::NAMES,
            object_settings: NameSettings::NAMES,
            targets: vec![
                (Relation::Instances, 342),
                (Relation::Types, 1026),
                (Relation::Synonyms, 1026),
            ],
        },
    }
}

impl Plan {
    /// The provenance written in every row's `source` column and in SOURCE.md.
    pub fn describe(&self, seed: u64) -> String {
        format!(
            "markov subjects {}; objects {}; seed={seed}",
            self.subject_settings.describe(),
            self.object_settings.describe()
        )
    }
}

/// Where the statements go, relative to the data folder (the loader's file list).
pub fn output_file(domain: Domain) -> String {
    format!("synthetic_fi/{domain}_synthetic_fi.csv")
}

/// What a generated name must not be.
pub struct Screen<'a> {
    /// The English dictionary: a name made only of its words is refused.
    pub words: &'a EnglishWords,
    /// Existing entities: a name equal to one, or reusing a non-English part of one, is
    /// refused.
    pub known: &'a KnownEntities,
}

impl Screen<'_> {
    /// Usable as a new entity: at least 3 characters, no stray spaces, not an existing entity
    /// or training name (ignoring case), reusing no non-English part of one ("Twin Zanarkand"),
    /// not English (every part a dictionary word).
    fn accepts(&self, name: &str, chain: &MarkovNames, training_lower: &HashSet<String>) -> bool {
        name.chars().count() >= 3
            && name.trim() == name
            && !name.contains("  ")
            && !self.known.contains(name)
            && !training_lower.contains(&name.to_lowercase())
            && !chain.is_training_name(name)
            && !self.words.is_english_phrase(name)
            && !self.known.shares_proper_part(name, self.words)
    }
}

/// Build Synthetic (Fi) rows for `domain` from its Fictional statements in `root`; known
/// entities are every subject/object of the True/False, Synthetic (TF) and Fictional files.
pub fn synthesize_from_root(
    root: &DataRoot,
    domain: Domain,
    words: &EnglishWords,
    seed: u64,
) -> Result<Vec<Row>, DataError> {
    let dataset = load_domain(root, domain)?;
    let fictional: Vec<(Relation, &str, &str)> = dataset
        .statements
        .iter()
        .filter(|s| s.kind.is_fictional())
        .map(|s| {
            let relation = s
                .relation
                .parse()
                .map_err(|e| DataError::Invalid(format!("{}: {e}", s.provenance)))?;
            Ok((relation, s.subject.as_str(), s.object.as_str()))
        })
        .collect::<Result<_, DataError>>()?;
    if fictional.is_empty() {
        return Err(DataError::Invalid(format!(
            "{}: no Fictional statements for {domain}; run `pstat data build-fictional` first",
            root.origin()
        )));
    }
    let known = KnownEntities::from_root(root, &["trilemma/", "fictional/"])?;
    synthesize(
        domain,
        &fictional,
        &Screen {
            words,
            known: &known,
        },
        seed,
    )
}

/// Build Synthetic (Fi) rows from Fictional `(relation, subject, object)` triples.
pub fn synthesize(
    domain: Domain,
    fictional: &[(Relation, &str, &str)],
    screen: &Screen<'_>,
    seed: u64,
) -> Result<Vec<Row>, DataError> {
    let plan = plan(domain);
    let source = plan.describe(seed);
    let mut rng = domain_rng(seed, domain);
    // Word head words are lower-case in object_1 upstream; the template capitalizes them.
    let case = |s: &str| match domain {
        Domain::WordDefinitions => s.to_lowercase(),
        _ => s.to_string(),
    };
    let subject_names: Vec<String> = distinct(fictional.iter().map(|(_, s, _)| case(s)));
    // Objects: one chain over every Fictional object of the domain. The word relations share
    // it, as upstream trained each relation on its values plus the whole vocabulary.
    let object_names: Vec<String> = distinct(fictional.iter().map(|(_, _, o)| o.to_string()));
    // The training names are entities too, whatever the caller's screen holds.
    let mut known = screen.known.clone();
    for name in subject_names.iter().chain(&object_names) {
        known.insert(name);
    }
    let screen = &Screen {
        words: screen.words,
        known: &known,
    };
    let mut taken = HashSet::new();
    let subjects = generate(
        &MarkovNames::train(
            subject_names.iter().map(String::as_str),
            plan.subject_settings,
        ),
        &subject_names,
        plan.subjects,
        screen,
        &mut taken,
        &mut rng,
    )?;
    let object_chain = MarkovNames::train(
        object_names.iter().map(String::as_str),
        plan.object_settings,
    );
    let mut rows = Vec::new();
    for &(relation, target) in &plan.targets {
        let objects = generate(
            &object_chain,
            &object_names,
            plan.objects,
            screen,
            &mut taken,
            &mut rng,
        )?;
        let pool: Vec<Candidate> = objects
            .iter()
            .map(|o| Candidate {
                text: o.clone(),
                source: source.clone(),
                group: String::new(),
            })
            .collect();
        let paired: Vec<Subject> = subjects
            .iter()
            .map(|name| Subject {
                name: name.clone(),
                correct: objects.choose_multiple(&mut rng, 2).cloned().collect(),
                source: source.clone(),
                group: String::new(),
            })
            .collect();
        let mut relation_rows = four_rows(relation, &paired, &pool, Truth::AlwaysFalse, &mut rng)?;
        // polars `sample(n, shuffle=True)`: a random subset in random order.
        relation_rows.shuffle(&mut rng);
        relation_rows.truncate(target);
        rows.extend(relation_rows);
    }
    Ok(rows)
}

/// Distinct names in first-appearance order.
fn distinct(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    names.filter(|n| seen.insert(n.clone())).collect()
}

/// `count` new names from `chain` that pass `screen` and are not in `taken` (which grows, so
/// no name is used twice across subjects and objects).
fn generate(
    chain: &MarkovNames,
    training: &[String],
    count: usize,
    screen: &Screen<'_>,
    taken: &mut HashSet<String>,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<String>, DataError> {
    let training_lower: HashSet<String> = training.iter().map(|t| t.to_lowercase()).collect();
    let mut names = Vec::with_capacity(count);
    // Each attempt already makes up to n_candidates × max_draws raw draws.
    for _ in 0..count * 20 {
        if names.len() == count {
            break;
        }
        let name = chain.make_name(rng, &mut |n| {
            !taken.contains(&n.to_lowercase()) && screen.accepts(n, chain, &training_lower)
        });
        if let Some(name) = name {
            taken.insert(name.to_lowercase());
            names.push(name);
        }
    }
    if names.len() < count {
        return Err(DataError::Invalid(format!(
            "the Markov chain ({}) produced only {} of {count} acceptable new names from {} \
             training names",
            chain.settings().describe(),
            names.len(),
            training.len()
        )));
    }
    Ok(names)
}

/// Rows per relation, affirmative/negated: the counts SOURCE.md records.
pub fn counts(rows: &[Row]) -> BTreeMap<String, (usize, usize)> {
    let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in rows {
        let c = out.entry(r.category.clone()).or_default();
        if r.negation {
            c.1 += 1;
        } else {
            c.0 += 1;
        }
    }
    out
}

/// Provenance of the Synthetic (Fi) files now in `root`: seed, generator settings, screens
/// and counts, with the command that regenerates them.
pub fn source_markdown(root: &DataRoot, seed: u64, words: &EnglishWords) -> String {
    // Writing into a String cannot fail.
    let mut md = String::from("# Synthetic (Fi) statements\n\n");
    let _ = writeln!(
        md,
        "Generated by `pstat data synthesize --seed {seed}` (seed {seed}) from the Fictional \
         statements in `../fictional/`. Regenerate with another seed to get another sample.\n"
    );
    md.push_str(
        "Names come from a character-level Markov chain with the behaviour of `namemaker` 1.2 \
         (variable context up to the order; of n candidates the one closest in length to the \
         mean training name is kept; up to 1000 raw draws per candidate; ChaCha8 RNG), trained \
         separately on the Fictional subjects and the Fictional objects of each domain (word \
         head words lower-cased; one object chain for the three word relations). A name is \
         rejected if it is shorter than 3 characters, a training name, any subject or object of \
         the True/False, Synthetic (TF) or Fictional data (case-insensitive), already generated, \
         or English (every space/hyphen-separated part in the word list). Each subject gets two \
         random generated objects and the upstream four-row expansion; every row is Neither \
         (`correct` false, `real_object` false); rows are then subsampled (seeded) to the \
         Table 1 sizes.\n\n",
    );
    let _ = writeln!(
        md,
        "Word list: `{}` ({} entries).\n",
        words.origin().display(),
        words.len()
    );
    md.push_str("| domain | settings (`source` column) | subjects | objects per relation | affirmative | negated |\n|---|---|---|---|---|---|\n");
    for domain in Domain::ALL {
        let plan = plan(domain);
        let (aff, neg) = match load_domain(root, domain) {
            Ok(d) => d
                .of_kind(pstat_data::Kind::SyntheticFi)
                .fold(
                    (0, 0),
                    |(a, n), s| {
                        if s.negated { (a, n + 1) } else { (a + 1, n) }
                    },
                ),
            Err(_) => (0, 0),
        };
        let _ = writeln!(
            md,
            "| {domain} | {} | {} | {} | {aff} | {neg} |",
            plan.describe(seed),
            plan.subjects,
            plan.objects
        );
    }
    md.push_str(
        "\nNot done here, unlike the paper's pipeline: model tagging and web-search validation \
         of the names, and upstream's manual keep-lists. The screens above are all automatic.\n",
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triples() -> Vec<(Relation, String, String)> {
        // Enough variety for an order-3 chain to invent 150 names: invented syllable soup.
        let syll = [
            "ka", "lo", "mir", "tha", "dun", "vel", "or", "is", "ban", "qe", "ru", "zan",
        ];
        let mut out = Vec::new();
        for (i, a) in syll.iter().enumerate() {
            for (j, b) in syll.iter().enumerate() {
                let subject = format!("{}{}{}", a.to_uppercase(), b, syll[(i + j) % syll.len()]);
                let object = format!("{b}{a}th");
                out.push((Relation::Cities, subject, object));
            }
        }
        out
    }

    #[test]
    fn synthetic_rows_are_new_neither_and_sized() {
        let owned = triples();
        let fictional: Vec<(Relation, &str, &str)> = owned
            .iter()
            .map(|(r, s, o)| (*r, s.as_str(), o.as_str()))
            .collect();
        let words = EnglishWords::from_words(["kaloth", "bank"]);
        let mut known = KnownEntities::default();
        known.insert("Kalomir");
        let screen = Screen {
            words: &words,
            known: &known,
        };
        let rows = synthesize(Domain::CityLocations, &fictional, &screen, 42).unwrap();
        assert_eq!(rows.len(), 960);
        assert!(rows.iter().all(|r| !r.correct && !r.real_object));
        assert!(rows.iter().all(|r| r.source
            == "markov subjects order=3 candidates=2; objects order=2 candidates=5; seed=42"));
        let training: HashSet<String> = owned
            .iter()
            .flat_map(|(_, s, o)| [s.to_lowercase(), o.to_lowercase()])
            .collect();
        for r in &rows {
            for name in [&r.object_1, &r.object_2] {
                assert!(!training.contains(&name.to_lowercase()), "{name}");
                assert!(!words.contains(name) && !known.contains(name), "{name}");
            }
        }
        let negated = rows.iter().filter(|r| r.negation).count();
        assert!((430..=530).contains(&negated), "{negated}");
        assert_eq!(
            rows,
            synthesize(Domain::CityLocations, &fictional, &screen, 42).unwrap()
        );
        assert_ne!(
            rows,
            synthesize(Domain::CityLocations, &fictional, &screen, 43).unwrap()
        );
    }

    #[test]
    fn too_little_training_data_is_a_clear_error() {
        let fictional = [(Relation::Cities, "Bree", "Eriador")];
        let words = EnglishWords::from_words(["x"]);
        let known = KnownEntities::default();
        let screen = Screen {
            words: &words,
            known: &known,
        };
        let err = synthesize(Domain::CityLocations, &fictional, &screen, 1).unwrap_err();
        assert!(err.to_string().contains("acceptable new names"), "{err}");
    }
}
