//! How identifiers in the run's tables are printed and ordered: the paper's names and order
//! for its domains, statement kinds and conditions; anything user-defined keeps its own name
//! and sorts after them, alphabetically.

use pstat_data::{ConditionSet, Domain};
use pstat_tables::Decisions;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Sort key: position among the known names, then the raw string.
fn key(known: Option<usize>, raw: &str) -> (usize, String) {
    (known.unwrap_or(usize::MAX), raw.to_string())
}

pub fn domain_title(raw: &str) -> String {
    raw.parse::<Domain>()
        .map(|d| d.title().to_string())
        .unwrap_or_else(|_| raw.to_string())
}

pub fn domain_order(a: &str, b: &str) -> Ordering {
    let pos = |s: &str| {
        s.parse::<Domain>()
            .ok()
            .and_then(|d| Domain::ALL.iter().position(|x| *x == d))
    };
    key(pos(a), a).cmp(&key(pos(b), b))
}

/// Statement kinds in the column order of Tables A6–A8. `fictional` (both Fictional kinds
/// together) sits where the paper prints "Fictional".
const KINDS: [(&str, &str); 8] = [
    ("true", "True"),
    ("false", "False"),
    ("fictional", "Fictional"),
    ("fictionalt", "Fictional (T)"),
    ("fictionalf", "Fictional (F)"),
    ("synthetictf", "Synthetic (TF)"),
    ("syntheticfi", "Synthetic (Fi)"),
    ("noise", "Noise"),
];

/// Accepts `synthetic_tf`, `Synthetic (TF)`, `SyntheticTF`, … alike.
fn kind_index(raw: &str) -> Option<usize> {
    let norm: String = raw
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    KINDS.iter().position(|(k, _)| *k == norm)
}

pub fn kind_title(raw: &str) -> String {
    kind_index(raw).map_or_else(|| raw.to_string(), |i| KINDS[i].1.to_string())
}

pub fn kind_order(a: &str, b: &str) -> Ordering {
    key(kind_index(a), a).cmp(&key(kind_index(b), b))
}

/// The coarse family a kind belongs to, for the familiarity-ordering check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindFamily {
    True,
    False,
    Fictional,
    Synthetic,
    Other,
}

pub fn kind_family(raw: &str) -> KindFamily {
    match kind_index(raw).map(|i| KINDS[i].0) {
        Some("true") => KindFamily::True,
        Some("false") => KindFamily::False,
        Some("fictional" | "fictionalt" | "fictionalf") => KindFamily::Fictional,
        Some("synthetictf" | "syntheticfi") => KindFamily::Synthetic,
        _ => KindFamily::Other,
    }
}

pub fn paper_conditions() -> &'static ConditionSet {
    static PAPER: OnceLock<ConditionSet> = OnceLock::new();
    PAPER.get_or_init(ConditionSet::paper)
}

/// Display titles of conditions: those the run recorded in `decisions.json` (a user
/// condition's own title among them), else the paper's, else the name itself.
#[derive(Debug, Clone)]
pub struct ConditionTitles(BTreeMap<String, String>);

impl ConditionTitles {
    pub fn new(decisions: Option<&Decisions>) -> Self {
        let paper = paper_conditions()
            .conditions
            .iter()
            .map(|c| (c.name.clone(), c.title.clone()));
        let recorded = decisions
            .into_iter()
            .flat_map(|d| &d.conditions)
            .map(|c| (c.name.clone(), c.title.clone()));
        ConditionTitles(paper.chain(recorded).collect())
    }

    pub fn title(&self, name: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }
}

pub fn condition_order(a: &str, b: &str) -> Ordering {
    let pos = |s: &str| {
        paper_conditions()
            .conditions
            .iter()
            .position(|c| c.name == s)
    };
    key(pos(a), a).cmp(&key(pos(b), b))
}

/// Sorted, deduplicated copy of `items` under `order`.
pub fn sorted_unique<'a>(
    items: impl IntoIterator<Item = &'a str>,
    order: fn(&str, &str) -> Ordering,
) -> Vec<String> {
    let mut v: Vec<String> = items.into_iter().map(str::to_string).collect();
    v.sort_by(|a, b| order(a, b));
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_names_and_order() {
        assert_eq!(kind_title("synthetic_tf"), "Synthetic (TF)");
        assert_eq!(kind_title("Fictional (T)"), "Fictional (T)");
        assert_eq!(kind_title("custom"), "custom");
        let kinds = sorted_unique(
            ["synthetic_fi", "zeta", "true", "fictional", "false"],
            kind_order,
        );
        assert_eq!(
            kinds,
            ["true", "false", "fictional", "synthetic_fi", "zeta"]
        );
        let conds = sorted_unique(
            ["noise", "mine", "synthetic_tf", "fictional"],
            condition_order,
        );
        assert_eq!(conds, ["synthetic_tf", "fictional", "noise", "mine"]);
        let paper = ConditionTitles::new(None);
        assert_eq!(paper.title("fictional_t"), "Fictional (T)");
        assert_eq!(paper.title("mine"), "mine");
        assert_eq!(domain_title("med_indications"), "Medical Indications");
        assert_eq!(kind_family("Synthetic (Fi)"), KindFamily::Synthetic);
    }

    #[test]
    fn a_recorded_title_wins() {
        let decisions = Decisions {
            conditions: vec![pstat_tables::ConditionTitle {
                name: "mine".into(),
                title: "My condition".into(),
                compare_with: Vec::new(),
            }],
            formats: Vec::new(),
        };
        let titles = ConditionTitles::new(Some(&decisions));
        assert_eq!(titles.title("mine"), "My condition");
        assert_eq!(titles.title("synthetic_tf"), "Synthetic (TF)");
    }
}
