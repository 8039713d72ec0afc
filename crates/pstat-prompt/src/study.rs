//! One behavioral study of a (model, domain, format, K, baseline): every unit (condition ×
//! draw) scored against its shared prefix, stored, then compared with the baseline.

use crate::context::{Baseline, BeliefContext, ContextSpec, Draw, TrainingPool};
use crate::error::PromptError;
use crate::progress::Progress;
use crate::record::{Judgment, UnitFiles, UnitMeta, ids_sha256};
use crate::scoring::{EncodedPrompts, OptionScorer, PromptCodec, render_as};
use crate::template::PromptFormat;
use pstat_data::{Condition, ConditionSet, Domain, Statement};
use pstat_stability::Judgments;
use std::path::PathBuf;

/// Statements scored between checkpoints of a unit ([`crate::record`]): the embedded runtime's
/// call size, so a resumed unit's calls hold the same statements as an uninterrupted one's and
/// give the same bytes; about 4 s of SmolLM2-135M at K = 100 on the 2-core reference machine
/// (0.058 s per statement in the default study, docs/BENCHMARKS.md).
const CHECKPOINT_STATEMENTS: usize = crate::embedded::STATEMENTS_PER_CALL;

/// What one study computes.
#[derive(Debug, Clone, PartialEq)]
pub struct StudySpec {
    /// The `model` column of every table.
    pub model: String,
    /// The domain whose held-out True statements are judged.
    pub domain: Domain,
    /// Chat or plain prompt.
    pub format: PromptFormat,
    /// K, the baseline, the seed and the protocol of the belief contexts.
    pub context: ContextSpec,
    /// Independent context draws per condition beyond the main one.
    pub resamples: usize,
    /// Also judge under the main draw's statements in a permuted order (the noise floor of
    /// the judgment itself).
    pub shuffle_control: bool,
    /// Where the unit files of this (model, domain) go.
    pub dir: PathBuf,
}

/// The judgments of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitResult {
    /// Name of the condition Θ.
    pub condition: String,
    /// Which draw of the condition's context.
    pub draw: Draw,
    /// The context the statements were judged under.
    pub context: BeliefContext,
    /// One judgment per held-out statement, in test order.
    pub judgments: Vec<Judgment>,
}

impl UnitResult {
    pub(crate) fn beliefs(&self) -> Judgments {
        self.judgments
            .iter()
            .map(|j| (j.id.clone(), j.judged_true))
            .collect()
    }
}

impl StudySpec {
    /// The units in computing order: the baseline, then per perturbation the main draw, the
    /// resamples and the order-shuffle control.
    pub fn units<'c>(
        &self,
        conditions: &'c ConditionSet,
    ) -> Result<Vec<(&'c Condition, Draw)>, PromptError> {
        let baseline = conditions.baseline().ok_or_else(|| {
            pstat_data::DataError::Invalid("the condition set has no baseline".into())
        })?;
        let mut units = vec![(baseline, Draw::Main)];
        for c in conditions.perturbations() {
            units.push((c, Draw::Main));
            units.extend((1..=self.resamples).map(|i| (c, Draw::Resample(i))));
            if self.shuffle_control {
                units.push((c, Draw::Shuffle));
            }
        }
        Ok(units)
    }

    /// The empty-context baseline does not depend on K, so one unit serves every K.
    fn is_empty_baseline(&self, condition: &Condition) -> bool {
        condition.is_baseline() && self.context.baseline == Baseline::Empty
    }

    /// Where a unit is stored; its sidecar (`meta`) exists once it is complete.
    pub fn unit_files(&self, condition: &Condition, draw: Draw) -> UnitFiles {
        let dir = self.dir.join(self.format.as_str());
        if self.is_empty_baseline(condition) {
            return UnitFiles::at(&dir.join("baseline_empty"));
        }
        let name = if condition.is_baseline() {
            format!("baseline_{}.{draw}", self.context.baseline.as_str())
        } else {
            format!("{}.{draw}", condition.name)
        };
        UnitFiles::at(&dir.join(format!("k{}", self.context.k)).join(name))
    }

    /// The K of a unit's context (`None` for the empty baseline, which serves every K).
    pub fn unit_k(&self, condition: &Condition) -> Option<usize> {
        (!self.is_empty_baseline(condition)).then_some(self.context.k)
    }
}

