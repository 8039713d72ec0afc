//! Exclusive train / calibration / test splits (notes §2.2), built once per domain from a seed
//! and saved; every experiment reuses them.
//!
//! The upstream rule: sample (subject, object) pairs for training, put every entity string of
//! those pairs into a "train-entity" multiset, and send to test exactly the rows in which
//! neither the subject nor the object is in that set; while test is still smaller than its
//! target, thin the multiset by 2.5% and repeat. Calibration is carved from the remaining rows
//! the same way. The guarantee is the upstream one: no test or calibration row contains an
//! entity of the sampled train-entity set. Our RNG is ChaCha8 (bit parity with numpy is not a
//! goal; the committed split files are the reference).

use crate::error::DataError;
use crate::load::Dataset;
use crate::statement::Domain;
use rand::SeedableRng;
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Calibration,
    Test,
}

/// Shares of all statements. The paper's protocol is 55 / 20 / 25.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitConfig {
    pub seed: u64,
    pub test: f64,
    pub calibration: f64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig {
            seed: 42,
            test: 0.25,
            calibration: 0.20,
        }
    }
}

/// Which statements of one domain are in which split (ids in dataset order), with the data
/// hash they were made from so a stale split is never applied to changed data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitAssignment {
    pub domain: Domain,
    pub config: SplitConfig,
    pub data_hash: String,
    /// The sampled train-entity set that no test row contains.
    pub test_guard: Vec<String>,
    /// The set sampled from the non-test rows that no calibration row contains.
    pub calibration_guard: Vec<String>,
    pub train: Vec<String>,
    pub calibration: Vec<String>,
    pub test: Vec<String>,
}

impl SplitAssignment {
    pub fn ids(&self, split: Split) -> &[String] {
        match split {
            Split::Train => &self.train,
            Split::Calibration => &self.calibration,
            Split::Test => &self.test,
        }
    }

    /// Map from statement id to its split.
    pub fn lookup(&self) -> HashMap<&str, Split> {
        let mut map = HashMap::new();
        for split in [Split::Train, Split::Calibration, Split::Test] {
            for id in self.ids(split) {
                map.insert(id.as_str(), split);
            }
        }
        map
    }

    /// Check that this split belongs to `data` (same data hash, same statements).
    pub fn check_matches(&self, data: &Dataset) -> Result<(), DataError> {
        if self.domain != data.domain || self.data_hash != data.data_hash {
            return Err(DataError::Invalid(format!(
                "the saved {} split was made from other data (hash {}…, current data {}…); delete it to rebuild",
                self.domain,
                &self.data_hash[..12.min(self.data_hash.len())],
                &data.data_hash[..12.min(data.data_hash.len())]
            )));
        }
        Ok(())
    }
}

