//! `pstat prompt`: the behavioral instantiation (Section 4.4.2). For every condition Θ the
//! held-out True statements of a domain are asked the three-option question after a belief
//! context C_Θ; judgments go to JSON lines per unit, and ρ_R / ρ_E against the baseline are
//! upserted into `stability.csv`, with the answer distribution in `answers.csv` and, with
//! `--resamples`, the spread over context draws in `resamples.csv`. Rerunning resumes: units
//! already complete are read back, not recomputed.

use crate::output::outln;
use anyhow::{Context, bail};
use clap::Args;
use pstat_data::{
    ConditionSet, DataRoot, Domain, Kind, SplitConfig, load_all, split::exclusive_split,
};
use pstat_http::HttpOptions;
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::server::{ServerConfig, ServerScorer};
use pstat_prompt::{
    Baseline, ContextSpec, OptionScorer, OptionTokens, PromptFormat, StudySpec, TrainingPool,
    run_units, summarize,
};
use pstat_stability::Bootstrap;
use std::path::PathBuf;

#[derive(Args)]
pub struct PromptArgs {
    /// A registry model name (`pstat models list`), a GGUF file or a Hugging Face folder. With
    /// --backend it supplies the tokenizer and chat template and must be the model the server
    /// runs.
    #[arg(long)]
    model: String,
    /// city_locations, med_indications or word_definitions.
    #[arg(long)]
    domain: Domain,
    /// Belief-context size K (the paper: 100; Appendix G: 20 and 50).
    #[arg(long, default_value_t = 100)]
    k: usize,
    /// Baseline context: `empty` (the paper) or `true` (K True training statements, App. G).
    #[arg(long, default_value = "empty")]
    baseline: Baseline,
    /// Independent context draws per condition beyond the main one (mean and spread of ρ_R
    /// go to resamples.csv).
    #[arg(long, default_value_t = 0)]
    resamples: usize,
    /// Also judge under the main draw's statements in a permuted order: the noise floor of
    /// the judgment itself.
    #[arg(long)]
    shuffle_control: bool,
    /// Prompt format; repeat for several. Default: chat and plain for chat models, plain for
    /// base models.
    #[arg(long)]
    format: Vec<PromptFormat>,
    /// An OpenAI-compatible completions server (root or /v1 URL), or llama.cpp's native
    /// endpoint (a URL ending in /completion). Default: the embedded runtime.
    #[arg(long)]
    backend: Option<String>,
    /// The model to ask the server for (default: its only model, by `GET /v1/models`).
    #[arg(long)]
    backend_model: Option<String>,
    /// Requests in flight at once on the server.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Seconds per server request before it is retried.
    #[arg(long, default_value_t = 300.0)]
    timeout: f64,
    /// Retries of a failed server request (429, 5xx, timeouts, dropped connections, invalid
    /// replies), with exponential backoff.
    #[arg(long, default_value_t = 5)]
    retries: usize,
    /// Environment variable holding the server's API key (default: OPENAI_API_KEY when set).
    #[arg(long)]
    api_key_env: Option<String>,
    /// Output folder: tables at its top, judgments under prompt/<model>/<domain>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Judge only the first N held-out True statements (quick runs).
    #[arg(long)]
    limit: Option<usize>,
    /// Seed of the context draws.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Seed of the exclusive train / calibration / test split.
    #[arg(long, default_value_t = 42)]
    split_seed: u64,
    /// When a condition has fewer than K training statements, use them all (recorded in the
    /// unit's context file) instead of failing.
    #[arg(long)]
    allow_fewer: bool,
    /// Data folder laid out like the repo's data/ (default: the bundled data).
    #[arg(long)]
    data: Option<PathBuf>,
}