/// Computes (or reloads) every unit of the study over the held-out True statements `test`.
pub fn run_units(
    spec: &StudySpec,
    conditions: &ConditionSet,
    pool: &TrainingPool,
    test: &[&Statement],
    codec: &dyn PromptCodec,
    scorer: &mut dyn OptionScorer,
    progress: &mut dyn Progress,
) -> Result<Vec<UnitResult>, PromptError> {
    run_selected_units(
        spec,
        conditions,
        pool,
        test,
        codec,
        scorer,
        progress,
        &mut |_, _| true,
    )
}

/// As [`run_units`], but a unit not yet stored is computed only where `compute(condition,
/// draw)` says so (a shard of a run computes its own units); units neither stored nor
/// computed are left out of the result.
#[allow(clippy::too_many_arguments)]
pub fn run_selected_units(
    spec: &StudySpec,
    conditions: &ConditionSet,
    pool: &TrainingPool,
    test: &[&Statement],
    codec: &dyn PromptCodec,
    scorer: &mut dyn OptionScorer,
    progress: &mut dyn Progress,
    compute: &mut dyn FnMut(&Condition, Draw) -> bool,
) -> Result<Vec<UnitResult>, PromptError> {
    if test.is_empty() {
        return Err(PromptError::NoTestStatements {
            domain: spec.domain.to_string(),
        });
    }
    let ids: Vec<&str> = test.iter().map(|s| s.id.as_str()).collect();
    let statements_sha256 = ids_sha256(&ids);
    // Every context is drawn before anything is scored, so a condition with too few
    // candidates fails the run at once rather than after hours of scoring.
    let mut drawn = Vec::new();
    for (condition, draw) in spec.units(conditions)? {
        let k = spec.unit_k(condition);
        let context_spec = ContextSpec {
            k: k.unwrap_or(0),
            ..spec.context
        };
        drawn.push((
            condition,
            draw,
            k,
            pool.draw(&context_spec, condition, draw)?,
        ));
    }
    let mut results = Vec::new();
    for (condition, draw, k, context) in drawn {
        let meta = UnitMeta {
            context: context.clone(),
            format: spec.format,
            backend: scorer.identity(),
            statements_sha256: statements_sha256.clone(),
            n: test.len(),
            protocol: spec.context.protocol,
        };
        let files = spec.unit_files(condition, draw);
        let stored = files.load_if_complete(&meta, progress)?;
        if stored.is_none() && !compute(condition, draw) {
            continue;
        }
        let lines: Vec<&str> = context.texts.iter().map(String::as_str).collect();
        let prompt =
            |s: &Statement| render_as(codec, spec.context.protocol, spec.format, &lines, &s.text);
        files.store_prompt(&prompt(test[0])?)?;
        let label = format!("{} {} {}", spec.format, condition.name, draw);
        progress.start(&label, test.len());
        let judgments = match stored {
            Some(stored) => {
                progress.finish(true);
                stored
            }
            None => {
                let texts = test
                    .iter()
                    .map(|s| prompt(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let prompts =
                    EncodedPrompts::for_protocol(codec, texts, spec.context.protocol, spec.format)?;
                let mut judgments = files.resume(&meta, &ids, CHECKPOINT_STATEMENTS, progress)?;
                progress.advance(judgments.len());
                while judgments.len() < test.len() {
                    let block =
                        judgments.len()..(judgments.len() + CHECKPOINT_STATEMENTS).min(test.len());
                    // The whole unit's shared prefix, so every block continues the same cache.
                    let part = EncodedPrompts {
                        texts: prompts.texts[block.clone()].to_vec(),
                        tokens: prompts.tokens[block.clone()].to_vec(),
                        shared: prompts.shared,
                    };
                    let probs = scorer.score(&part, &mut |n| progress.advance(n))?;
                    let scored: Vec<Judgment> = test[block]
                        .iter()
                        .zip(probs)
                        .map(|(s, p)| Judgment {
                            id: s.id.clone(),
                            condition: condition.name.clone(),
                            draw: draw.name(),
                            format: spec.format,
                            k,
                            p_a: p.p[0],
                            p_b: p.p[1],
                            p_c: p.p[2],
                            leftover: p.leftover,
                            answer: p.answer(),
                            judged_true: p.answer().judged_true(),
                        })
                        .collect();
                    files.checkpoint(&scored)?;
                    judgments.extend(scored);
                }
                files.store(&meta, &judgments)?;
                progress.finish(false);
                judgments
            }
        };
        results.push(UnitResult {
            condition: condition.name.clone(),
            draw,
            context,
            judgments,
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use crate::tables::summarize;
    use crate::testdata::{CharCodec, FakeScorer, datasets_and_splits};
    use pstat_data::Kind;
    use pstat_stability::Bootstrap;

    fn spec(dir: &std::path::Path, resamples: usize) -> StudySpec {
        StudySpec {
            model: "fake-model".into(),
            domain: Domain::CityLocations,
            format: PromptFormat::Chat,
            context: ContextSpec {
                k: 4,
                baseline: Baseline::Empty,
                seed: 3,
                allow_fewer: false,
                protocol: crate::Protocol::Paper,
            },
            resamples,
            shuffle_control: true,
            dir: dir.to_path_buf(),
        }
    }

    #[test]
    fn a_study_scores_every_unit_once_and_compares_with_the_baseline() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let test: Vec<&Statement> = data[0]
            .of_kind(Kind::True)
            .filter(|s| splits[0].test.contains(&s.id))
            .collect();
        assert_eq!(test.len(), 3);
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path(), 2);
        let conditions = ConditionSet::paper();
        let mut scorer = FakeScorer { calls: 0 };
        let units = run_units(
            &spec,
            &conditions,
            &pool,
            &test,
            &CharCodec,
            &mut scorer,
            &mut Silent,
        )
        .unwrap();
        // Baseline + 5 perturbations × (main + 2 resamples + shuffle).
        assert_eq!(units.len(), 1 + 5 * 4);
        assert_eq!(scorer.calls, 21);
        let summary = summarize(&spec, &units, Bootstrap::default()).unwrap();
        let fictional = summary
            .stability
            .iter()
            .find(|r| r.condition == "fictional" && r.resample.is_none())
            .unwrap();
        assert_eq!((fictional.n_baseline_true, fictional.retractions), (3, 1));
        assert_eq!(fictional.retraction_rate, Some(1.0 / 3.0));
        assert_eq!(fictional.flag.as_deref(), Some("small_baseline"));
        assert_eq!(
            (fictional.context_size, fictional.short_context),
            (Some(4), Some(false))
        );
        let synthetic = summary
            .stability
            .iter()
            .find(|r| r.condition == "synthetic_tf")
            .unwrap();
        assert_eq!(synthetic.retractions, 0);
        let base_answers = &summary.answers[0];
        assert_eq!(
            (base_answers.a, base_answers.c, base_answers.flag.as_deref()),
            (3, 0, Some("small_baseline"))
        );
        let spread = summary
            .resamples
            .iter()
            .find(|r| r.condition == "fictional")
            .unwrap();
        assert_eq!(spread.n_draws, 3);
        assert_eq!(spread.shuffle_flip_rate, Some(0.0));
        // The chat prompt ends at the prefill, with no end-of-turn.
        let judged = &units[1].judgments[0];
        assert_eq!((judged.k, units[0].judgments[0].k), (Some(4), None));
        // Rerunning reuses every stored unit.
        let again = run_units(
            &spec,
            &conditions,
            &pool,
            &test,
            &CharCodec,
            &mut scorer,
            &mut Silent,
        )
        .unwrap();
        assert_eq!(scorer.calls, 21);
        assert_eq!(again, units);
        // The empty baseline is shared across K; the perturbed units are not.
        let mut k8 = spec.clone();
        k8.context.k = 2;
        run_units(
            &k8,
            &conditions,
            &pool,
            &test,
            &CharCodec,
            &mut scorer,
            &mut Silent,
        )
        .unwrap();
        assert_eq!(scorer.calls, 21 + 20);
    }

    /// Stops after `budget` statements, as a kill would (an error, nothing stored after it),
    /// and counts the statements it scored.
    struct Stopping {
        inner: FakeScorer,
        budget: usize,
        scored: usize,
    }

    impl OptionScorer for Stopping {
        fn score(
            &mut self,
            prompts: &EncodedPrompts,
            progress: &mut dyn FnMut(usize),
        ) -> Result<Vec<crate::OptionProbs>, PromptError> {
            if self.scored + prompts.len() > self.budget {
                return Err(PromptError::File {
                    path: "killed".into(),
                    message: "stopped".into(),
                });
            }
            self.scored += prompts.len();
            self.inner.score(prompts, progress)
        }
        fn identity(&self) -> String {
            self.inner.identity()
        }
    }

    /// Every file under `dir`, by relative path.
    fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let name = path.strip_prefix(dir).unwrap().display().to_string();
                    out.insert(name, std::fs::read(&path).unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn a_unit_stopped_midway_resumes_from_its_last_checkpoint_to_the_same_bytes() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        // More statements than a checkpoint block, not a multiple of it.
        let n = 2 * CHECKPOINT_STATEMENTS + 22;
        let owned: Vec<Statement> = (0..n)
            .map(|i| crate::testdata::statement(Domain::CityLocations, Kind::True, 100 + i))
            .collect();
        let test: Vec<&Statement> = owned.iter().collect();
        let conditions = ConditionSet::paper();
        let run = |dir: &std::path::Path, scorer: &mut Stopping| {
            let mut spec = spec(dir, 0);
            spec.shuffle_control = false;
            run_units(
                &spec,
                &conditions,
                &pool,
                &test,
                &CharCodec,
                scorer,
                &mut Silent,
            )
        };
        let scorer = |budget| Stopping {
            inner: FakeScorer { calls: 0 },
            budget,
            scored: 0,
        };
        let whole = tempfile::tempdir().unwrap();
        run(whole.path(), &mut scorer(usize::MAX)).unwrap();
        // The baseline unit, then the second unit stopped inside its third block: two blocks
        // are checkpointed.
        let stopped = tempfile::tempdir().unwrap();
        let mut first = scorer(n + 2 * CHECKPOINT_STATEMENTS + 10);
        assert!(run(stopped.path(), &mut first).is_err());
        assert_eq!(first.scored, n + 2 * CHECKPOINT_STATEMENTS);
        let mut second = scorer(usize::MAX);
        run(stopped.path(), &mut second).unwrap();
        // Six units (baseline + five Θ); the stored unit and the checkpointed blocks are not
        // scored again.
        assert_eq!(second.scored, 6 * n - n - 2 * CHECKPOINT_STATEMENTS);
        assert_eq!(files(stopped.path()), files(whole.path()));
    }

    #[test]
    fn a_context_short_of_k_is_an_error_or_a_flagged_row() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let test: Vec<&Statement> = data[0]
            .of_kind(Kind::True)
            .filter(|s| splits[0].test.contains(&s.id))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec(dir.path(), 0);
        spec.shuffle_control = false;
        // Four training statements per kind: a Synthetic (TF) context of 6 is short.
        spec.context.k = 6;
        let conditions = ConditionSet::paper();
        let mut scorer = FakeScorer { calls: 0 };
        let mut run = |spec: &StudySpec| {
            run_units(
                spec,
                &conditions,
                &pool,
                &test,
                &CharCodec,
                &mut scorer,
                &mut Silent,
            )
        };
        assert!(run(&spec).is_err(), "allow_fewer is off");
        spec.context.allow_fewer = true;
        let units = run(&spec).unwrap();
        let summary = summarize(&spec, &units, Bootstrap::default()).unwrap();
        let synthetic = summary
            .stability
            .iter()
            .find(|r| r.condition == "synthetic_tf")
            .unwrap();
        assert_eq!(
            (synthetic.k, synthetic.context_size, synthetic.short_context),
            (Some(6), Some(4), Some(true))
        );
    }
}
