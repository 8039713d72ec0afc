//! The behavioral stage per (model, domain): for each prompt format, context size K and
//! baseline, every condition's belief context is drawn from the training split and the
//! held-out True statements are asked the three-option question (pstat-prompt does the work;
//! its units are resumable files under `<model>/<domain>/behavioral/`).

use crate::config::{FormatRule, Formats, RunConfig};
use crate::layout::RunLayout;
use crate::lock::WorkLock;
use crate::progress::Progress;
use crate::stage::{Cell, CellPlan, Handoff, Known, Stage, Tables};
use crate::study::Study;
use crate::unit::{PlannedUnit, UnitKey, UnitKind, Work};
use pstat_data::{ConditionSet, Domain, Statement};
use pstat_prompt::embedded::{EmbeddedCodec, EmbeddedScorer};
use pstat_prompt::server::ServerConfig;
use pstat_prompt::server::ServerScorer;
use pstat_prompt::{
    Baseline, ContextSpec, Draw, OptionScorer, OptionTokens, PromptFormat, StudySpec, TrainingPool,
    UnitResult, run_selected_units, summarize,
};
use pstat_stability::{Bootstrap, Judgments, MIN_BASELINE_TRUE};
use pstat_tables::{DECISIONS_FILE, Decisions, FormatDecision, main_k};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The behavioral stage: belief-context prompts under every Θ.
pub struct Behavioral;

impl Stage for Behavioral {
    fn name(&self) -> &'static str {
        "behavioral"
    }

    fn enabled(&self, config: &RunConfig) -> bool {
        config.behavioral.enabled
    }

    /// One unit per (Θ, draw) of every (format, K, baseline) study, each listed once where
    /// several studies share its file; under `auto`, the chat-format baseline that decides
    /// comes first.
    fn units(&self, plan: &CellPlan) -> Vec<PlannedUnit> {
        let study = plan.study;
        let cfg = &study.config.behavioral;
        let statements = study.held_out_true(plan.domain).len();
        // The studies the stage runs, in its order: (format, K, baseline, baseline only).
        let mut studies: Vec<(PromptFormat, usize, Baseline, bool)> = Vec::new();
        let formats = match plan.known {
            Known::Nothing => cfg.formats.possible(),
            Known::Stored { chat_template, .. } => {
                // Until the model is read, a chat template is assumed (the paper's chat models).
                match cfg.formats.rule(chat_template != Some(false)) {
                    FormatRule::Fixed { formats, .. } => formats,
                    // The chat-format baseline decides; until it has, the plan assumes chat.
                    FormatRule::ChatBaselineDecides => {
                        let main_k = main_k(cfg.k.iter().copied()).unwrap_or(0);
                        studies.push((PromptFormat::Chat, main_k, Baseline::Empty, true));
                        decided_formats(study, plan.model, plan.domain)
                            .unwrap_or_else(|| vec![PromptFormat::Chat])
                    }
                }
            }
        };
        for &format in &formats {
            for &k in &cfg.k {
                for &baseline in &cfg.baselines {
                    studies.push((format, k, baseline, false));
                }
            }
        }
        let mut units: Vec<PlannedUnit> = Vec::new();
        for (format, k, baseline, baseline_only) in studies {
            let spec = study_spec(study, plan.model, plan.domain, format, k, baseline);
            let Ok(spec_units) = spec.units(&study.conditions) else {
                continue;
            };
            for (condition, draw) in spec_units {
                if baseline_only && !condition.is_baseline() {
                    continue;
                }
                // The empty-context baseline is one unit for every K (and for the chat check),
                // a perturbation's one unit for every baseline.
                let key = UnitKey::prompt(&spec, condition, draw);
                if units.iter().any(|u| u.key == key) {
                    continue;
                }
                let done = plan.reads_out() && spec.unit_files(condition, draw).meta.exists();
                let work = Work::Prompts {
                    statements,
                    k: key.k.unwrap_or(0),
                };
                units.push(PlannedUnit::new(key, work, done));
            }
        }
        units
    }

    fn run(
        &self,
        cell: &Cell,
        handoff: &mut Handoff,
        tables: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<()> {
        run(cell, handoff, tables, progress)
    }
}

/// The study of one (format, K, baseline) of a cell; its units live under
/// `<out>/<model>/<domain>/behavioral/`.
pub(crate) fn study_spec(
    study: &Study,
    model: &str,
    domain: Domain,
    format: PromptFormat,
    k: usize,
    baseline: Baseline,
) -> StudySpec {
    let cfg = &study.config.behavioral;
    StudySpec {
        model: model.to_string(),
        domain,
        format,
        context: context_spec(study, domain, k, baseline),
        resamples: cfg.resamples,
        shuffle_control: cfg.shuffle_control,
        dir: crate::stage::stage_dir(&study.out, model, domain, "behavioral"),
    }
}

