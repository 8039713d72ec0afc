//! Fictional statements (Appendix B.1.3) from the hand-curated tables of canonically true
//! pairs in `data/fictional/curated/`: each pair gives a canonically true affirmative and a
//! false negated statement, and two re-pairings with wrong objects of the same work give a
//! true negated and a false affirmative one. So Fictional (T)/(F) and affirmative/negated are
//! both 50/50, like the upstream True/False data.

use crate::lexicon::KnownEntities;
use crate::pairing::{Candidate, Row, Subject, Truth, four_rows};
use crate::template::Relation;
use pstat_data::error::{DataError, UnknownName};
use pstat_data::load::{DataRoot, FileRole, domain_files};
use pstat_data::statement::Domain;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The seed the shipped Fictional and Synthetic (Fi) files were made with.
pub const DEFAULT_SEED: u64 = 42;

/// The curated table of a domain, relative to the data folder.
pub fn curated_table(domain: Domain) -> &'static str {
    match domain {
        Domain::CityLocations => "fictional/curated/city_pairs.csv",
        Domain::MedIndications => "fictional/curated/med_pairs.csv",
        Domain::WordDefinitions => "fictional/curated/word_pairs.csv",
    }
}

/// Where the built statements go, relative to the data folder (the loader's file list).
pub fn output_file(domain: Domain) -> String {
    format!("fictional/{domain}_fictional.csv")
}

/// One canonically true pair of a curated table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratedPair {
    /// The relation the pair stands in (fixed per domain; per row in word tables).
    pub relation: Relation,
    /// The fictional entity: city, drug or head word (`object_1`).
    pub subject: String,
    /// Its correct object within the fiction: region, condition or word category, hypernym or
    /// synonym (`object_2`).
    pub object: String,
    /// The work the pair is canon in.
    pub source: String,
    /// Medium (cities) or language (words); empty for medical pairs.
    pub group: String,
    /// 1-based line in the table, for error messages.
    pub line: u64,
}

/// Columns of each curated table: subject, object, group (if any); `source` is always there,
/// and word tables name the relation per row.
fn columns(domain: Domain) -> (&'static str, &'static str, Option<&'static str>) {
    match domain {
        Domain::CityLocations => ("city", "region", Some("medium")),
        Domain::MedIndications => ("drug", "condition", None),
        Domain::WordDefinitions => ("word", "gloss", Some("language")),
    }
}

/// Parse a curated table. Every required cell must be non-empty; `path` names the file in
/// errors.
pub fn parse_curated(
    path: &Path,
    text: &str,
    domain: Domain,
) -> Result<Vec<CuratedPair>, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| DataError::Csv {
            path: path.into(),
            line: 1,
            message: e.to_string(),
        })?
        .clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| DataError::MissingColumn {
                path: path.into(),
                column: name.into(),
                present: headers.iter().collect::<Vec<_>>().join(", "),
            })
    };
    let (subject_col, object_col, group_col) = columns(domain);
    let c_subject = column(subject_col)?;
    let c_object = column(object_col)?;
    let c_source = column("source")?;
    let c_group = group_col.map(column).transpose()?;
    let c_relation = match domain {
        Domain::WordDefinitions => Some(column("relation")?),
        _ => None,
    };
    let mut pairs = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i as u64 + 2;
        let record = record.map_err(|e| DataError::Csv {
            path: path.into(),
            line,
            message: e.to_string(),
        })?;
        let cell = |idx: usize| -> Result<String, DataError> {
            let value = record.get(idx).unwrap_or("").trim();
            if value.is_empty() {
                return Err(DataError::Field {
                    path: path.into(),
                    line,
                    field: headers[idx].to_string(),
                    message: "empty cell".into(),
                });
            }
            Ok(value.to_string())
        };
        let relation = match c_relation {
            Some(c) => cell(c)?
                .parse()
                .map_err(|UnknownName(message)| DataError::Field {
                    path: path.into(),
                    line,
                    field: "relation".into(),
                    message,
                })?,
            None => Relation::of_domain(domain)[0],
        };
        pairs.push(CuratedPair {
            relation,
            subject: cell(c_subject)?,
            object: cell(c_object)?,
            source: cell(c_source)?,
            group: c_group.map(cell).transpose()?.unwrap_or_default(),
            line,
        });
    }
    Ok(pairs)
}

