//! Exclusive train / calibration / test splits, built once per domain from a seed and saved;
//! every experiment reuses them.
//!
//! Entity-exclusive: every statement about one subject (city, drug, head word) is in the same
//! split, so no probe is tested on an entity it was trained on. Objects (countries,
//! conditions, glosses) recur across hundreds of subjects and are shared between splits, as in
//! the upstream split (notes §2.2), whose guard left 800+ objects in both train and test.
//!
//! Stratified by kind: each family of kinds (True and False name the same real subjects,
//! Fictional (T) and (F) the same fictional ones; each Synthetic kind stands alone) is split
//! on its own, so every kind gets 55 / 20 / 25 of its own statements. Subjects are exclusive
//! within a family; a string that is a subject in two families (none in the bundled data)
//! need not be. The upstream rule, run over a whole domain at once, sends rare entities to
//! test (only ~15% of City Fictional (T) reached train, too few for a K = 100 context), and
//! its guard moves in steps of a whole hub object (one country releases hundreds of rows):
//! run per family it still missed the shares by up to 8 points.
//!
//! How: a family's subjects are shuffled (seeded ChaCha8) and then taken largest first; each
//! goes to the split where it leaves the per-kind counts closest to their targets (a greedy
//! packing; the large subjects are placed while every split still has room, the many small
//! ones then fill the targets to within a few statements).

use crate::error::DataError;
use crate::load::Dataset;
use crate::statement::{Domain, Kind};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One of the three exclusive parts of a domain's statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// What probes are trained on, and what prompting contexts are drawn from (55% by default).
    Train,
    /// Held out from training (20% by default); e.g. the veracity-layer search scores its
    /// probes on it.
    Calibration,
    /// Held out for evaluation (25% by default).
    Test,
}

/// Shares of all statements. The paper's protocol is 55 / 20 / 25.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitConfig {
    /// Seed of the subject shuffle (42 by default).
    pub seed: u64,
    /// Share of each kind's statements in test, in (0, 1) (0.25 by default).
    pub test: f64,
    /// Share of each kind's statements in calibration, in (0, 1) (0.20 by default); train
    /// gets the rest, so `test + calibration` must be below 1.
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
    /// The domain split.
    pub domain: Domain,
    /// The seed and shares it was made with.
    pub config: SplitConfig,
    /// [`Dataset::data_hash`] of the data it was made from.
    pub data_hash: String,
    /// The families of kinds that were split on their own (those present in the data).
    pub families: Vec<Vec<Kind>>,
    /// Ids of the training statements, in dataset order.
    pub train: Vec<String>,
    /// Ids of the calibration statements, in dataset order.
    pub calibration: Vec<String>,
    /// Ids of the test statements, in dataset order.
    pub test: Vec<String>,
}

/// The families of kinds split on their own: kinds of one family share entities (True and
/// False name the same real cities, drugs and words; Fictional (T) and (F) the same works).
pub const FAMILIES: [&[Kind]; 4] = [
    &[Kind::True, Kind::False],
    &[Kind::FictionalT, Kind::FictionalF],
    &[Kind::SyntheticTf],
    &[Kind::SyntheticFi],
];

impl SplitAssignment {
    /// The sizes and shares of the three parts in one line, e.g. `city_locations: train 2766
    /// (55.0%), calibration 1006 (20.0%), test 1258 (25.0%)`.
    pub fn summary_line(&self) -> String {
        let n = (self.train.len() + self.calibration.len() + self.test.len()).max(1) as f64;
        let part = |ids: &[String]| format!("{} ({:.1}%)", ids.len(), 100.0 * ids.len() as f64 / n);
        format!(
            "{}: train {}, calibration {}, test {}",
            self.domain,
            part(&self.train),
            part(&self.calibration),
            part(&self.test)
        )
    }

