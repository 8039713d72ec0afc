//! The upstream generator core (`DatasetGenerator.generate_full_dataset`, notes §1.6), shared
//! by the Fictional and Synthetic (Fi) builders: every (subject, correct object v) becomes four
//! statements, (v, negated), (v, affirmative), (u1, negated), (u2, affirmative), where u1 and u2
//! are wrong objects drawn by the upstream `lookup_incorrect` rules. Unlike upstream, wrong
//! objects come preferably from the subject's own work, then its group (medium or language),
//! then anywhere, so a Fictional (F) statement re-pairs within the same fiction.

use crate::template::{Fact, Relation, render};
use pstat_data::error::DataError;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashSet;

/// An entity with its correct objects and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The entity as written in `object_1`.
    pub name: String,
    /// Its correct objects; each yields four rows.
    pub correct: Vec<String>,
    /// The work (Fictional) or generator settings (Synthetic (Fi)).
    pub source: String,
    /// A wider pool to draw wrong objects from: the medium or language; may be empty.
    pub group: String,
}

/// A possible object, with the work and group it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The object as written in `object_2`.
    pub text: String,
    /// The work (Fictional) or generator settings (Synthetic (Fi)) it comes from.
    pub source: String,
    /// Its medium or language; may be empty.
    pub group: String,
}

/// How `correct` is filled: the truth of the sentence within its fiction, or always false
/// (Synthetic statements have no truth, upstream writes false).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    /// `correct` is the sentence's truth within its fiction (Fictional (T)/(F)).
    Canonical,
    /// `correct` is false on every row (Synthetic (Fi): Neither).
    AlwaysFalse,
}

/// One row of a generated statement file; the column order of the shipped CSVs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The rendered sentence.
    pub statement: String,
    /// The subject.
    pub object_1: String,
    /// The object the sentence pairs it with (correct or wrong).
    pub object_2: String,
    /// The subject's correct objects joined with ", " (upstream format).
    pub correct_object_2: String,
    /// Whether the sentence as written is true (within its fiction), per [`Truth`].
    pub correct: bool,
    /// Whether the sentence is negated.
    pub negation: bool,
    /// Always false: the entities are not real (Neither).
    pub real_object: bool,
    /// The relation's name ([`Relation::as_str`]).
    pub category: String,
    /// The subject's work or generator settings.
    pub source: String,
}

