//! Belief contexts C_Θ (Section 4.4.2, Appendix G): K training statements drawn without
//! replacement from Θ's context kinds; for Noise, K/2 True training statements from each other
//! domain, shuffled together; for the alternative baseline, K True training statements of the
//! domain. Every draw is seeded from the run seed, domain, condition, K and draw index, and the
//! drawn ids are recorded.

use crate::error::PromptError;
use crate::template::Protocol;
use pstat_data::artifact::sha256_hex;
use pstat_data::{Condition, ContextSource, Dataset, Domain, Kind, SplitAssignment, Statement};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

pub use pstat_tables::Baseline;

/// One context draw of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Draw {
    /// Draw 0, the one the paper reports.
    Main,
    /// An independent redraw, numbered from 1 (`--resamples R` adds draws 1..=R).
    Resample(usize),
    /// The statements of the main draw in a permuted order: the noise floor of the judgment.
    Shuffle,
}

impl Draw {
    /// The `resample` column of the stability table (`None` for the main draw).
    pub fn resample_column(self) -> Option<String> {
        match self {
            Draw::Main => None,
            Draw::Resample(i) => Some(i.to_string()),
            Draw::Shuffle => Some("shuffle".to_string()),
        }
    }

    /// Name used in file names and judgment records.
    pub fn name(self) -> String {
        self.resample_column().unwrap_or_else(|| "main".to_string())
    }
}

impl fmt::Display for Draw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A drawn belief context, as recorded beside the judgments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeliefContext {
    /// Name of the condition Θ the context was drawn for.
    pub condition: String,
    /// The draw's name ([`Draw::name`]): `main`, a resample number, or `shuffle`.
    pub draw: String,
    /// The K that was asked for.
    pub k: usize,
    /// The draw's seed, derived from the run seed, domain, condition, K and draw index.
    pub seed: u64,
    /// Statement ids in prompt order.
    pub ids: Vec<String>,
    /// Statement texts in prompt order (one context line each).
    pub texts: Vec<String>,
    /// Set when `--allow-fewer` let a draw use fewer than K statements: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fewer: Option<String>,
}

/// Training statements of every domain, the pool every context is drawn from.
pub struct TrainingPool<'a> {
    domain: Domain,
    by_domain: Vec<(Domain, Vec<&'a Statement>)>,
}

impl<'a> TrainingPool<'a> {
    /// `datasets` and `splits` pair up by domain; `domain` is the one being evaluated. The
    /// other domains are only needed by the Noise condition.
    pub fn new(
        domain: Domain,
        datasets: &'a [Dataset],
        splits: &[SplitAssignment],
    ) -> Result<Self, PromptError> {
        let mut by_domain = Vec::new();
        for data in datasets {
            let split = splits
                .iter()
                .find(|s| s.domain == data.domain)
                .ok_or_else(|| {
                    pstat_data::DataError::Invalid(format!("no split for domain {}", data.domain))
                })?;
            split.check_matches(data)?;
            let train: HashSet<&str> = split.train.iter().map(String::as_str).collect();
            let statements = data
                .statements
                .iter()
                .filter(|s| train.contains(s.id.as_str()))
                .collect();
            by_domain.push((data.domain, statements));
        }
        if !by_domain.iter().any(|(d, _)| *d == domain) {
            return Err(
                pstat_data::DataError::Invalid(format!("no data for domain {domain}")).into(),
            );
        }
        Ok(TrainingPool { domain, by_domain })
    }

    /// The candidate groups a context source draws from: one group per domain it spans.
    fn groups(&self, source: &ContextSource) -> Vec<(Domain, Vec<Kind>, Vec<&'a Statement>)> {
        let of = |domain: Domain, kinds: &[Kind]| {
            let statements = self
                .by_domain
                .iter()
                .filter(|(d, _)| *d == domain)
                .flat_map(|(_, s)| s.iter().copied())
                .filter(|s| kinds.contains(&s.kind))
                .collect();
            (domain, kinds.to_vec(), statements)
        };
        match source {
            ContextSource::None => Vec::new(),
            ContextSource::Kinds { kinds } => vec![of(self.domain, kinds)],
            ContextSource::OtherDomainsTrue => self
                .by_domain
                .iter()
                .filter(|(d, _)| *d != self.domain)
                .map(|(d, _)| of(*d, &[Kind::True]))
                .collect(),
        }
    }