    /// The ids in one part.
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

impl SplitConfig {
    /// Check the shares (for a config validated before any work starts).
    pub fn validate(&self) -> Result<(), DataError> {
        let valid = |x: f64| x > 0.0 && x < 1.0;
        if !valid(self.test) || !valid(self.calibration) || self.test + self.calibration >= 1.0 {
            return Err(DataError::Invalid(format!(
                "split shares must be in (0, 1) and leave room for training: test {}, calibration {}",
                self.test, self.calibration
            )));
        }
        Ok(())
    }
}

/// Build the stratified exclusive split of a domain. Errors if any split comes out empty.
pub fn exclusive_split(data: &Dataset, config: SplitConfig) -> Result<SplitAssignment, DataError> {
    config.validate()?;
    if let Some(s) = data.statements.iter().find(|s| family_of(s.kind).is_none()) {
        return Err(DataError::Invalid(format!(
            "{}: statement {} has kind {}, which has no text to split",
            data.domain, s.id, s.kind
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let shares = [
        1.0 - config.test - config.calibration,
        config.calibration,
        config.test,
    ];
    let mut parts: [Vec<usize>; 3] = Default::default();
    let mut families = Vec::new();
    for (f, kinds) in FAMILIES.iter().enumerate() {
        let rows: Vec<usize> = (0..data.statements.len())
            .filter(|&i| family_of(data.statements[i].kind) == Some(f))
            .collect();
        if rows.is_empty() {
            continue;
        }
        for (part, family_part) in parts
            .iter_mut()
            .zip(split_family(data, &rows, kinds, shares, &mut rng))
        {
            part.extend(family_part);
        }
        families.push(kinds.to_vec());
    }
    let [train, calibration, test] = parts;
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
    // Ids in dataset order, whatever the family order.
    let ids = |mut idx: Vec<usize>| {
        idx.sort_unstable();
        idx.into_iter()
            .map(|i| data.statements[i].id.clone())
            .collect()
    };
    Ok(SplitAssignment {
        domain: data.domain,
        config,
        data_hash: data.data_hash.clone(),
        families,
        train: ids(train),
        calibration: ids(calibration),
        test: ids(test),
    })
}

/// Index of the family in [`FAMILIES`] that `kind` belongs to (none for Noise, which has no
/// statements).
pub fn family_of(kind: Kind) -> Option<usize> {
    FAMILIES.iter().position(|f| f.contains(&kind))
}

/// Assign the subjects of one family (its `rows`) to [train, calibration, test] so that each
/// kind's counts come as close as a greedy packing can to `shares` of that kind's statements.
fn split_family(
    data: &Dataset,
    rows: &[usize],
    kinds: &[Kind],
    shares: [f64; 3],
    rng: &mut ChaCha8Rng,
) -> [Vec<usize>; 3] {
    let kind_index = |i: usize| {
        kinds
            .iter()
            .position(|k| *k == data.statements[i].kind)
            .expect("rows of the family")
    };
    // Subjects in first-seen order, each with its rows; two spellings of one subject (NFC or
    // NFD, other spacing) are one entity.
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut subjects: Vec<Vec<usize>> = Vec::new();
    for &i in rows {
        let next = subjects.len();
        let s = *index_of
            .entry(crate::load::comparable(&data.statements[i].subject))
            .or_insert(next);
        if s == next {
            subjects.push(Vec::new());
        }
        subjects[s].push(i);
    }
    subjects.shuffle(rng);
    // Stable: equal sizes keep their shuffled order.
    subjects.sort_by_key(|rows| std::cmp::Reverse(rows.len()));
    let mut totals = vec![0.0f64; kinds.len()];
    for &i in rows {
        totals[kind_index(i)] += 1.0;
    }
    let mut counts = [(); 3].map(|_| vec![0.0f64; kinds.len()]);
    let mut parts: [Vec<usize>; 3] = Default::default();
    for block in subjects {
        let mut add = vec![0.0f64; kinds.len()];
        for &i in &block {
            add[kind_index(i)] += 1.0;
        }
        // The change in squared relative miss, summed over kinds, of adding the block to a split.
        // A kind of the family with no statements has no miss (its 0/0 would make every cost NaN,
        // and every block would go to the first split).
        let cost = |s: usize| -> f64 {
            (0..kinds.len())
                .filter(|&k| totals[k] > 0.0)
                .map(|k| {
                    let target = shares[s] * totals[k];
                    let before = (counts[s][k] - target) / totals[k];
                    let after = (counts[s][k] + add[k] - target) / totals[k];
                    after * after - before * before
                })
                .sum()
        };
        let best = (0..3)
            .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
            .expect("three splits");
        for k in 0..kinds.len() {
            counts[best][k] += add[k];
        }
        parts[best].extend(block);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::{ConditionSet, ContextSource};
    use crate::load::{DataRoot, load_domain};
    use crate::statement::Statement;
    use rand::Rng;

    /// (train, calibration, test) shares of the statements of `kind`.
    fn kind_shares(data: &Dataset, a: &SplitAssignment, kind: Kind) -> [f64; 3] {
        let lookup = a.lookup();
        let mut counts = [0usize; 3];
        for s in data.statements.iter().filter(|s| s.kind == kind) {
            counts[lookup[s.id.as_str()] as usize] += 1;
        }
        let n = counts.iter().sum::<usize>() as f64;
        counts.map(|c| c as f64 / n)
    }

    /// The exclusivity guarantee, checked for any dataset and split: every statement in
    /// exactly one split, and within a family no subject in two splits.
    fn assert_exclusive(data: &Dataset, a: &SplitAssignment) {
        let lookup = a.lookup();
        assert_eq!(
            a.train.len() + a.calibration.len() + a.test.len(),
            data.statements.len()
        );
        assert_eq!(
            lookup.len(),
            data.statements.len(),
            "every statement in one split"
        );
        for kinds in &a.families {
            let mut subject_split: HashMap<&str, Split> = HashMap::new();
            for s in data.statements.iter().filter(|s| kinds.contains(&s.kind)) {
                let split = lookup[s.id.as_str()];
                let first = *subject_split.entry(s.subject.as_str()).or_insert(split);
                assert_eq!(first, split, "subject `{}` in two splits", s.subject);
            }
        }
    }

    /// Every kind gets 55 / 20 / 25 of its own statements (within 3 points) for every seed tried, and
    /// every context of the paper's conditions can hold K = 100 training statements.
    #[test]
    fn bundled_splits_are_stratified_by_kind_exclusive_and_deterministic() {
        let root = DataRoot::bundled();
        let conditions = ConditionSet::paper();
        let data: Vec<Dataset> = Domain::ALL
            .iter()
            .map(|&d| load_domain(&root, d).unwrap())
            .collect();
        for seed in 0..30 {
            let config = SplitConfig {
                seed,
                ..SplitConfig::default()
            };
            let splits: Vec<SplitAssignment> = data
                .iter()
                .map(|d| exclusive_split(d, config).unwrap())
                .collect();
            for (d, a) in data.iter().zip(&splits) {
                assert_exclusive(d, a);
                // No subject string is shared between families in the bundled data, so no
                // subject is in two splits at all.
                let lookup = a.lookup();
                let mut subject_split: HashMap<&str, Split> = HashMap::new();
                for s in &d.statements {
                    let split = lookup[s.id.as_str()];
                    let first = *subject_split.entry(s.subject.as_str()).or_insert(split);
                    assert_eq!(first, split, "{}: `{}` in two splits", d.domain, s.subject);
                }
                for kind in FAMILIES.iter().flat_map(|f| f.iter()) {
                    let [train, cal, test] = kind_shares(d, a, *kind);
                    let what = format!("{} {kind} seed {seed}", d.domain);
                    assert!((train - 0.55).abs() <= 0.03, "{what}: train {train:.3}");
                    assert!((cal - 0.20).abs() <= 0.03, "{what}: calibration {cal:.3}");
                    assert!((test - 0.25).abs() <= 0.03, "{what}: test {test:.3}");
                }
            }
            let train_of = |i: usize, kinds: &[Kind]| {
                let train: std::collections::HashSet<&str> =
                    splits[i].train.iter().map(|s| s.as_str()).collect();
                data[i]
                    .statements
                    .iter()
                    .filter(|s| kinds.contains(&s.kind) && train.contains(s.id.as_str()))
                    .count()
            };
            for (i, d) in data.iter().enumerate() {
                assert!(train_of(i, &[Kind::True]) >= 100, "{} True", d.domain);
                for c in conditions.perturbations() {
                    match &c.context {
                        ContextSource::Kinds { kinds } => {
                            let n = train_of(i, kinds);
                            assert!(n >= 100, "{} {}: {n} seed {seed}", d.domain, c.name)
                        }
                        ContextSource::OtherDomainsTrue => {
                            for j in (0..data.len()).filter(|&j| j != i) {
                                assert!(train_of(j, &[Kind::True]) >= 50);
                            }
                        }
                        ContextSource::None => {}
                    }
                }
            }
        }
        let a = exclusive_split(&data[0], SplitConfig::default()).unwrap();
        let b = exclusive_split(&data[0], SplitConfig::default()).unwrap();
        assert_eq!(
            serde_json::to_vec(&a).unwrap(),
            serde_json::to_vec(&b).unwrap()
        );
    }

    #[test]
    fn exclusivity_holds_for_random_datasets_and_seeds() {
        let kinds = [Kind::True, Kind::False, Kind::FictionalT, Kind::SyntheticFi];
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
                    kind: kinds[rng.random_range(0..kinds.len())],
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

    /// A family with one of its kinds absent (a real-entity file without False statements, a
    /// Fictional file without Fictional (F) ones) still spreads the other kind over the three
    /// splits: the absent kind's 0/0 miss sent every statement to train.
    #[test]
    fn a_family_missing_one_kind_is_still_split_by_its_shares() {
        for absent in [Kind::False, Kind::FictionalF] {
            let mut data = load_domain(&DataRoot::bundled(), Domain::CityLocations).unwrap();
            data.statements.retain(|s| s.kind != absent);
            let split = exclusive_split(&data, SplitConfig::default()).unwrap();
            assert_exclusive(&data, &split);
            let present = if absent == Kind::False {
                Kind::True
            } else {
                Kind::FictionalT
            };
            let kind_of: HashMap<&str, Kind> = data
                .statements
                .iter()
                .map(|s| (s.id.as_str(), s.kind))
                .collect();
            let count = |ids: &[String]| {
                ids.iter()
                    .filter(|id| kind_of[id.as_str()] == present)
                    .count()
            };
            let (train, test) = (count(&split.train), count(&split.test));
            assert!(
                train > 0 && test > 0,
                "{absent:?} absent: {train} train, {test} test"
            );
            let share = test as f64 / (train + count(&split.calibration) + test) as f64;
            assert!(
                (share - 0.25).abs() < 0.05,
                "{absent:?} absent: test share {share}"
            );
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