pub fn run(args: PromptArgs) -> anyhow::Result<()> {
    if args.k == 0 {
        bail!("--k must be at least 1");
    }
    let path = pstat_lm::registry::resolve(&args.model)?;
    let codec = EmbeddedCodec::open(&path)?;
    let formats = match (args.format.is_empty(), codec.has_chat_template()) {
        (false, _) => args.format.clone(),
        (true, true) => vec![PromptFormat::Chat, PromptFormat::Plain],
        (true, false) => vec![PromptFormat::Plain],
    };
    let root = DataRoot::open(args.data.as_deref())?;
    let datasets = load_all(&root)?;
    let splits = datasets
        .iter()
        .map(|d| {
            exclusive_split(
                d,
                SplitConfig {
                    seed: args.split_seed,
                    ..SplitConfig::default()
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pool = TrainingPool::new(args.domain, &datasets, &splits)?;
    let (data, split) = datasets
        .iter()
        .zip(&splits)
        .find(|(d, _)| d.domain == args.domain)
        .context("the data has no such domain")?;
    let test_ids: std::collections::HashSet<&str> = split.test.iter().map(String::as_str).collect();
    let test: Vec<_> = data
        .statements
        .iter()
        .filter(|s| s.kind == Kind::True && test_ids.contains(s.id.as_str()))
        .take(args.limit.unwrap_or(usize::MAX))
        .collect();
    let model_name = pstat_study::model::display_name(&args.model);
    let lm;
    let mut scorer: Box<dyn OptionScorer> = match &args.backend {
        Some(url) => Box::new(ServerScorer::connect(
            &ServerConfig {
                model: args.backend_model.clone(),
                concurrency: args.concurrency,
                http: HttpOptions {
                    timeout_s: args.timeout,
                    retries: args.retries,
                    api_key_env: args.api_key_env.clone(),
                    ..HttpOptions::default()
                },
                ..ServerConfig::new(url)
            },
            &codec,
        )?),
        None => {
            lm = pstat_lm::LanguageModel::load(&path)?;
            Box::new(EmbeddedScorer::new(&lm, OptionTokens::new(&codec)?))
        }
    };
    let conditions = ConditionSet::paper();
    for format in formats {
        let spec = StudySpec {
            model: model_name.clone(),
            domain: args.domain,
            format,
            context: ContextSpec {
                k: args.k,
                baseline: args.baseline,
                seed: args.seed,
                allow_fewer: args.allow_fewer,
            },
            resamples: args.resamples,
            shuffle_control: args.shuffle_control,
            dir: args
                .out
                .join("prompt")
                .join(&model_name)
                .join(args.domain.as_str()),
        };
        let units = run_units(
            &spec,
            &conditions,
            &pool,
            &test,
            &codec,
            scorer.as_mut(),
            &mut crate::progress::Bars::new(),
        )?;
        let summary = summarize(&spec, &units, Bootstrap::default())?;
        pstat_tables::upsert_table(&args.out, &summary.stability)?;
        pstat_tables::upsert_table(&args.out, &summary.answers)?;
        if !summary.resamples.is_empty() {
            pstat_tables::upsert_table(&args.out, &summary.resamples)?;
        }
        let base = &summary.answers[0];
        outln!(
            "{model_name} {} {format} K={} baseline={}: {} held-out True statements, baseline answers a/b/c = {}/{}/{}{}",
            args.domain,
            args.k,
            args.baseline.as_str(),
            base.n,
            base.a,
            base.b,
            base.c,
            if base.flag.is_some() {
                " (B_true too small for meaningful rates)"
            } else {
                ""
            }
        )?;
        for row in summary.stability.iter().filter(|r| r.resample.is_none()) {
            let rate = |r: Option<f64>| r.map_or("undefined".to_string(), |v| format!("{v:.3}"));
            outln!(
                "  {:14} ρ_R = {} ({} / {})  ρ_E = {}",
                row.condition,
                rate(row.retraction_rate),
                row.retractions,
                row.n_baseline_true,
                rate(row.expansion_rate)
            )?;
        }
    }
    outln!("tables in {}", args.out.display())?;
    Ok(())
}