    /// The context of `condition` (or, for the baseline, of `baseline`) for one draw.
    pub fn draw(
        &self,
        spec: &ContextSpec,
        condition: &Condition,
        draw: Draw,
    ) -> Result<BeliefContext, PromptError> {
        let source = if condition.is_baseline() && spec.baseline == Baseline::True {
            ContextSource::Kinds {
                kinds: vec![Kind::True],
            }
        } else {
            condition.context.clone()
        };
        let index = match draw {
            Draw::Main | Draw::Shuffle => 0,
            Draw::Resample(i) => i,
        };
        let seed = derive_seed(spec.seed, self.domain, &condition.name, spec.k, index);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let groups = self.groups(&source);
        let mut picked: Vec<&Statement> = Vec::new();
        let mut fewer = Vec::new();
        for (i, (domain, kinds, candidates)) in groups.iter().enumerate() {
            // K is split evenly over the groups; the first groups take the remainder.
            let want = spec.k / groups.len() + usize::from(i < spec.k % groups.len());
            let take = if candidates.len() >= want {
                want
            } else if spec.allow_fewer {
                fewer.push(format!(
                    "{domain} [{}]: {} of {want}",
                    kind_list(kinds),
                    candidates.len()
                ));
                candidates.len()
            } else {
                return Err(PromptError::TooFewCandidates {
                    condition: condition.name.clone(),
                    domain: domain.to_string(),
                    kinds: kind_list(kinds),
                    k: want,
                    available: candidates.len(),
                });
            };
            let mut chosen = sample(&mut rng, candidates.len(), take).into_vec();
            // The sampler's output order is unspecified; fix it, then shuffle explicitly.
            chosen.sort_unstable();
            picked.extend(chosen.into_iter().map(|j| candidates[j]));
        }
        // The paper's contexts are shuffled. The authors' code keeps a drawn context in file
        // order (`np.sort` of the drawn indices) and shuffles only the Noise context, which it
        // assembles from two domains.
        let file_order = spec.protocol == Protocol::Authors
            && !matches!(source, ContextSource::OtherDomainsTrue);
        if !file_order {
            picked.shuffle(&mut rng);
        }
        if draw == Draw::Shuffle {
            let shuffle_seed =
                derive_seed(spec.seed, self.domain, &condition.name, spec.k, usize::MAX);
            picked.shuffle(&mut ChaCha8Rng::seed_from_u64(shuffle_seed));
        }
        Ok(BeliefContext {
            condition: condition.name.clone(),
            draw: draw.name(),
            k: spec.k,
            seed,
            ids: picked.iter().map(|s| s.id.clone()).collect(),
            texts: picked.iter().map(|s| s.text.clone()).collect(),
            fewer: (!fewer.is_empty()).then(|| fewer.join("; ")),
        })
    }
}

/// What every context of a run shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextSpec {
    /// K, the number of statements a context asks for (split evenly over the source groups).
    pub k: usize,
    /// Which context the baseline Θ0 gets: none, or K True training statements.
    pub baseline: Baseline,
    /// The run seed every draw's seed is derived from.
    pub seed: u64,
    /// Use every candidate when a condition has fewer than K (recorded in the context).
    pub allow_fewer: bool,
    /// The paper's shuffled contexts or the authors' file order (and their prompt text).
    pub protocol: Protocol,
}

