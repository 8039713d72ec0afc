//! Exact mode against llama.cpp, the trusted reference: the fixtures hold
//! llama.cpp's next-token log-probabilities for >= 300 P-StaT prompts per model, computed on the
//! model re-quantized to F32 with an f32 KV cache (tools/fixtures/logprobs.py). Our f32-
//! dequantized forward must agree on the top-1 token for >= 99.5% of prompts and on the log p of
//! every option-letter token id within 0.02. The prompts' token ids come from llama.cpp, so this
//! test checks the forward pass alone. The models are pulled through the registry.

mod common;

use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    model: String,
    source_sha256: String,
    option_ids: Vec<Vec<u32>>,
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct Record {
    ids: Vec<u32>,
    top1: u32,
    option_logprobs: Vec<Vec<f32>>,
}

fn check(fixture_file: &str) {
    let fixture: Fixture = common::read_fixture(fixture_file);
    let lm = common::load_model(&fixture.model, &fixture.source_sha256);
    let prompts: Vec<Vec<u32>> = fixture.records.iter().map(|r| r.ids.clone()).collect();
    let candidates: Vec<u32> = fixture.option_ids.concat();
    let ours = lm.next_token_logprobs(None, &prompts, &candidates).unwrap();
    let mut top1_equal = 0;
    let mut worst = (0.0f32, 0usize);
    for (i, (record, next)) in fixture.records.iter().zip(&ours).enumerate() {
        top1_equal += usize::from(record.top1 == next.top_token);
        for (theirs, mine) in record.option_logprobs.concat().iter().zip(&next.logprobs) {
            let delta = (theirs - mine).abs();
            if delta > worst.0 {
                worst = (delta, i);
            }
        }
    }
    let agreement = top1_equal as f64 / fixture.records.len() as f64;
    println!(
        "{}: {} prompts, top-1 agreement {:.4}, max |Δ log p| {:.5} (prompt {})",
        fixture.model,
        fixture.records.len(),
        agreement,
        worst.0,
        worst.1
    );
    assert!(fixture.records.len() >= 300);
    assert!(agreement >= 0.995, "top-1 agreement {agreement}");
    assert!(
        worst.0 <= 0.02,
        "max |Δ log p| {} at prompt {}",
        worst.0,
        worst.1
    );
}

#[test]
fn smollm2_agrees_with_llama_cpp() {
    check("logprobs-smollm2-135m-instruct.json");
}

#[test]
fn gemma3_agrees_with_llama_cpp() {
    check("logprobs-gemma-3-270m.json");
}
