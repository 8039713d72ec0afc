//! The familiarity analysis's input against llama.cpp: for >= 100 bundled
//! statements of every kind, read plainly (BOS + statement), our token ids equal llama.cpp's
//! and every p(t_i | t_<i) is within 0.01 of llama.cpp's on the model re-quantized to F32 with
//! an f32 KV cache (tools/fixtures/token_probs.py). The models are pulled through the registry.

mod common;

use pstat_lm::input::StatementEncoder;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    model: String,
    source_sha256: String,
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct Record {
    statement: String,
    ids: Vec<u32>,
    probs: Vec<f32>,
}

fn check(fixture_file: &str) {
    let fixture: Fixture = common::read_fixture(fixture_file);
    let lm = common::load_model(&fixture.model, &fixture.source_sha256);
    let encoder = StatementEncoder::for_model(&lm).expect("encoder");
    let ids: Vec<Vec<u32>> = fixture
        .records
        .iter()
        .map(|r| {
            let ours: Vec<u32> = encoder
                .encode_plain_with_offsets(&r.statement)
                .expect("encodes")
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            assert_eq!(ours, r.ids, "token ids of {:?}", r.statement);
            ours
        })
        .collect();
    let ours = lm.token_probabilities(&ids).expect("forward");
    let mut worst = (0.0f32, "");
    let mut tokens = 0;
    for (record, probs) in fixture.records.iter().zip(&ours) {
        assert_eq!(probs.len(), record.probs.len());
        for (theirs, mine) in record.probs.iter().zip(probs) {
            tokens += 1;
            let delta = (theirs - mine).abs();
            if delta > worst.0 {
                worst = (delta, record.statement.as_str());
            }
        }
    }
    println!(
        "{}: {} statements, {tokens} tokens, max |Δp| {:.5} ({:?})",
        fixture.model,
        fixture.records.len(),
        worst.0,
        worst.1
    );
    assert!(fixture.records.len() >= 100);
    assert!(worst.0 <= 0.01, "max |Δp| {} on {:?}", worst.0, worst.1);
}

#[test]
fn smollm2_token_probabilities_match_llama_cpp() {
    check("token-probs-smollm2-135m-instruct.json");
}

#[test]
fn gemma3_token_probabilities_match_llama_cpp() {
    check("token-probs-gemma-3-270m.json");
}