fn kind_list(kinds: &[Kind]) -> String {
    kinds
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A u64 seed that depends on every coordinate of a draw, so draws are independent of each
/// other and of the order in which they are made.
fn derive_seed(seed: u64, domain: Domain, condition: &str, k: usize, draw: usize) -> u64 {
    let digest =
        sha256_hex(format!("pstat-prompt/{seed}/{domain}/{condition}/{k}/{draw}").as_bytes());
    u64::from_str_radix(&digest[..16], 16).expect("sha256 hex digits")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::datasets_and_splits;
    use pstat_data::ConditionSet;

    fn spec(k: usize) -> ContextSpec {
        ContextSpec {
            k,
            baseline: Baseline::Empty,
            seed: 7,
            allow_fewer: false,
            protocol: Protocol::Paper,
        }
    }

    #[test]
    fn draws_k_training_statements_of_the_condition_kinds() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let set = ConditionSet::paper();
        let fictional = set.get("fictional").unwrap();
        let ctx = pool.draw(&spec(6), fictional, Draw::Main).unwrap();
        assert_eq!(ctx.ids.len(), 6);
        let unique: HashSet<&String> = ctx.ids.iter().collect();
        assert_eq!(unique.len(), 6, "without replacement");
        let city = &data[0];
        for id in &ctx.ids {
            let s = city.get(id).unwrap();
            assert!(matches!(s.kind, Kind::FictionalT | Kind::FictionalF));
            assert!(splits[0].train.contains(id), "{id} is a training statement");
        }
        // Same seed, same draw; another draw differs; shuffle is a permutation of main.
        assert_eq!(pool.draw(&spec(6), fictional, Draw::Main).unwrap(), ctx);
        let other = pool.draw(&spec(6), fictional, Draw::Resample(1)).unwrap();
        assert_ne!(other.ids, ctx.ids);
        let shuffled = pool.draw(&spec(6), fictional, Draw::Shuffle).unwrap();
        assert_ne!(shuffled.ids, ctx.ids);
        let mut a = shuffled.ids.clone();
        let mut b = ctx.ids.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }

    #[test]
    fn noise_takes_half_from_each_other_domain() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let noise = ConditionSet::paper().get("noise").unwrap().clone();
        let ctx = pool.draw(&spec(4), &noise, Draw::Main).unwrap();
        let from = |d: Domain| {
            ctx.ids
                .iter()
                .filter(|id| {
                    data.iter()
                        .any(|x| x.domain == d && x.get(id).is_some_and(|s| s.kind == Kind::True))
                })
                .count()
        };
        assert_eq!(from(Domain::MedIndications), 2);
        assert_eq!(from(Domain::WordDefinitions), 2);
    }

    #[test]
    fn baselines_get_no_context_or_k_true_statements() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let set = ConditionSet::paper();
        let base = set.baseline().unwrap();
        assert!(
            pool.draw(&spec(4), base, Draw::Main)
                .unwrap()
                .ids
                .is_empty()
        );
        let alt = ContextSpec {
            baseline: Baseline::True,
            ..spec(4)
        };
        let ctx = pool.draw(&alt, base, Draw::Main).unwrap();
        assert_eq!(ctx.ids.len(), 4);
        assert!(
            ctx.ids
                .iter()
                .all(|id| data[0].get(id).unwrap().kind == Kind::True)
        );
    }

    #[test]
    fn too_few_candidates_is_a_named_error_unless_allowed() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let syn = ConditionSet::paper().get("synthetic_tf").unwrap().clone();
        let err = pool
            .draw(&spec(500), &syn, Draw::Main)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("synthetic_tf") && err.contains("synthetic_tf]") && err.contains("500"),
            "{err}"
        );
        let allowed = ContextSpec {
            allow_fewer: true,
            ..spec(500)
        };
        let ctx = pool.draw(&allowed, &syn, Draw::Main).unwrap();
        assert!(ctx.fewer.as_deref().unwrap().contains("of 500"));
        assert!(!ctx.ids.is_empty() && ctx.ids.len() < 500);
    }

    #[test]
    fn the_authors_protocol_keeps_a_drawn_context_in_file_order() {
        let (data, splits) = datasets_and_splits();
        let pool = TrainingPool::new(Domain::CityLocations, &data, &splits).unwrap();
        let set = ConditionSet::paper();
        let authors = ContextSpec {
            protocol: Protocol::Authors,
            ..spec(4)
        };
        let position = |id: &String| data[0].statements.iter().position(|s| &s.id == id);
        for name in ["fictional", "synthetic_tf", "fictional_t"] {
            let condition = set.get(name).unwrap();
            let ctx = pool.draw(&authors, condition, Draw::Main).unwrap();
            let at: Vec<usize> = ctx.ids.iter().map(|id| position(id).unwrap()).collect();
            assert!(at.windows(2).all(|p| p[0] < p[1]), "{name}: {at:?}");
            // The same statements as the paper's draw, which is shuffled.
            let paper = pool.draw(&spec(4), condition, Draw::Main).unwrap();
            let (mut a, mut b) = (ctx.ids.clone(), paper.ids.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{name}");
        }
        // Noise mixes two domains: shuffled in both protocols.
        let noise = set.get("noise").unwrap();
        assert_eq!(
            pool.draw(&authors, noise, Draw::Main).unwrap().ids,
            pool.draw(&spec(4), noise, Draw::Main).unwrap().ids
        );
    }
}
