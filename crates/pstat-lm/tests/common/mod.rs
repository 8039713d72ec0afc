//! Shared by the tests that compare the runtime with llama.cpp fixtures: read a fixture and
//! load the model it was made from, pulled through the registry.

use pstat_lm::LanguageModel;
use serde::de::DeserializeOwned;

/// `tests/fixtures/<file>`, parsed.
pub fn read_fixture<T: DeserializeOwned>(file: &str) -> T {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("fixture parses")
}

/// The registry model `name`, checked to be the file (`sha256`) the fixture was made from.
pub fn load_model(name: &str, sha256: &str) -> LanguageModel {
    let path = pstat_lm::registry::resolve(name).expect("model is pulled");
    let lm = LanguageModel::load(&path).expect("model loads");
    assert_eq!(lm.sha256(), sha256, "fixture was made from another file");
    lm
}
