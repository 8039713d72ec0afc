//! Character-level Markov name generator with the behaviour of `namemaker` 1.2, which made
//! the upstream synthetic names (notes §1.6): a variable-length context of up to `order`
//! preceding characters, frequency-weighted successors, several candidates per name of which
//! the one closest in length to the training names wins. Seeded with [`ChaCha8Rng`], so a
//! seed replays a name list exactly (upstream's CPython RNG is not replayed bit for bit).

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};

/// How names are drawn from a trained chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameSettings {
    /// Characters of context (namemaker's default 3; 2 for country-like region names).
    pub order: usize,
    /// Candidates per name; the one whose length is relatively closest to the mean training
    /// length is kept (namemaker's default 2; 5 for countries).
    pub n_candidates: usize,
    /// Raw draws allowed per candidate before giving up on it.
    pub max_draws: usize,
}

impl NameSettings {
    /// namemaker's defaults: order 3, 2 candidates, 1000 draws per candidate.
    pub const NAMES: NameSettings = NameSettings {
        order: 3,
        n_candidates: 2,
        max_draws: 1000,
    };
    /// The upstream settings for country/region names: order 2, 5 candidates.
    pub const REGIONS: NameSettings = NameSettings {
        order: 2,
        n_candidates: 5,
        max_draws: 1000,
    };

    /// `order=3 candidates=2`: how the settings are recorded in provenance columns.
    pub fn describe(&self) -> String {
        format!("order={} candidates={}", self.order, self.n_candidates)
    }
}

/// A trained chain: for every context (the last ≤ `order` characters), the characters that
/// followed it in training, with multiplicity; `None` marks the end of a name.
#[derive(Debug, Clone)]
pub struct MarkovNames {
    settings: NameSettings,
    table: HashMap<String, Vec<Option<char>>>,
    training: HashSet<String>,
    mean_len: f64,
}

impl MarkovNames {
    /// Train on `names` (empty names are ignored). Case, spaces and punctuation are part of the
    /// alphabet, as in namemaker.
    pub fn train<'a>(names: impl IntoIterator<Item = &'a str>, settings: NameSettings) -> Self {
        let mut table: HashMap<String, Vec<Option<char>>> = HashMap::new();
        let mut training = HashSet::new();
        let mut total_len = 0usize;
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            let mut context = String::new();
            for c in name.chars() {
                table.entry(context.clone()).or_default().push(Some(c));
                advance(&mut context, c, settings.order);
            }
            table.entry(context).or_default().push(None);
            total_len += name.chars().count();
            training.insert(name.to_string());
        }
        let mean_len = if training.is_empty() {
            0.0
        } else {
            total_len as f64 / training.len() as f64
        };
        MarkovNames {
            settings,
            table,
            training,
            mean_len,
        }
    }

    /// The settings the chain was trained with.
    pub fn settings(&self) -> NameSettings {
        self.settings
    }

    /// Whether `name` is, exactly (case-sensitive), one of the names the chain was trained on.
    pub fn is_training_name(&self, name: &str) -> bool {
        self.training.contains(name)
    }

    /// One unfiltered walk of the chain from the empty context to an end mark (or to a
    /// context never seen in training).
    pub fn raw_name(&self, rng: &mut ChaCha8Rng) -> String {
        let mut name = String::new();
        let mut context = String::new();
        while let Some(successors) = self.table.get(&context) {
            match successors[rng.random_range(0..successors.len())] {
                Some(c) => {
                    name.push(c);
                    advance(&mut context, c, self.settings.order);
                }
                None => break,
            }
        }
        name
    }

    /// One name as namemaker's `make_name` makes it: each candidate is the first of up to
    /// `max_draws` raw names that is non-empty, not a training name and accepted by `valid`;
    /// of the candidates found, the one whose length is relatively closest to the mean training
    /// length wins (the first on ties). `None` when no draw passed.
    pub fn make_name(
        &self,
        rng: &mut ChaCha8Rng,
        valid: &mut dyn FnMut(&str) -> bool,
    ) -> Option<String> {
        let mut best: Option<(f64, String)> = None;
        for _ in 0..self.settings.n_candidates {
            let candidate = (0..self.settings.max_draws)
                .map(|_| self.raw_name(rng))
                .find(|n| !n.is_empty() && !self.is_training_name(n) && valid(n));
            let Some(candidate) = candidate else {
                continue;
            };
            let distance =
                (candidate.chars().count() as f64 - self.mean_len).abs() / self.mean_len.max(1.0);
            if best.as_ref().is_none_or(|(d, _)| distance < *d) {
                best = Some((distance, candidate));
            }
        }
        best.map(|(_, name)| name)
    }
}

/// Append `c` to the context, keeping at most `order` characters.
fn advance(context: &mut String, c: char, order: usize) {
    context.push(c);
    if context.chars().count() > order {
        context.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn chain(order: usize) -> MarkovNames {
        MarkovNames::train(
            [
                "Minas Tirith",
                "Minas Morgul",
                "Osgiliath",
                "Edoras",
                "Hobbiton",
                "Bree",
            ],
            NameSettings {
                order,
                ..NameSettings::NAMES
            },
        )
    }

    #[test]
    fn contexts_grow_to_order_then_slide() {
        let m = MarkovNames::train(["abcde"], NameSettings::NAMES);
        let keys: HashSet<&str> = m.table.keys().map(String::as_str).collect();
        assert_eq!(keys, HashSet::from(["", "a", "ab", "abc", "bcd", "cde"]));
        assert_eq!(m.table["cde"], vec![None]);
        assert_eq!(m.table["abc"], vec![Some('d')]);
    }

    #[test]
    fn successors_keep_multiplicity() {
        let m = MarkovNames::train(["aa", "ab"], NameSettings::NAMES);
        assert_eq!(m.table[""], vec![Some('a'), Some('a')]);
        assert_eq!(m.table["a"], vec![Some('a'), Some('b')]);
    }

    #[test]
    fn same_seed_same_names_and_names_are_new() {
        // Order 3 on six names mostly replays them; order 2 has room for new ones.
        let m = chain(2);
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..20)
                .filter_map(|_| m.make_name(&mut rng, &mut |_| true))
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert!(a.len() >= 10, "{a:?}");
        assert_eq!(a, draw(7));
        assert_ne!(a, draw(8));
        assert!(a.iter().all(|n| !m.is_training_name(n)));
    }

    #[test]
    fn validation_rejects_and_can_exhaust() {
        let m = chain(2);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let name = m.make_name(&mut rng, &mut |n| n.starts_with('M')).unwrap();
        assert!(name.starts_with('M'));
        assert_eq!(m.make_name(&mut rng, &mut |_| false), None);
    }

    #[test]
    fn candidate_closest_to_mean_length_wins() {
        let m = MarkovNames::train(
            ["ab", "abbbbbbbbbbbbbbbbbbb"],
            NameSettings {
                n_candidates: 50,
                ..NameSettings::NAMES
            },
        );
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let name = m.make_name(&mut rng, &mut |_| true).unwrap();
        // Mean length 11: with 50 candidates one lands within a few characters of it.
        assert!((name.len() as f64 - 11.0).abs() <= 3.0, "{name}");
    }
}