/// The Fictional statements of one domain: four rows per curated pair, relations in template
/// order, subjects in table order. Seeded per domain, so building one domain alone gives the
/// same file as building all three.
pub fn build(domain: Domain, pairs: &[CuratedPair], seed: u64) -> Result<Vec<Row>, DataError> {
    let mut rng = domain_rng(seed, domain);
    let mut rows = Vec::new();
    for &relation in Relation::of_domain(domain) {
        let of_relation: Vec<&CuratedPair> =
            pairs.iter().filter(|p| p.relation == relation).collect();
        let pool: Vec<Candidate> = of_relation
            .iter()
            .map(|p| Candidate {
                text: p.object.clone(),
                source: p.source.clone(),
                group: p.group.clone(),
            })
            .collect();
        rows.extend(four_rows(
            relation,
            &group_by_subject(&of_relation),
            &pool,
            Truth::Canonical,
            &mut rng,
        )?);
    }
    Ok(rows)
}

/// Upstream's `source` dict: one entry per subject (first appearance order) with all its
/// correct objects.
fn group_by_subject(pairs: &[&CuratedPair]) -> Vec<Subject> {
    let mut subjects: Vec<Subject> = Vec::new();
    for p in pairs {
        match subjects.iter_mut().find(|s| s.name == p.subject) {
            Some(s) if !s.correct.contains(&p.object) => s.correct.push(p.object.clone()),
            Some(_) => {}
            None => subjects.push(Subject {
                name: p.subject.clone(),
                correct: vec![p.object.clone()],
                source: p.source.clone(),
                group: p.group.clone(),
            }),
        }
    }
    subjects
}

/// A random stream per (seed, domain): domains never share draws.
pub fn domain_rng(seed: u64, domain: Domain) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(Domain::ALL.iter().position(|d| *d == domain).unwrap_or(0) as u64);
    rng
}

/// Curated pairs that would put a real entity where a fictional one belongs: a subject equal
/// (case-insensitively) to any subject or object of the real data of any domain, or an object
/// equal to a real drug or condition. City regions may be real (Quahog ↦ Rhode Island, the
/// paper's own example), and word objects are English glosses ("a type of sword").
pub fn real_overlaps(
    root: &DataRoot,
    domain: Domain,
    pairs: &[CuratedPair],
) -> Result<Vec<(u64, String)>, DataError> {
    let real_files = |d: Domain| {
        domain_files(d)
            .iter()
            .filter(|(_, role)| *role == FileRole::Real)
            .map(|(rel, _)| *rel)
            .collect::<Vec<_>>()
    };
    let all_real: Vec<&str> = Domain::ALL.iter().flat_map(|d| real_files(*d)).collect();
    let any_real = KnownEntities::from_files(root, all_real, &["object_1", "object_2"])?;
    let object_columns: &[&str] = match domain {
        Domain::MedIndications => &["object_1", "object_2"],
        // Regions may be real places and word objects are English glosses, by design.
        Domain::CityLocations | Domain::WordDefinitions => &[],
    };
    let own_real = KnownEntities::from_files(root, real_files(domain), object_columns)?;
    Ok(pairs
        .iter()
        .filter_map(|p| {
            let clash = if any_real.contains(&p.subject) {
                &p.subject
            } else if own_real.contains(&p.object) {
                &p.object
            } else {
                return None;
            };
            let message = format!(
                "{} line {}: `{}` is a real entity ({} ↦ {})",
                curated_table(domain),
                p.line,
                clash,
                p.subject,
                p.object
            );
            Some((p.line, message))
        })
        .collect())
}

