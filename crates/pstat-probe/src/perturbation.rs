//! The representational instantiation of P-StaT: g_p(s, Θ) = h_Θ(φ_l(s)). For every condition
//! Θ a probe is retrained on the training split with the labels Θ induces (Table 2), and the
//! held-out True statements are judged by it.
//!
//! What stays fixed across conditions, so that only the labels differ: the training bags and
//! their (seeded, shuffled) order, and the Gaussian Noise bags. Noise: n_noise = 0.10·|D|
//! sequences (Appendix B.1.4) of which the training split's share is used for training (the
//! other noise sequences would only sit in calibration/test, which P-StaT never scores).

use crate::bags::KNOWN_POSITIVES;
use crate::bags::{Bags, TrainingSet};
use crate::error::{Result, invalid};
use crate::noise::{gaussian_noise_bags, noise_count};
use crate::probe::{ProbeParams, TrainedProbe};
use pstat_data::activations::Activations;
use pstat_data::{Condition, Dataset, Kind, SplitAssignment};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Training bags of one (model, domain, layer), shared by every condition.
pub struct ConditionTraining {
    bags: Bags,
    /// Kind of each training bag (`Kind::Noise` for the Gaussian sequences).
    kinds: Vec<Kind>,
}

impl ConditionTraining {
    /// Gather the training split's bags from `acts` (one layer of the domain), add the Noise
    /// bags, and shuffle them with `seed` (the upstream fits on the first N bags of a shuffled
    /// order).
    pub fn new(
        data: &Dataset,
        split: &SplitAssignment,
        acts: &Activations,
        seed: u64,
    ) -> Result<Self> {
        let index: HashMap<&str, usize> = acts
            .statement_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let kind_of: HashMap<&str, Kind> = data
            .statements
            .iter()
            .map(|s| (s.id.as_str(), s.kind))
            .collect();
        let mut rows = Vec::with_capacity(split.train.len());
        let mut kinds = Vec::with_capacity(split.train.len());
        for id in &split.train {
            let Some(&i) = index.get(id.as_str()) else {
                return invalid(format!("no activations for training statement `{id}`"));
            };
            rows.push(i);
            kinds.push(kind_of[id.as_str()]);
        }
        if rows.is_empty() {
            return invalid("the training split is empty");
        }
        let real = Bags::from_activations(acts, &rows)?;
        let train_share = split.train.len() as f64 / data.statements.len() as f64;
        let n_noise = (noise_count(data.statements.len()) as f64 * train_share).round() as usize;
        let noise = gaussian_noise_bags(n_noise, &real, seed ^ 0x6e6f697365)?;
        let mut order: Vec<usize> = (0..real.len() + noise.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let mut values = Vec::with_capacity(real.values().len() + noise.values().len());
        let mut offsets = vec![0];
        let mut shuffled_kinds = Vec::with_capacity(order.len());
        for i in order {
            let (bag, kind) = if i < real.len() {
                (real.bag(i), kinds[i])
            } else {
                (noise.bag(i - real.len()), Kind::Noise)
            };
            values.extend_from_slice(bag);
            offsets.push(values.len() / real.dim());
            shuffled_kinds.push(kind);
        }
        Ok(ConditionTraining {
            bags: Bags::new(real.dim(), values, offsets)?,
            kinds: shuffled_kinds,
        })
    }

    /// Number of training bags per kind (for provenance).
    pub fn kind_counts(&self) -> Vec<(Kind, usize)> {
        Kind::ALL
            .iter()
            .map(|k| (*k, self.kinds.iter().filter(|x| *x == k).count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Per kind, among the first `seen` training bags (those a probe's fit sees,
    /// [`ProbeParams::training_bags`]): how many there are and how many of them carry another
    /// label under `condition` than under `baseline`. Every bag of a kind shares its label, so a
    /// kind is relabelled whole or not at all; the counts say how much of the training data a
    /// Θ moved, which a comparison of two Θ's retraction rates should be read against.
    pub fn relabelled(
        &self,
        condition: &Condition,
        baseline: &Condition,
        seen: usize,
    ) -> Vec<RelabelledKind> {
        let seen = &self.kinds[..seen.min(self.kinds.len())];
        Kind::ALL
            .iter()
            .filter_map(|&kind| {
                let bags = seen.iter().filter(|&&k| k == kind).count();
                let moved = condition.probe_label(kind) != baseline.probe_label(kind);
                (bags > 0).then_some(RelabelledKind {
                    kind,
                    bags,
                    relabelled: if moved { bags } else { 0 },
                })
            })
            .collect()
    }

    /// The number of training bags (real and Noise).
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether there are no training bags.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The training set Θ induces: kinds in `probe_true` are +1, all others −1.
    pub fn training_set(&self, condition: &Condition) -> Result<TrainingSet> {
        let labels: Vec<i8> = self
            .kinds
            .iter()
            .map(|k| if condition.probe_label(*k) { 1 } else { -1 })
            .collect();
        if !labels.contains(&1) || !labels.contains(&-1) {
            return invalid(format!(
                "condition `{}` leaves a single class in the training split",
                condition.name
            ));
        }
        TrainingSet::with_last_known(self.bags.clone(), labels, KNOWN_POSITIVES)
    }

    /// Retrain under Θ.
    pub fn fit(&self, condition: &Condition, params: &dyn ProbeParams) -> Result<TrainedProbe> {
        params.fit(&self.training_set(condition)?)
    }
}

/// The training bags of one kind a probe saw under Θ, and how many of them Θ relabelled
/// relative to the baseline ([`ConditionTraining::relabelled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelabelledKind {
    /// The statement kind (`Kind::Noise` for the Gaussian sequences).
    pub kind: Kind,
    /// Training bags of this kind the probe saw (among the first ones it fits).
    pub bags: usize,
    /// How many of them Θ labels differently from the baseline: all of them or 0.
    pub relabelled: usize,
}

/// One statement judged by a probe.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeJudgment {
    /// The statement id.
    pub id: String,
    /// The probe's statement score (decision value; finite).
    pub score: f32,
    /// Whether the probe labels the statement True (score > 0).
    pub judged_true: bool,
}

/// Judge the statements `ids` (typically the held-out True test statements) with `probe`.
pub fn judge(
    probe: &TrainedProbe,
    acts: &Activations,
    ids: &[String],
) -> Result<Vec<ProbeJudgment>> {
    ids.iter()
        .map(|id| {
            let Some(i) = acts.index_of(id) else {
                return invalid(format!("no activations for statement `{id}`"));
            };
            let score = probe.score(acts.statement(i));
            // A NaN score would judge the statement False without a word.
            if !score.is_finite() {
                let layer = acts.metadata.get("layer").map_or("?", String::as_str);
                return invalid(format!(
                    "probe score of statement `{id}` (layer {layer}) is {score}: its activations hold a non-finite value"
                ));
            }
            Ok(ProbeJudgment {
                id: id.clone(),
                score,
                judged_true: TrainedProbe::label(score) == 1,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::massmean::MassMeanParams;
    use pstat_data::{ConditionSet, Domain, Statement};

    /// A toy domain where True statements carry +1 on feature 0 in their last tokens, False −1,
    /// and Fictional (T) statements look like True ones.
    fn toy() -> (Dataset, SplitAssignment, Activations) {
        let kinds = [Kind::True, Kind::False, Kind::FictionalT, Kind::SyntheticTf];
        let mut statements = Vec::new();
        let mut acts = Activations::new(3);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut noise = || rand::Rng::random_range(&mut rng, -0.3f32..0.3);
        for i in 0..120 {
            let kind = kinds[i % 4];
            let id = format!("toy:{i}");
            let sign = match kind {
                Kind::True | Kind::FictionalT => 1.0,
                Kind::False => -1.0,
                _ => 0.0,
            };
            let rows: Vec<f32> = [0.1, 0.0, 1.0, 3.0 * sign, 1.0, 0.0, 3.0 * sign, 0.5, 0.0]
                .iter()
                .map(|v| v + noise())
                .collect();
            acts.push(&id, &[1, 2, 3], &rows);
            statements.push(Statement {
                id,
                domain: Domain::CityLocations,
                relation: "cities".into(),
                text: String::new(),
                subject: format!("s{i}"),
                object: format!("o{i}"),
                negated: false,
                kind,
                provenance: String::new(),
                source: String::new(),
            });
        }
        let ids = |r: std::ops::Range<usize>| r.map(|i| format!("toy:{i}")).collect::<Vec<_>>();
        let split = SplitAssignment {
            domain: Domain::CityLocations,
            config: Default::default(),
            data_hash: String::new(),
            families: vec![],
            train: ids(0..80),
            calibration: ids(80..100),
            test: ids(100..120),
        };
        let data = Dataset {
            domain: Domain::CityLocations,
            statements,
            data_hash: String::new(),
        };
        (data, split, acts)
    }

    #[test]
    fn labels_follow_the_condition_and_bags_are_shared() {
        let (data, split, acts) = toy();
        let training = ConditionTraining::new(&data, &split, &acts, 7).unwrap();
        let counts: HashMap<Kind, usize> = training.kind_counts().into_iter().collect();
        assert_eq!(counts[&Kind::True], 20);
        assert_eq!(
            counts[&Kind::Noise],
            8,
            "0.10·120 = 12 noise sequences, 80/120 of them train"
        );
        let set = ConditionSet::paper();
        let base = training.training_set(set.get("baseline").unwrap()).unwrap();
        let fict = training
            .training_set(set.get("fictional_t").unwrap())
            .unwrap();
        assert_eq!(base.labels.iter().filter(|y| **y == 1).count(), 20);
        assert_eq!(fict.labels.iter().filter(|y| **y == 1).count(), 40);
        assert_eq!(
            base.bags.values(),
            fict.bags.values(),
            "only labels change across Θ"
        );
        let noise = training.training_set(set.get("noise").unwrap()).unwrap();
        assert_eq!(noise.labels.iter().filter(|y| **y == 1).count(), 28);
    }

    #[test]
    fn baseline_probe_believes_held_out_true_statements() {
        let (data, split, acts) = toy();
        let training = ConditionTraining::new(&data, &split, &acts, 7).unwrap();
        let probe = training
            .fit(
                ConditionSet::paper().get("baseline").unwrap(),
                &MassMeanParams::default(),
            )
            .unwrap();
        let true_test: Vec<String> = (100..120)
            .filter(|i| i % 4 == 0)
            .map(|i| format!("toy:{i}"))
            .collect();
        let judged = judge(&probe, &acts, &true_test).unwrap();
        assert!(judged.iter().all(|j| j.judged_true), "{judged:?}");
        assert!(judge(&probe, &acts, &["nope".into()]).is_err());
        let mut broken = acts.clone();
        let i = broken.index_of(&true_test[0]).unwrap();
        let at = broken.offsets[i + 1] * broken.hidden - 1;
        broken.values[at] = f32::NAN;
        broken.metadata.insert("layer".into(), "5".into());
        let err = judge(&probe, &broken, &true_test).unwrap_err().to_string();
        assert!(
            err.contains(&format!("`{}`", true_test[0])) && err.contains("layer 5"),
            "{err}"
        );
    }
}
