//! Loader edge cases the upstream files contain, and the errors bad input gets.

use pstat_data::load::{FileRole, parse_csv};
use pstat_data::{DataRoot, Domain, Kind, load_domain};
use std::path::Path;

fn parse(text: &str, role: FileRole) -> Result<Vec<pstat_data::Statement>, pstat_data::DataError> {
    parse_csv(
        Path::new("data/x.csv"),
        "trilemma/x.csv",
        text,
        Domain::CityLocations,
        role,
    )
}

const HEADER: &str =
    "statement,object_1,object_2,correct_object_2,correct,negation,real_object,category";

#[test]
fn bom_mixed_booleans_duplicates_and_double_periods() {
    let text = format!(
        "\u{feff}{HEADER}\n\
         The city of Córdoba is located in Argentina.,Córdoba,Argentina,Argentina,TRUE,FALSE,TRUE,cities\n\
         The city of Córdoba is located in Argentina.,Córdoba,Argentina,Argentina,true,false,true,cities\n\
         The city of Lima is not located in Peru..,Lima,Peru,Peru,False,True,True,cities\n"
    );
    let rows = parse(&text, FileRole::Real).unwrap();
    assert_eq!(
        rows.len(),
        3,
        "duplicates are kept: ids and counts depend on them"
    );
    assert_eq!(rows[0].subject, "Córdoba");
    assert_eq!(rows[0].kind, Kind::True);
    assert_eq!(rows[1].id, "x:1");
    assert_eq!(rows[2].kind, Kind::False);
    assert!(rows[2].negated);
    assert!(rows[2].text.ends_with(".."));
    assert_eq!(rows[2].provenance, "trilemma/x.csv:4");
}

#[test]
fn extra_and_reordered_columns_are_tolerated() {
    let text = "category,real_object,negation,correct,object_2,object_1,statement,freq_1\n\
                cities,false,false,false,Jamoates,Norminsk,The city of Norminsk is located in Jamoates.,0.0\n";
    let rows = parse(text, FileRole::SyntheticTf).unwrap();
    assert_eq!(rows[0].kind, Kind::SyntheticTf);
    assert_eq!(rows[0].object, "Jamoates");
}

#[test]
fn errors_name_file_line_and_field() {
    let text =
        format!("{HEADER}\nA.,a,b,b,TRUE,FALSE,TRUE,cities\nB.,a,b,b,maybe,FALSE,TRUE,cities\n");
    let err = parse(&text, FileRole::Real).unwrap_err().to_string();
    assert!(
        err.contains("data/x.csv")
            && err.contains("line 3")
            && err.contains("`correct`")
            && err.contains("maybe"),
        "{err}"
    );

    let err = parse("statement,object_1\nA.,a\n", FileRole::Real)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing required column `object_2`"), "{err}");

    let text = format!("{HEADER}\nA.,a,b,b,TRUE,FALSE,TRUE,cities\nB.,a,b\n");
    let err = parse(&text, FileRole::Real).unwrap_err().to_string();
    assert!(
        err.contains("data/x.csv") && err.contains("line 3"),
        "{err}"
    );

    let text = format!("{HEADER}\n ,a,b,b,TRUE,FALSE,TRUE,cities\n");
    let err = parse(&text, FileRole::Real).unwrap_err().to_string();
    assert!(err.contains("empty statement"), "{err}");

    let text = format!("{HEADER}\nA.,a,b,b,TRUE,FALSE,TRUE,cities\n");
    let err = parse(&text, FileRole::Fictional).unwrap_err().to_string();
    assert!(err.contains("real_object"), "{err}");
}

#[test]
fn word_definitions_concatenate_three_relations_in_datapack_order() {
    let data = load_domain(&DataRoot::bundled(), Domain::WordDefinitions).unwrap();
    // Count the upstream (trilemma) rows only: the Fictional and Synthetic (Fi) files add more.
    let upstream = |relation: &str| {
        data.statements
            .iter()
            .filter(|s| s.provenance.starts_with("trilemma/") && s.relation == relation)
            .count()
    };
    assert_eq!(upstream("instances"), 1500);
    assert_eq!(upstream("types"), 3500);
    assert_eq!(upstream("synonyms"), 3500);
    assert_eq!(data.statements[0].id, "word_instances:0");
    assert_eq!(data.statements[1000].id, "word_types:0");
    assert_eq!(data.statements[5000].id, "word_types_synthetic:0");
}

#[test]
fn user_data_directory_errors_when_required_file_missing() {
    let dir = tempfile::tempdir().unwrap();
    let root = DataRoot::from_dir(dir.path()).unwrap();
    let err = load_domain(&root, Domain::CityLocations)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("city_locations.csv") && err.contains("missing"),
        "{err}"
    );
    assert!(DataRoot::from_dir(&dir.path().join("nope")).is_err());
}

