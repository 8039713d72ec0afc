//! `pstat`: measure how stable a language model's beliefs are when its semantic assumptions
//! are perturbed (the P-StaT framework). This binary is thin: each subcommand lives in
//! `cmd/<name>.rs` and calls into the pipeline crates.

// The arguments' doc comments are clap's `--help` text, written for a terminal: shapes like
// `[bags]` and paths like `<domain>.csv` are meant literally, not as rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod cmd;
mod memory;
mod output;
mod progress;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: memory::LargePages = memory::LargePages;

/// `0.1.0 (commit <hash>, dirty: true|false|unknown)`: the git state the binary was built
/// from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PSTAT_GIT_COMMIT"),
    ", dirty: ",
    env!("PSTAT_GIT_DIRTY"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "pstat",
    version = VERSION,
    about = "Perturbation Stability of Truth: how stable are an LLM's beliefs when Neither statements are relabelled True?",
    long_about = "pstat implements P-StaT end to end. Statements are True, False or Neither (Fictional or \
Synthetic). A perturbation Θ relabels some Neither statements as True; pstat applies it to a linear \
probe on hidden states (representational) and as a belief context in the prompt (behavioral), then \
counts the held-out True statements the model stops (retractions) or starts (expansions) believing.\n\n\
Start with `pstat run --quick` for a small end-to-end study, or `pstat data stats` to see the data."
)]
struct Cli {
    /// Worker threads for every compute stage (default: RAYON_NUM_THREADS, else all cores);
    /// recorded in the manifests.
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect, split and generate the statement data.
    #[command(subcommand)]
    Data(cmd::data::DataCommand),
    /// Cluster points with PCA → UMAP → HDBSCAN, choosing hyperparameters by Algorithm 1.
    Cluster(cmd::cluster::ClusterArgs),
    /// Behavioral instantiation: belief-context prompts under every Θ, judged by p(a), p(b), p(c).
    // Boxed: its many server flags make it much larger than the other commands.
    Prompt(Box<cmd::prompt::PromptArgs>),
    /// Generic sAwMIL multiple-instance learner: fit on bags of vectors, predict bag scores.
    #[command(subcommand)]
    Sawmil(cmd::sawmil::SawmilCommand),
    /// The embedded models: pull them into the cache, list what is cached.
    #[command(subcommand)]
    Models(cmd::models::ModelsCommand),
    /// Token ids of stdin lines as JSON lines, exactly as llama.cpp tokenizes them.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Next-token probabilities of answer options for JSON-lines prompts (embedded model).
    Score(cmd::score::ScoreArgs),
    /// Per-token hidden states of text lines at chosen layers, as safetensors.
    Hidden(cmd::hidden::HiddenArgs),
    /// Cache every token's hidden state of every statement of a domain at chosen layers.
    Extract(cmd::stage::ExtractArgs),
    /// Representational instantiation: retrain sAwMIL / Mass-Mean under every Θ at the veracity layer and l±2.
    Probe(cmd::stage::ProbeArgs),
    /// Familiarity: object-token probabilities per statement kind and within-kind activation distances.
    Familiarity(cmd::stage::FamiliarityArgs),
    /// Run the whole P-StaT study (or the stages the config enables), resumably.
    Run(cmd::run::RunArgs),
    /// Build the tables and the report of a run whose units `pstat run --shard` computed.
    Merge(cmd::merge::MergeArgs),
    /// Rebuild the figures and the self-contained report.html of a run folder from its files.
    Report(cmd::report::ReportArgs),
    /// Export a run's activations to a folder another run reads (representational.activations).
    #[command(subcommand)]
    Activations(cmd::activations::ActivationsCommand),
}

/// Ctrl-C and SIGTERM are blocked in every thread (threads inherit the mask of the one that
/// starts them, so this runs first) and waited for by one thread, which prints what is stored
/// and how to resume ([`progress::interrupted`]) and exits with 128 + the signal's number.
/// Results are written atomically and behavioral units checkpoint as they go, so exiting at
/// any point loses at most the work since the last checkpoint. Child processes (`pip download`)
/// start with the signals unblocked (the standard library resets the mask).
fn watch_signals() {
    // SAFETY: sigset_t is plain data that sigemptyset initialises; pthread_sigmask and sigwait
    // only read it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        std::thread::spawn(move || {
            let mut signal = 0;
            if libc::sigwait(&set, &mut signal) == 0 {
                // After a progress bar's partial line, the message starts on a line of its own.
                use std::io::IsTerminal;
                let lead = if std::io::stderr().is_terminal() {
                    "\n"
                } else {
                    ""
                };
                eprintln!("{lead}{}", progress::interrupted());
                std::process::exit(128 + signal);
            }
        });
    }
}

fn main() -> std::process::ExitCode {
    memory::keep_freed_memory();
    watch_signals();
    let cli = Cli::parse();
    // Warnings always; detail logs for debugging (cache hits, unit keys) only when RUST_LOG
    // asks for them, e.g. RUST_LOG=pstat_study=debug; progress lines do not depend on it.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::builder()
                .with_default_directive(tracing_subscriber::filter::LevelFilter::WARN.into())
                .from_env_lossy(),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    if let Some(n) = cli.threads
        && let Err(err) = rayon::ThreadPoolBuilder::new()
            .num_threads(n.into())
            .build_global()
    {
        eprintln!("error: --threads {n}: {err}");
        return std::process::ExitCode::FAILURE;
    }
    pstat_data::artifact::set_build(pstat_data::artifact::Build {
        commit: env!("PSTAT_GIT_COMMIT").to_string(),
        dirty: env!("PSTAT_GIT_DIRTY").parse().ok(),
        threads: rayon::current_num_threads(),
    });
    let result = match cli.command {
        Command::Data(c) => cmd::data::run(c),
        Command::Cluster(a) => cmd::cluster::run(a),
        Command::Sawmil(c) => cmd::sawmil::run(c),
        Command::Prompt(a) => cmd::prompt::run(*a),
        Command::Models(c) => cmd::models::run(c),
        Command::Tokenize(a) => cmd::tokenize::run(a),
        Command::Score(a) => cmd::score::run(a),
        Command::Hidden(a) => cmd::hidden::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Probe(a) => cmd::stage::probe(a),
        Command::Extract(a) => cmd::stage::extract(a),
        Command::Familiarity(a) => cmd::stage::familiarity(a),
        Command::Activations(c) => cmd::activations::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // `pstat models list | head`: the reader took what it wanted.
        Err(_) if output::stdout_closed() => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            exit_code(&err)
        }
    }
}

/// The error and its causes joined by ": ", as anyhow's `{:#}` does, except a cause whose text
/// the message already holds: many errors show their source in their own message
/// (`path: I/O error`), which would otherwise be printed twice.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// 2 for input pstat refuses by design (a tokenizer it cannot reproduce exactly), 1 otherwise.
fn exit_code(err: &anyhow::Error) -> std::process::ExitCode {
    // A model that cannot be used as given (unknown name, missing part, unsupported tokenizer,
    // architecture or type) is bad input, like a bad flag.
    if err.chain().any(pstat_lm::is_model_input_error) {
        std::process::ExitCode::from(2)
    } else {
        std::process::ExitCode::FAILURE
    }
}