/// Build the exclusive split of a domain. Errors if any split comes out empty.
pub fn exclusive_split(data: &Dataset, config: SplitConfig) -> Result<SplitAssignment, DataError> {
    let valid = |x: f64| x > 0.0 && x < 1.0;
    if !valid(config.test) || !valid(config.calibration) || config.test + config.calibration >= 1.0
    {
        return Err(DataError::Invalid(format!(
            "split shares must be in (0, 1) and leave room for training: test {}, calibration {}",
            config.test, config.calibration
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let all: Vec<usize> = (0..data.statements.len()).collect();
    let (rest, test, test_guard) = split_once(data, &all, config.test, &mut rng);
    // Calibration is a share of all statements, carved from what test left.
    let cal_share_of_rest = config.calibration / (1.0 - config.test);
    let (train, calibration, calibration_guard) =
        split_once(data, &rest, cal_share_of_rest, &mut rng);
    for (name, part) in [
        ("train", &train),
        ("calibration", &calibration),
        ("test", &test),
    ] {
        if part.is_empty() {
            return Err(DataError::Invalid(format!(
                "{}: the {name} split is empty ({} statements in the domain)",
                data.domain,
                data.statements.len()
            )));
        }
    }
    let ids = |idx: &[usize]| idx.iter().map(|&i| data.statements[i].id.clone()).collect();
    let sorted = |set: HashSet<String>| {
        let mut v: Vec<String> = set.into_iter().collect();
        v.sort();
        v
    };
    Ok(SplitAssignment {
        domain: data.domain,
        config,
        data_hash: data.data_hash.clone(),
        test_guard: sorted(test_guard),
        calibration_guard: sorted(calibration_guard),
        train: ids(&train),
        calibration: ids(&calibration),
        test: ids(&test),
    })
}

/// One exclusive split of `rows` into (kept, held_out) with held_out just above `frac`.
fn split_once(
    data: &Dataset,
    rows: &[usize],
    frac: f64,
    rng: &mut ChaCha8Rng,
) -> (Vec<usize>, Vec<usize>, HashSet<String>) {
    let entity = |i: usize| {
        let s = &data.statements[i];
        (s.subject.as_str(), s.object.as_str())
    };
    let mut seen = HashSet::new();
    let pairs: Vec<(&str, &str)> = rows
        .iter()
        .map(|&i| entity(i))
        .filter(|p| seen.insert(*p))
        .collect();
    let k = ((pairs.len() as f64) * (1.0 - frac)).round() as usize;
    let mut entities: Vec<&str> = sample(rng, pairs.len(), k.min(pairs.len()))
        .into_iter()
        .flat_map(|i| [pairs[i].0, pairs[i].1])
        .collect();
    loop {
        let set: HashSet<&str> = entities.iter().copied().collect();
        let (kept, held): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&i| {
            let (a, b) = entity(i);
            set.contains(a) || set.contains(b)
        });
        if held.len() as f64 / rows.len() as f64 > frac || entities.is_empty() {
            return (kept, held, set.into_iter().map(String::from).collect());
        }
        // Thin the multiset by 2.5%; duplicates survive independently, as upstream.
        let keep = (entities.len() as f64 * 0.975).floor() as usize;
        let chosen = sample(rng, entities.len(), keep);
        entities = chosen.into_iter().map(|i| entities[i]).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{DataRoot, load_domain};
    use crate::statement::{Kind, Statement};
    use rand::Rng;

    fn shares(a: &SplitAssignment) -> [f64; 3] {
        let n = (a.train.len() + a.calibration.len() + a.test.len()) as f64;
        [a.train.len(), a.calibration.len(), a.test.len()].map(|c| c as f64 / n)
    }

    /// The exclusivity guarantee, checked for any dataset and split.
    fn assert_exclusive(data: &Dataset, a: &SplitAssignment) {
        let by_id: HashMap<&str, &Statement> =
            data.statements.iter().map(|s| (s.id.as_str(), s)).collect();
        for (ids, guard) in [
            (&a.test, &a.test_guard),
            (&a.calibration, &a.calibration_guard),
        ] {
            let guard: HashSet<&str> = guard.iter().map(|s| s.as_str()).collect();
            for id in ids {
                let s = by_id[id.as_str()];
                assert!(!guard.contains(s.subject.as_str()) && !guard.contains(s.object.as_str()));
            }
        }
        let mut all: Vec<&String> = a
            .train
            .iter()
            .chain(&a.calibration)
            .chain(&a.test)
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            data.statements.len(),
            "every statement in exactly one split"
        );
    }

    #[test]
    fn bundled_splits_are_exclusive_proportional_and_deterministic() {
        let root = DataRoot::bundled();
        for domain in Domain::ALL {
            let data = load_domain(&root, domain).unwrap();
            let a = exclusive_split(&data, SplitConfig::default()).unwrap();
            let [train, cal, test] = shares(&a);
            assert!((train - 0.55).abs() <= 0.02, "{domain} train share {train}");
            assert!(
                (cal - 0.20).abs() <= 0.02,
                "{domain} calibration share {cal}"
            );
            assert!((test - 0.25).abs() <= 0.02, "{domain} test share {test}");
            assert_exclusive(&data, &a);
            let b = exclusive_split(&data, SplitConfig::default()).unwrap();
            assert_eq!(
                serde_json::to_vec(&a).unwrap(),
                serde_json::to_vec(&b).unwrap()
            );
        }
    }

    #[test]
    fn exclusivity_holds_for_random_datasets_and_seeds() {
        for seed in 0..25u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(1000 + seed);
            let n_subjects = rng.random_range(40..200);
            let n_objects = rng.random_range(3..30);
            let statements = (0..rng.random_range(200..600))
                .map(|i| Statement {
                    id: format!("t:{i}"),
                    domain: Domain::CityLocations,
                    relation: "cities".into(),
                    text: String::new(),
                    subject: format!("s{}", rng.random_range(0..n_subjects)),
                    object: format!("o{}", rng.random_range(0..n_objects)),
                    negated: rng.random(),
                    kind: Kind::True,
                    provenance: String::new(),
                    source: String::new(),
                })
                .collect();
            let data = Dataset {
                domain: Domain::CityLocations,
                statements,
                data_hash: "x".into(),
            };
            let config = SplitConfig {
                seed,
                ..SplitConfig::default()
            };
            match exclusive_split(&data, config) {
                Ok(a) => assert_exclusive(&data, &a),
                Err(e) => assert!(e.to_string().contains("split is empty"), "{e}"),
            }
        }
    }

    #[test]
    fn different_seeds_give_different_splits() {
        let data = load_domain(&DataRoot::bundled(), Domain::MedIndications).unwrap();
        let a = exclusive_split(&data, SplitConfig::default()).unwrap();
        let b = exclusive_split(
            &data,
            SplitConfig {
                seed: 7,
                ..SplitConfig::default()
            },
        )
        .unwrap();
        assert_ne!(a.test, b.test);
    }
}
