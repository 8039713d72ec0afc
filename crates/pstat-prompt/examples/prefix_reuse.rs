//! Benchmark: scoring a unit's statements against the shared prefix's KV cache (context and
//! question header computed once) versus recomputing every full prompt, at K = 100. The
//! context is the Noise condition's (True statements of the other domains, which every domain
//! has enough of).
//!
//! cargo run -p pstat-prompt --release --example prefix_reuse -- [MODEL] [N] [chat|plain]
//! (defaults: smollm2-135m-instruct, 32 held-out True city statements, chat for chat models).

use pstat_data::{
    ConditionSet, DataRoot, Domain, Kind, SplitConfig, load_all, split::exclusive_split,
};
use pstat_lm::LanguageModel;
use pstat_prompt::Protocol;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::scoring::render;
use pstat_prompt::{
    Baseline, ContextSpec, Draw, EncodedPrompts, OptionScorer, OptionTokens, PromptFormat,
    TrainingPool,
};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("smollm2-135m-instruct", String::as_str);
    let n: usize = args.get(1).map_or(Ok(32), |s| s.parse())?;
    let path = pstat_lm::registry::resolve(model)?;
    let codec = EmbeddedCodec::open(&path)?;
    let format = match args.get(2) {
        Some(f) => f.parse::<PromptFormat>()?,
        None if codec.has_chat_template() => PromptFormat::Chat,
        None => PromptFormat::Plain,
    };

    let datasets = load_all(&DataRoot::bundled())?;
    let splits = datasets
        .iter()
        .map(|d| exclusive_split(d, SplitConfig::default()))
        .collect::<Result<Vec<_>, _>>()?;
    let pool = TrainingPool::new(Domain::CityLocations, &datasets, &splits)?;
    let spec = ContextSpec {
        k: 100,
        baseline: Baseline::Empty,
        seed: 42,
        allow_fewer: false,
        protocol: Protocol::Paper,
    };
    let conditions = ConditionSet::paper();
    let context = pool.draw(&spec, conditions.get("noise")?, Draw::Main)?;
    let lines: Vec<&str> = context.texts.iter().map(String::as_str).collect();
    let texts = datasets[0]
        .statements
        .iter()
        .filter(|s| s.kind == Kind::True && splits[0].test.contains(&s.id))
        .take(n)
        .map(|s| render(&codec, format, &lines, &s.text))
        .collect::<Result<Vec<_>, _>>()?;
    let reused = EncodedPrompts::new(&codec, texts)?;
    let full = EncodedPrompts {
        shared: 0,
        ..reused.clone()
    };
    let tokens: usize = reused.tokens.iter().map(Vec::len).sum();

    let lm = LanguageModel::load(&path)?;
    let mut scorer = EmbeddedScorer::new(&lm, OptionTokens::new(&codec)?);
    let start = Instant::now();
    let with_prefix = scorer.score(&reused, &mut |_| {})?;
    let t_reuse = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let recomputed = scorer.score(&full, &mut |_| {})?;
    let t_full = start.elapsed().as_secs_f64();
    let same = with_prefix
        .iter()
        .zip(&recomputed)
        .filter(|(a, b)| a.answer() == b.answer())
        .count();

    println!(
        "{model} ({format}), K = 100 Noise context, {} statements, {} tokens per prompt on average, shared prefix {} tokens",
        reused.len(),
        tokens / reused.len().max(1),
        reused.shared
    );
    println!("prefix reuse:   {t_reuse:8.2} s");
    println!("full prompts:   {t_full:8.2} s");
    println!(
        "speed-up:       {:8.1}x   (same answer for {same}/{} statements)",
        t_full / t_reuse,
        reused.len()
    );
    Ok(())
}
