//! Every ```toml example of README.md and docs/*.md is a run config pstat reads: a field
//! renamed or removed in the code fails here rather than in a reader's first run.

use pstat_study::RunConfig;
use std::path::Path;

#[test]
fn every_toml_example_in_the_docs_is_a_run_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs = vec![root.join("README.md")];
    let mut listed: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    listed.sort();
    docs.extend(listed);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```toml\n") {
            let body = &rest[start + "```toml\n".len()..];
            let end = body.find("```").expect("a closed fence");
            let line = text.len() - rest.len() + start;
            let line = text[..line].lines().count() + 1;
            if let Err(e) = toml::from_str::<RunConfig>(&body[..end]) {
                wrong.push(format!("{}:{line}: {e}", doc.display()));
            }
            checked += 1;
            rest = &body[end + 3..];
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 4, "{checked} examples found");
}
