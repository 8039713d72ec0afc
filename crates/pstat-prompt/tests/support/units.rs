//! The prompts the server tests and the throughput benchmark score: held-out True city
//! statements with and without a Fictional belief context, in both prompt formats.

use pstat_data::{
    ConditionSet, DataRoot, Domain, Kind, SplitConfig, load_all, split::exclusive_split,
};
use pstat_prompt::Protocol;
use pstat_prompt::embedded::EmbeddedCodec;
use pstat_prompt::scoring::render;
use pstat_prompt::{Baseline, ContextSpec, Draw, EncodedPrompts, PromptFormat, TrainingPool};

/// `n` held-out True city statements × {no context, Fictional K = 20} × {chat, plain}.
pub fn city_units(codec: &EmbeddedCodec, n: usize) -> Vec<EncodedPrompts> {
    let datasets = load_all(&DataRoot::bundled()).unwrap();
    let splits: Vec<_> = datasets
        .iter()
        .map(|d| exclusive_split(d, SplitConfig::default()).unwrap())
        .collect();
    let pool = TrainingPool::new(Domain::CityLocations, &datasets, &splits).unwrap();
    let city = &datasets[0];
    let test: Vec<&str> = city
        .statements
        .iter()
        .filter(|s| s.kind == Kind::True && splits[0].test.contains(&s.id))
        .take(n)
        .map(|s| s.text.as_str())
        .collect();
    let conditions = ConditionSet::paper();
    let spec = ContextSpec {
        k: 20,
        baseline: Baseline::Empty,
        seed: 42,
        allow_fewer: false,
        protocol: Protocol::Paper,
    };
    let mut units = Vec::new();
    for condition in [
        conditions.baseline().unwrap(),
        conditions.get("fictional").unwrap(),
    ] {
        let context = pool.draw(&spec, condition, Draw::Main).unwrap();
        let lines: Vec<&str> = context.texts.iter().map(String::as_str).collect();
        for format in [PromptFormat::Chat, PromptFormat::Plain] {
            let texts = test
                .iter()
                .map(|s| render(codec, format, &lines, s).unwrap())
                .collect();
            units.push(EncodedPrompts::new(codec, texts).unwrap());
        }
    }
    units
}