/// Expand `subjects` into four rows per correct object, in subject order.
pub fn four_rows(
    relation: Relation,
    subjects: &[Subject],
    pool: &[Candidate],
    truth: Truth,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Row>, DataError> {
    let mut rows = Vec::with_capacity(subjects.len() * 4);
    for subject in subjects {
        // Wrong objects already used with this subject, per polarity: a second draw of the same
        // one would repeat a statement.
        let mut used = [HashSet::new(), HashSet::new()];
        for v in &subject.correct {
            let u1 = lookup_incorrect(relation, subject, pool, &used[1], rng)?;
            used[1].insert(u1.clone());
            let u2 = lookup_incorrect(relation, subject, pool, &used[0], rng)?;
            used[0].insert(u2.clone());
            for (object, negated, canonical) in [
                (v, true, false),
                (v, false, true),
                (&u1, true, true),
                (&u2, false, false),
            ] {
                let fact = Fact {
                    relation,
                    subject: subject.name.clone(),
                    object: object.clone(),
                    negated,
                };
                rows.push(Row {
                    statement: render(&fact),
                    object_1: subject.name.clone(),
                    object_2: object.clone(),
                    correct_object_2: subject.correct.join(", "),
                    correct: truth == Truth::Canonical && canonical,
                    negation: negated,
                    real_object: false,
                    category: relation.as_str().to_string(),
                    source: subject.source.clone(),
                });
            }
        }
    }
    Ok(rows)
}

/// A wrong object for `subject`, uniformly from the closest tier (same work, same group, any)
/// that has one. Excluded as upstream: a correct value (case-insensitively), anything sharing a
/// lower-cased word with a correct value, and for drugs anything whose initials match a correct
/// value's. Also excluded: substrings of a correct value, which the upstream truth rule
/// (`object in correct_object_2`) would read as correct.
fn lookup_incorrect(
    relation: Relation,
    subject: &Subject,
    pool: &[Candidate],
    used: &HashSet<String>,
    rng: &mut ChaCha8Rng,
) -> Result<String, DataError> {
    let eligible = |c: &&Candidate| {
        !used.contains(&c.text) && is_wrong_for(relation, &c.text, &subject.correct)
    };
    let tiers: [&dyn Fn(&Candidate) -> bool; 3] = [
        &|c| c.source == subject.source,
        &|c| !subject.group.is_empty() && c.group == subject.group,
        &|_| true,
    ];
    for in_tier in tiers {
        let mut options: Vec<&str> = pool
            .iter()
            .filter(|c| in_tier(c))
            .filter(eligible)
            .map(|c| c.text.as_str())
            .collect();
        options.sort_unstable();
        options.dedup();
        if !options.is_empty() {
            return Ok(options[rng.random_range(0..options.len())].to_string());
        }
    }
    Err(DataError::Invalid(format!(
        "no wrong {} object is left for `{}` (correct: {}); the object pool is too small",
        relation,
        subject.name,
        subject.correct.join(", ")
    )))
}

fn is_wrong_for(relation: Relation, candidate: &str, correct: &[String]) -> bool {
    let cand = candidate.to_lowercase();
    let cand_words: HashSet<&str> = cand.split_whitespace().collect();
    correct.iter().all(|v| {
        let v = v.to_lowercase();
        let clash = cand == v
            || v.contains(&cand)
            || v.split_whitespace().any(|w| cand_words.contains(w))
            || relation == Relation::Indications
                && (initials(&cand) == initials(&v) || cand == initials(&v));
        !clash
    })
}

/// "basilisk venom poisoning" → "bvp".
fn initials(s: &str) -> String {
    s.split_whitespace()
        .filter_map(|w| w.chars().next())
        .collect()
}

/// Serialize rows as the shipped CSV (header first, RFC 4180 quoting).
pub fn to_csv(rows: &[Row]) -> Result<String, DataError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer
            .serialize(row)
            .map_err(|e| DataError::Invalid(format!("cannot serialize a row: {e}")))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| DataError::Invalid(format!("cannot finish the CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| DataError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn cand(text: &str, source: &str, group: &str) -> Candidate {
        Candidate {
            text: text.into(),
            source: source.into(),
            group: group.into(),
        }
    }

    fn subject(name: &str, correct: &[&str], source: &str, group: &str) -> Subject {
        Subject {
            name: name.into(),
            correct: correct.iter().map(|s| s.to_string()).collect(),
            source: source.into(),
            group: group.into(),
        }
    }

    #[test]
    fn four_rows_in_upstream_order_with_canonical_truth() {
        let pool = [
            cand("Gondor", "LotR", "lit"),
            cand("Rohan", "LotR", "lit"),
            cand("Westeros", "ASOIAF", "lit"),
        ];
        let subjects = [subject("Edoras", &["Rohan"], "LotR", "lit")];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let rows = four_rows(
            Relation::Cities,
            &subjects,
            &pool,
            Truth::Canonical,
            &mut rng,
        )
        .unwrap();
        let got: Vec<(&str, bool, bool)> = rows
            .iter()
            .map(|r| (r.object_2.as_str(), r.negation, r.correct))
            .collect();
        // Gondor is the only other region of the same work.
        assert_eq!(
            got,
            [
                ("Rohan", true, false),
                ("Rohan", false, true),
                ("Gondor", true, true),
                ("Gondor", false, false)
            ]
        );
        assert_eq!(rows[1].statement, "The city of Edoras is located in Rohan.");
        assert!(rows.iter().all(|r| !r.real_object && r.source == "LotR"));
    }

    #[test]
    fn wrong_objects_fall_back_to_group_then_anywhere() {
        let pool = [
            cand("lycanthropy", "HP", "x"),
            cand("Sand Pest", "Dune", "y"),
            cand("Rigelian fever", "Trek", "x"),
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let s = subject("Wolfsbane Potion", &["lycanthropy"], "HP", "x");
        let u = lookup_incorrect(Relation::Indications, &s, &pool, &HashSet::new(), &mut rng);
        assert_eq!(u.unwrap(), "Rigelian fever");
        let s = subject("Wolfsbane Potion", &["lycanthropy"], "HP", "");
        let u = lookup_incorrect(Relation::Indications, &s, &pool, &HashSet::new(), &mut rng);
        assert!(["Sand Pest", "Rigelian fever"].contains(&u.unwrap().as_str()));
    }

    #[test]
    fn upstream_exclusions_hold() {
        let correct = vec!["basilisk venom poisoning".to_string()];
        assert!(!is_wrong_for(
            Relation::Indications,
            "Basilisk Venom Poisoning",
            &correct
        ));
        assert!(!is_wrong_for(
            Relation::Indications,
            "snake venom",
            &correct
        ));
        assert!(!is_wrong_for(
            Relation::Indications,
            "bad vile pox",
            &correct
        ));
        assert!(!is_wrong_for(Relation::Indications, "bvp", &correct));
        assert!(!is_wrong_for(Relation::Cities, "isk", &correct));
        assert!(is_wrong_for(Relation::Indications, "lycanthropy", &correct));
        assert!(is_wrong_for(Relation::Cities, "bad vile pox", &correct));
    }

    #[test]
    fn exhausted_pool_is_an_error_not_a_repeat() {
        let pool = [cand("Rohan", "LotR", "")];
        let subjects = [subject("Edoras", &["Rohan"], "LotR", "")];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let err = four_rows(
            Relation::Cities,
            &subjects,
            &pool,
            Truth::Canonical,
            &mut rng,
        );
        assert!(err.unwrap_err().to_string().contains("Edoras"));
    }

    #[test]
    fn csv_has_the_shipped_columns() {
        let row = Row {
            statement: "A, b.".into(),
            object_1: "A".into(),
            object_2: "b".into(),
            correct_object_2: "b, c".into(),
            correct: true,
            negation: false,
            real_object: false,
            category: "cities".into(),
            source: "W".into(),
        };
        let text = to_csv(&[row]).unwrap();
        assert_eq!(
            text,
            "statement,object_1,object_2,correct_object_2,correct,negation,real_object,category,source\n\
             \"A, b.\",A,b,\"b, c\",true,false,false,cities,W\n"
        );
    }
}