/// Draws every main context the behavioral stage will prompt with (each domain, K, baseline
/// and Θ; they are seeded, so these are the very draws), so that a K the training split cannot
/// fill is an error before any model runs rather than after the probes are fitted.
pub(crate) fn check_context_sizes(study: &Study) -> anyhow::Result<()> {
    let cfg = &study.config.behavioral;
    if !cfg.enabled {
        return Ok(());
    }
    for &domain in &study.config.domains {
        let pool = TrainingPool::new(domain, &study.datasets, &study.splits)?;
        for &k in &cfg.k {
            for &baseline in &cfg.baselines {
                let spec = context_spec(study, domain, k, baseline);
                for condition in &study.conditions.conditions {
                    pool.draw(&spec, condition, Draw::Main)
                        .map_err(|e| anyhow::anyhow!("behavioral.k = {k}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// How the belief contexts of `domain` at `k` under `baseline` are drawn: the behavioral
/// stage's prompts and the contextual stage's hidden states read the same draws.
pub(crate) fn context_spec(
    study: &Study,
    domain: Domain,
    k: usize,
    baseline: Baseline,
) -> ContextSpec {
    ContextSpec {
        k,
        baseline,
        seed: study.seed_for(&format!("contexts:{domain}")),
        allow_fewer: study.config.behavioral.allow_fewer,
        protocol: study.config.protocol,
    }
}

/// The formats a cell was prompted in, as `decisions.json` records them, if it does.
fn decided_formats(study: &Study, model: &str, domain: Domain) -> Option<Vec<PromptFormat>> {
    crate::io::read_json::<Decisions>(
        &RunLayout::new(&study.out).top(DECISIONS_FILE),
        &mut crate::Silent,
    )
    .ok()
    .flatten()
    .and_then(|d| {
        d.formats
            .into_iter()
            .find(|f| f.model == model && f.domain == domain.as_str())
    })
    .map(|f| f.formats)
}

/// The server settings a cell's behavioral units were scored with, in
/// `behavioral/server.json` with its manifest: the model id the server reported, its URL, the
/// requests in flight, the timeout, the retries and the API key's variable (never the key).
/// Settings that do not change the judgments (the judgments are keyed by URL and model id),
/// recorded so that a run's pace and failures can be read against them.
fn record_server(cell: &Cell, config: &ServerConfig, model_id: &str) -> anyhow::Result<()> {
    let path = cell.dir("behavioral").join("server.json");
    let record = serde_json::json!({
        "url": config.url,
        "model_id": model_id,
        "concurrency": config.concurrency,
        "http": config.http,
    });
    crate::io::write_json(&path, &record)?;
    crate::io::write_manifest(
        &cell
            .study
            .manifest(
                format!("behavioral server {}", cell.model.name),
                cell.domain,
            )
            .with_model(cell.model.lm.sha256(), &cell.model.lm.kernel_isa()),
        &path,
    )
}

/// The stage's steps for one cell: open the scorer, choose the formats, then score and
/// tabulate every (format, K, baseline) study.
fn run(
    cell: &Cell,
    handoff: &mut Handoff,
    output: &mut Tables,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    let study = cell.study;
    let cfg = &study.config.behavioral;
    if !has_units_here(cell) {
        return Ok(());
    }
    let mut prompter = Prompter::open(cell)?;
    let (formats, reason) = prompter.choose_formats(output, progress)?;
    output.formats.push(FormatDecision {
        model: cell.model.name.clone(),
        domain: cell.domain.to_string(),
        formats: formats.clone(),
        reason,
    });
    for &format in &formats {
        for &k in &cfg.k {
            for &baseline in &cfg.baselines {
                let spec = prompter.spec(format, k, baseline);
                let units = prompter.score(&spec, &study.conditions, false, progress)?;
                if study.scope.assembles() {
                    tabulate(
                        cell,
                        &spec,
                        &units,
                        &formats,
                        prompter.bootstrap,
                        output,
                        &mut handoff.retractions,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Whether this process has a behavioral unit of `cell` to compute or read: a shard skips
/// the cells where it owns none.
fn has_units_here(cell: &Cell) -> bool {
    let scope = cell.study.scope;
    if scope.assembles() {
        return true;
    }
    let possible = Behavioral.units(&CellPlan {
        study: cell.study,
        model: &cell.model.name,
        domain: cell.domain,
        known: Known::Nothing,
    });
    possible.iter().any(|u| scope.covers(&u.key))
}

/// What scoring a cell's prompts needs: the model's codec, the training pool the contexts
/// are drawn from, the held-out True statements and the scorer (embedded or a server).
struct Prompter<'a> {
    cell: &'a Cell<'a>,
    codec: EmbeddedCodec,
    pool: TrainingPool<'a>,
    test: Vec<&'a Statement>,
    scorer: Box<dyn OptionScorer + 'a>,
    bootstrap: Bootstrap,
}

impl<'a> Prompter<'a> {
    fn open(cell: &'a Cell<'a>) -> anyhow::Result<Self> {
        let Cell {
            study,
            model,
            domain,
        } = cell;
        let domain = *domain;
        let cfg = &study.config.behavioral;
        let codec = EmbeddedCodec::new(Arc::clone(&model.text), model.lm.path());
        let pool = TrainingPool::new(domain, &study.datasets, &study.splits)?;
        let held_out = study.held_out_true(domain);
        let by_id: BTreeMap<&str, &Statement> = study
            .data(domain)
            .statements
            .iter()
            .map(|s| (s.id.as_str(), s))
            .collect();
        let test: Vec<&Statement> = held_out.iter().map(|id| by_id[id.as_str()]).collect();
        let scorer: Box<dyn OptionScorer> = match cfg.backend_for(&model.name) {
            Some(url) => {
                let config = cfg.server_config(url);
                let server = ServerScorer::connect(&config, &codec)?;
                record_server(cell, &config, server.model_id())?;
                Box::new(server)
            }
            None => Box::new(EmbeddedScorer::new(&model.lm, OptionTokens::new(&codec)?)),
        };
        let bootstrap = Bootstrap {
            resamples: study.config.bootstrap_resamples,
            seed: study.seed_for(&format!("bootstrap:{}:{domain}:behavioral", model.name)),
        };
        Ok(Prompter {
            cell,
            codec,
            pool,
            test,
            scorer,
            bootstrap,
        })
    }

    fn spec(&self, format: PromptFormat, k: usize, baseline: Baseline) -> StudySpec {
        let cell = self.cell;
        study_spec(
            cell.study,
            &cell.model.name,
            cell.domain,
            format,
            k,
            baseline,
        )
    }

    /// The units of `spec` this process computes or finds stored; `prerequisite` units are
    /// computed by every shard that needs them.
    fn score(
        &mut self,
        spec: &StudySpec,
        conditions: &ConditionSet,
        prerequisite: bool,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<Vec<UnitResult>> {
        let scope = self.cell.study.scope;
        // Without the format: where `auto` prompts plain after the chat check, its units
        // count against the chat ones the plan assumed, in the same order. Without the
        // baseline: a perturbation's unit serves every baseline (its key has none), and the
        // specs run in the plan's order, so each computed unit meets its planned one.
        progress.unit(&UnitKey::new(&spec.model, spec.domain, UnitKind::Prompt));
        let mut missing = Ok(());
        let units = run_selected_units(
            spec,
            conditions,
            &self.pool,
            &self.test,
            &self.codec,
            self.scorer.as_mut(),
            progress,
            &mut |condition, draw| {
                let key = UnitKey::prompt(spec, condition, draw);
                let computes = if prerequisite {
                    scope.computes_prerequisite(&key)
                } else {
                    scope.computes(&key)
                };
                computes.unwrap_or_else(|err| {
                    if missing.is_ok() {
                        missing = Err(err);
                    }
                    false
                })
            },
        )?;
        missing?;
        Ok(units)
    }

    /// The cell's formats and why ([`Formats::rule`](crate::config::Formats::rule)); under
    /// `auto` a chat model's chat-format empty baseline at the main K decides, and where it
    /// falls to plain its answers are kept.
    fn choose_formats(
        &mut self,
        output: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<(Vec<PromptFormat>, String)> {
        let study = self.cell.study;
        let cfg = &study.config.behavioral;
        let chat_template = self.codec.has_chat_template();
        if let FormatRule::Fixed { formats, reason } = cfg.formats.rule(chat_template) {
            let chat_listed =
                matches!(&cfg.formats, Formats::Listed(l) if l.contains(&PromptFormat::Chat));
            if !chat_template && chat_listed {
                progress.note(&format!(
                    "warning: {} has no chat template: behavioral.formats lists chat, but {} is prompted in the plain format only",
                    self.cell.model.name, self.cell.domain
                ));
            }
            return Ok((formats, reason.to_string()));
        }
        // The chat-format empty baseline decides; its unit is reused if chat is kept.
        let main_k = main_k(cfg.k.iter().copied()).unwrap_or(0);
        let chat = self.spec(PromptFormat::Chat, main_k, Baseline::Empty);
        let baseline_only = ConditionSet {
            conditions: study.conditions.baseline().into_iter().cloned().collect(),
        };
        // Every shard with units in this cell needs the decision: the first scores it.
        let _lock = WorkLock::wait(&self.cell.dir("behavioral").join(".format.lock"))?;
        let units = self.score(&chat, &baseline_only, true, progress)?;
        let believed = units
            .first()
            .map_or(0, |u| u.judgments.iter().filter(|j| j.judged_true).count());
        let held_out = self.test.len();
        Ok(match PromptFormat::auto(believed) {
            PromptFormat::Chat => (
                vec![PromptFormat::Chat],
                format!(
                    "auto: the chat-format baseline judges {believed} of {held_out} held-out True statements True"
                ),
            ),
            PromptFormat::Plain => {
                let reason = format!(
                    "auto: the chat-format baseline judges {believed} of {held_out} held-out True statements True (fewer than {MIN_BASELINE_TRUE}), so this domain is prompted in the plain format"
                );
                progress.note(&format!(
                    "{} {}: {reason}",
                    self.cell.model.name, self.cell.domain
                ));
                output
                    .answers
                    .extend(summarize(&chat, &units, self.bootstrap)?.answers);
                (vec![PromptFormat::Plain], reason)
            }
        })
    }
}

/// The judgments of a unit, by statement.
fn beliefs(unit: &UnitResult) -> Judgments {
    unit.judgments
        .iter()
        .map(|j| (j.id.clone(), j.judged_true))
        .collect()
}

/// The rows of one study's units: stability, answers and resamples; the paired comparisons
/// of the main K against the empty baseline; and, for the main configuration, the
/// retractions the clustering reads.
fn tabulate(
    cell: &Cell,
    spec: &StudySpec,
    units: &[UnitResult],
    formats: &[PromptFormat],
    bootstrap: Bootstrap,
    output: &mut Tables,
    retractions: &mut crate::stage::Retractions,
) -> anyhow::Result<()> {
    let study = cell.study;
    let cfg = &study.config.behavioral;
    let (format, k, baseline) = (spec.format, spec.context.k, spec.context.baseline);
    let summary = summarize(spec, units, bootstrap)?;
    if let Some((base, rest)) = units.split_first() {
        let base_beliefs = beliefs(base);
        // The report states its comparisons for the main draw at the largest K against the
        // empty baseline.
        if baseline == Baseline::Empty && Some(k) == main_k(cfg.k.iter().copied()) {
            output
                .comparisons
                .extend(compare_main_draws(cell, spec, base, rest)?);
        }
        // Appendix I clusters the main configuration's retractions: the main draw at the
        // main (largest) K against the empty baseline, in the main (first) format; the
        // robustness configurations stay out.
        let main = crate::stage::Retractions::takes_prompt(k, baseline, format, &cfg.k, formats);
        for unit in rest.iter().filter(|u| main && u.draw == Draw::Main) {
            retractions.add(
                pstat_tables::Instantiation::Behavioral,
                &unit.condition,
                &base_beliefs,
                &beliefs(unit),
            );
        }
    }
    output.stability.extend(summary.stability);
    output.answers.extend(summary.answers);
    output.resamples.extend(summary.resamples);
    Ok(())
}

/// The paired tests of the compared conditions' main draws against the baseline `base`.
fn compare_main_draws(
    cell: &Cell,
    spec: &StudySpec,
    base: &UnitResult,
    rest: &[UnitResult],
) -> anyhow::Result<Vec<pstat_tables::ComparisonRow>> {
    let study = cell.study;
    let (model, domain) = (&cell.model.name, cell.domain);
    let (format, k) = (spec.format, spec.context.k);
    let judged: HashMap<String, Judgments> = rest
        .iter()
        .filter(|u| u.draw == Draw::Main)
        .map(|u| (u.condition.clone(), beliefs(u)))
        .collect();
    let key = pstat_stability::RowKey {
        model: model.clone(),
        domain: domain.to_string(),
        instantiation: pstat_tables::Instantiation::Behavioral,
        probe: pstat_tables::Probe::Prompt,
        k: Some(k),
        baseline: Some(spec.context.baseline),
        format: Some(format),
        ..Default::default()
    };
    let held: Vec<String> = base.judgments.iter().map(|j| j.id.clone()).collect();
    crate::comparisons::paired_rows(
        &key,
        &held,
        &beliefs(base),
        &judged,
        (&study.conditions, pstat_tables::MAIN_VARIANT),
        study.config.bootstrap_resamples,
        study.seed_for(&format!("paired:{model}:{domain}:behavioral:{format}:{k}")),
    )
}