#[test]
fn a_repeated_statement_is_refused_naming_both_lines() {
    let mut root = DataRoot::bundled();
    let rel = "fictional/city_locations_fictional.csv";
    let text = root.file(rel).unwrap().to_string();
    let second = text.lines().nth(1).unwrap().to_string();
    // The upstream files' own duplicates are the published data and load as before.
    load_domain(&root, Domain::CityLocations).unwrap();
    root.insert(rel, format!("{text}{second}\n"));
    let err = load_domain(&root, Domain::CityLocations)
        .unwrap_err()
        .to_string();
    let line = text.lines().count() + 1;
    assert!(
        err.contains(&format!("data/{rel}, line {line}"))
            && err.contains(&format!("data/{rel}, line 2"))
            && err.contains("listed twice"),
        "{err}"
    );
    // A file whose every statement is duplicated names how many more there are.
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    root.insert(rel, format!("{text}{body}"));
    let err = load_domain(&root, Domain::CityLocations)
        .unwrap_err()
        .to_string();
    assert!(err.contains("more repeated statements"), "{err}");
}

/// Spellings of one statement that differ only in Unicode normalisation, invisible characters
/// or spacing are one statement: refused as a repeat, naming both spellings. The published
/// files keep their own duplicates in a CRLF copy too.
#[test]
fn a_repeat_spelled_otherwise_is_a_repeat() {
    let rel = "fictional/city_locations_fictional.csv";
    let text = DataRoot::bundled().file(rel).unwrap().to_string();
    let second = text.lines().nth(1).unwrap().to_string();
    let statement = second.split(',').next().unwrap().to_string();
    let decomposed: String = {
        use unicode_normalization::UnicodeNormalization;
        statement.nfd().collect()
    };
    for variant in [
        statement.replacen(' ', "  ", 1),
        statement.replacen(' ', "\u{a0}", 1),
        format!("{statement}\u{200b}"),
        format!("{decomposed} "),
    ] {
        let mut root = DataRoot::bundled();
        let row = second.replacen(&statement, &format!("\"{variant}\""), 1);
        root.insert(rel, format!("{text}{row}\n"));
        let err = load_domain(&root, Domain::CityLocations)
            .unwrap_err()
            .to_string();
        assert!(err.contains("listed twice"), "{variant:?}: {err}");
    }
    let mut root = DataRoot::bundled();
    for domain in Domain::ALL {
        for (file, _) in pstat_data::load::domain_files(domain) {
            let crlf = root
                .file(file)
                .unwrap()
                .replace("\r\n", "\n")
                .replace('\n', "\r\n");
            root.insert(file, crlf);
        }
    }
    for domain in Domain::ALL {
        load_domain(&root, domain).unwrap();
    }
}

#[test]
fn a_copy_of_the_published_files_keeps_their_own_duplicates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let root = DataRoot::from_dir(&dir).unwrap();
    for domain in Domain::ALL {
        load_domain(&root, domain).unwrap();
    }
}

fn parsed(body: &str) -> Result<Vec<pstat_data::Statement>, String> {
    pstat_data::load::parse_csv(
        Path::new("x.csv"),
        "fictional/x.csv",
        &format!("{HEADER}\n{body}"),
        Domain::CityLocations,
        pstat_data::load::FileRole::Fictional,
    )
    .map_err(|e| e.to_string())
}

/// Errors name the line a record starts on, past a quoted field that spans lines; an empty
/// subject or object (they group the splits and mark the object tokens) is refused.
#[test]
fn field_errors_name_the_physical_line_and_entities_are_required() {
    let body = "\"The city of A\nis in B.\",A,B,B,true,false,false,cities\n\
                The city of C is in D.,C,D,D,maybe,false,false,cities\n";
    let err = parsed(body).unwrap_err();
    assert!(err.contains("x.csv, line 4, field `correct`"), "{err}");
    let err = parsed("The city of C is in D.,,D,D,true,false,false,cities\n").unwrap_err();
    assert!(err.contains("line 2, field `object_1`: empty"), "{err}");
    let err = parsed("The city of C is in D.,C, ,D,true,false,false,cities\n").unwrap_err();
    assert!(err.contains("field `object_2`: empty"), "{err}");
}

/// A data folder's file that is not UTF-8 is refused naming its line; a link to nothing is
/// named, not read as an absent file.
#[test]
fn a_data_file_that_is_not_utf8_or_a_dangling_link_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let fictional = dir.path().join("fictional");
    std::fs::create_dir(&fictional).unwrap();
    let mut bytes =
        format!("{HEADER}\nThe city of A is in B.,A,B,B,true,false,false,cities\n").into_bytes();
    bytes.extend(b"The city of \xe9 is in B.,X,B,B,true,false,false,cities\n");
    std::fs::write(fictional.join("city_locations_fictional.csv"), bytes).unwrap();
    let err = DataRoot::from_dir(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("city_locations_fictional.csv, line 3") && err.contains("not UTF-8"),
        "{err}"
    );
    std::fs::remove_file(fictional.join("city_locations_fictional.csv")).unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("nowhere.csv"),
        fictional.join("city_locations_fictional.csv"),
    )
    .unwrap();
    let err = DataRoot::from_dir(dir.path()).unwrap_err().to_string();
    assert!(err.contains("a link to nothing"), "{err}");
}
