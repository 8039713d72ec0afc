//! `pstat prompt`: the behavioral instantiation (Section 4.4.2) of one (model, domain), a
//! preset of `pstat run` with only the behavioral stage on. For every condition Θ the
//! held-out True statements are asked the three-option question after a belief context C_Θ;
//! the judgments, `stability.csv`, `answers.csv` and the report land in `--out` exactly as a
//! full run writes them, resumably, and a folder that holds a study gets this stage added.

use super::stage::{Target, execute};
use crate::output::outln;
use anyhow::bail;
use clap::Args;
use pstat_study::config::Formats;
use pstat_tables::{Baseline, Instantiation, PromptFormat, StabilityRow};
use std::path::PathBuf;

#[derive(Args)]
pub struct PromptArgs {
    #[command(flatten)]
    target: Target,
    /// Belief-context size K (default: the config's, the paper's 100; Appendix G: 20 and 50).
    #[arg(long)]
    k: Option<usize>,
    /// Baseline context: `empty` (the paper) or `true` (K True training statements, App. G);
    /// repeat for both (default: the config's).
    #[arg(long)]
    baseline: Vec<Baseline>,
    /// Independent context draws per condition beyond the main one (mean and spread of ρ_R
    /// go to resamples.csv).
    #[arg(long)]
    resamples: Option<usize>,
    /// Also judge under the main draw's statements in a permuted order: the noise floor of
    /// the judgment itself.
    #[arg(long)]
    shuffle_control: bool,
    /// Prompt format; repeat for several. Default: `auto` (chat for chat models unless their
    /// chat baseline is degenerate, plain for base models).
    #[arg(long)]
    format: Vec<PromptFormat>,
    /// An OpenAI-compatible completions server (root or /v1 URL), or llama.cpp's native
    /// endpoint (a URL ending in /completion). Default: the embedded runtime. `--model` then
    /// supplies the tokenizer and chat template and must be the model the server runs.
    #[arg(long)]
    backend: Option<String>,
    /// The model to ask the server for (default: its only model, by `GET /v1/models`).
    #[arg(long)]
    backend_model: Option<String>,
    /// Requests in flight at once on the server (default 8).
    #[arg(long)]
    concurrency: Option<usize>,
    /// How option log-probabilities are asked of the server: `top_n` (default) or `prompt`
    /// (vLLM's `prompt_logprobs`: no `--max-logprobs` needed).
    #[arg(long, value_parser = ["top_n", "prompt"])]
    backend_logprobs: Option<String>,
    /// Seconds per server request before it is retried.
    #[arg(long)]
    timeout: Option<f64>,
    /// Retries of a failed server request (429, 5xx, timeouts, dropped connections, invalid
    /// replies), with exponential backoff.
    #[arg(long)]
    retries: Option<usize>,
    /// Environment variable holding the server's API key (default: OPENAI_API_KEY when set).
    #[arg(long)]
    api_key_env: Option<String>,
    /// Judge a seeded sample of N held-out True statements (quick runs; `test_limit`).
    #[arg(long)]
    limit: Option<usize>,
    /// The run's master seed (splits, context draws, bootstraps).
    #[arg(long)]
    seed: Option<u64>,
    /// When a condition has fewer than K training statements, use them all (flagged
    /// `short_context` in stability.csv) instead of failing.
    #[arg(long)]
    allow_fewer: bool,
    /// Data folder laid out like the repo's data/ (default: the bundled data).
    #[arg(long)]
    data: Option<PathBuf>,
}

pub fn run(args: PromptArgs) -> anyhow::Result<()> {
    if args.k == Some(0) {
        bail!("--k must be at least 1");
    }
    let mut c = args.target.base()?;
    let b = &mut c.behavioral;
    b.enabled = true;
    if let Some(k) = args.k {
        b.k = vec![k];
    }
    if !args.baseline.is_empty() {
        b.baselines = args.baseline.clone();
    }
    if let Some(n) = args.resamples {
        b.resamples = n;
    }
    b.shuffle_control |= args.shuffle_control;
    b.allow_fewer |= args.allow_fewer;
    if !args.format.is_empty() {
        b.formats = Formats::Listed(args.format.clone());
    }
    if args.backend.is_some() {
        b.backend = args.backend.clone();
    }
    if args.backend_model.is_some() {
        b.backend_model = args.backend_model.clone();
    }
    if let Some(n) = args.concurrency {
        b.concurrency = n;
    }
    if let Some(mode) = &args.backend_logprobs {
        b.backend_logprobs = match mode.as_str() {
            "prompt" => pstat_prompt::server::LogprobRequest::Prompt,
            _ => pstat_prompt::server::LogprobRequest::TopN,
        };
    }
    if let Some(s) = args.timeout {
        b.http.timeout_s = s;
    }
    if let Some(n) = args.retries {
        b.http.retries = n;
    }
    if args.api_key_env.is_some() {
        b.http.api_key_env = args.api_key_env.clone();
    }
    if args.limit.is_some() {
        c.test_limit = args.limit;
    }
    if let Some(seed) = args.seed {
        c.seed = seed;
    }
    if let Some(data) = &args.data {
        c.data = Some(data.display().to_string());
    }
    let out = &args.target.out;
    execute(c, out)?;

    let model = pstat_study::model::display_name(&args.target.model);
    let rows: Vec<StabilityRow> = pstat_tables::read_table(out)?;
    for row in rows.iter().filter(|r| {
        r.model == model
            && r.domain == args.target.domain.as_str()
            && r.instantiation == Instantiation::Behavioral
            && r.resample.is_none()
    }) {
        outln!("{}", row.summary_line())?;
    }
    outln!("tables and report in {}", out.display())?;
    Ok(())
}