/// Read the curated table of `domain` under `data_dir`, leave out the pairs that overlap real
/// entities (returned as messages), and build the statements of the rest.
pub fn build_from_dir(
    data_dir: &Path,
    domain: Domain,
    seed: u64,
) -> Result<(Vec<Row>, Vec<String>), DataError> {
    let path: PathBuf = data_dir.join(curated_table(domain));
    let text = std::fs::read_to_string(&path).map_err(|e| DataError::io(&path, e))?;
    let mut pairs = parse_curated(&path, &text, domain)?;
    let root = DataRoot::from_dir(data_dir)?;
    let (lines, messages): (HashSet<u64>, Vec<String>) =
        real_overlaps(&root, domain, &pairs)?.into_iter().unzip();
    pairs.retain(|p| !lines.contains(&p.line));
    Ok((build(domain, &pairs, seed)?, messages))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CITIES: &str = "city,region,source,medium\n\
        Minas Tirith,Gondor,LotR,literature\n\
        Edoras,Rohan,LotR,literature\n\
        Hobbiton,the Shire,LotR,literature\n\
        Emerald City,the Land of Oz,Oz,literature\n\
        Quahog,Rhode Island,Family Guy,animation\n\
        Bikini Bottom,the Pacific Ocean,SpongeBob,animation\n";

    const WORDS: &str = "word,relation,gloss,language,source\n\
        snozzcumber,types,vegetable,Gobblefunk,BFG\n\
        whizzpopper,synonyms,fart,Gobblefunk,BFG\n\
        arakh,types,sword,Dothraki,GoT\n\
        khalasar,synonyms,horde,Dothraki,GoT\n\
        ikran,types,animal,Na'vi,Avatar\n\
        Eywa,instances,deity,Na'vi,Avatar\n\
        Bloodbottler,instances,giant,Gobblefunk,BFG\n";

    fn parse(text: &str, domain: Domain) -> Vec<CuratedPair> {
        parse_curated(Path::new("t.csv"), text, domain).unwrap()
    }

    #[test]
    fn cities_give_four_balanced_rows_per_pair() {
        let pairs = parse(CITIES, Domain::CityLocations);
        let rows = build(Domain::CityLocations, &pairs, DEFAULT_SEED).unwrap();
        assert_eq!(rows.len(), 24);
        assert_eq!(rows.iter().filter(|r| r.correct).count(), 12);
        assert_eq!(rows.iter().filter(|r| r.negation).count(), 12);
        // A wrong region of Minas Tirith comes from the same work, never with a shared "the".
        assert!(["Rohan", "the Shire"].contains(&rows[2].object_2.as_str()));
        assert_eq!(
            rows[1].statement,
            "The city of Minas Tirith is located in Gondor."
        );
        assert!(
            rows.iter()
                .any(|r| r.statement == "Emerald City is located in the Land of Oz.")
        );
        assert_eq!(
            rows,
            build(Domain::CityLocations, &pairs, DEFAULT_SEED).unwrap()
        );
    }

    #[test]
    fn words_are_built_per_relation_with_their_templates() {
        let pairs = parse(WORDS, Domain::WordDefinitions);
        let rows = build(Domain::WordDefinitions, &pairs, 7).unwrap();
        assert_eq!(rows.len(), 28);
        let cats: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(cats[0], "instances");
        assert!(
            rows.iter()
                .any(|r| r.statement == "Snozzcumber is a type of a vegetable.")
        );
        assert!(rows.iter().any(|r| r.statement == "Eywa is not a deity."));
        for r in &rows {
            let pool = pairs.iter().filter(|p| p.relation.as_str() == r.category);
            assert!(pool.clone().any(|p| p.object == r.object_2), "{r:?}");
        }
    }

    #[test]
    fn real_entities_are_flagged_but_real_regions_are_allowed() {
        let text = "city,region,source,medium\n\
            Palembang,Gondor,X,lit\n\
            Quahog,Rhode Island,Family Guy,animation\n\
            Malgudi,India,Malgudi Days,lit\n\
            Erinsborough,Victoria,Neighbours,television\n\
            Tirith,Laoag,X,lit\n";
        let pairs = parse(text, Domain::CityLocations);
        let flagged = real_overlaps(&DataRoot::bundled(), Domain::CityLocations, &pairs).unwrap();
        let lines: Vec<u64> = flagged.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2]);
        assert!(
            flagged[0].1.contains("`Palembang` is a real entity"),
            "{}",
            flagged[0].1
        );
    }

    #[test]
    fn bad_tables_name_file_line_and_field() {
        let err = parse_curated(
            Path::new("c.csv"),
            "city,region,source\nA,B,W\n",
            Domain::CityLocations,
        )
        .unwrap_err();
        assert!(err.to_string().contains("medium"), "{err}");
        let err = parse_curated(
            Path::new("w.csv"),
            "word,relation,gloss,language,source\nx,kinds,y,L,W\n",
            Domain::WordDefinitions,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("line 2, field `relation`"),
            "{err}"
        );
        let err = parse_curated(
            Path::new("m.csv"),
            "drug,condition,source\nA,,W\n",
            Domain::MedIndications,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("field `condition`: empty cell"),
            "{err}"
        );
    }
}
