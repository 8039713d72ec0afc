//! Perturbation conditions Θ as data (Table 2 of the paper). A condition names which statement
//! kinds a probe is trained to call True and which statements form the belief context of a
//! prompt. The six conditions of the paper are built in (`conditions.toml` beside this file);
//! a run config may add more in the same TOML form without touching code.

use crate::error::DataError;
use crate::statement::Kind;
use serde::{Deserialize, Serialize};

/// Where the K statements of a prompting belief context come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from", try_from = "RawContext")]
pub enum ContextSource {
    /// No context (the baseline Θ0).
    None,
    /// Training statements of these kinds in the evaluated domain.
    Kinds {
        /// The kinds drawn from (never `noise`).
        kinds: Vec<Kind>,
    },
    /// True training statements of the other domains, K / (number of other domains) each,
    /// shuffled: the behavioral Noise control.
    OtherDomainsTrue,
}

/// A context table as written, read through [`ContextSource`]'s `try_from`: serde's tagged
/// enum would ignore a `kinds` given with a source that reads none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    from: String,
    kinds: Option<Vec<Kind>>,
}

impl TryFrom<RawContext> for ContextSource {
    type Error = String;

    fn try_from(raw: RawContext) -> Result<Self, String> {
        match (raw.from.as_str(), raw.kinds) {
            ("kinds", Some(kinds)) => Ok(ContextSource::Kinds { kinds }),
            ("kinds", None) => Err("`from = \"kinds\"` needs `kinds`".into()),
            ("none", None) => Ok(ContextSource::None),
            ("other_domains_true", None) => Ok(ContextSource::OtherDomainsTrue),
            (from @ ("none" | "other_domains_true"), Some(_)) => Err(format!(
                "`kinds` is read only with `from = \"kinds\"`, not with `from = \"{from}\"`"
            )),
            (other, _) => Err(format!(
                "unknown context source `{other}`, expected one of `none`, `kinds`, `other_domains_true`"
            )),
        }
    }
}

/// One perturbation Θ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Identifier used in tables and on the command line, e.g. `synthetic_tf`.
    pub name: String,
    /// Name as printed in figures, e.g. `Synthetic (TF)`.
    pub title: String,
    /// Kinds labelled True when retraining a probe under Θ (everything else is Not True).
    /// Always includes `true`; `noise` here means the Gaussian noise sequences.
    pub probe_true: Vec<Kind>,
    /// The belief context for prompting under Θ.
    pub context: ContextSource,
    /// Conditions this one is set against in the paired comparisons (each gives a row
    /// "this − other" per cell); empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compare_with: Vec<String>,
}

impl Condition {
    /// Θ's label for a kind when training a probe.
    pub fn probe_label(&self, kind: Kind) -> bool {
        self.probe_true.contains(&kind)
    }

    /// Whether this is the baseline Θ0: only True labelled True, no context.
    pub fn is_baseline(&self) -> bool {
        self.probe_true == [Kind::True] && self.context == ContextSource::None
    }

    fn validate(&self) -> Result<(), DataError> {
        let bad = |msg: String| {
            Err(DataError::Invalid(format!(
                "condition `{}`: {msg}",
                self.name
            )))
        };
        if self.name.trim().is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return bad("`name` must be a non-empty identifier of letters, digits and _".into());
        }
        if !self.probe_true.contains(&Kind::True) {
            return bad(
                "`probe_true` must include `true` (P-StaT only adds Neither kinds to True)".into(),
            );
        }
        if self.probe_true.contains(&Kind::False) {
            return bad("`probe_true` may not include `false`".into());
        }
        if let ContextSource::Kinds { kinds } = &self.context {
            if kinds.is_empty() {
                return bad(
                    "`context.kinds` is empty; use `from = \"none\"` for no context".into(),
                );
            }
            if kinds.contains(&Kind::Noise) {
                return bad(
                    "`context.kinds` cannot contain `noise`; use `from = \"other_domains_true\"`"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionFile {
    #[serde(default)]
    condition: Vec<Condition>,
}

/// An ordered set of conditions; the first is the baseline Θ0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionSet {
    /// The conditions, in the order tables list them.
    pub conditions: Vec<Condition>,
}

const BUILTIN: &str = include_str!("conditions.toml");

impl ConditionSet {
    /// Table 2: Baseline, Synthetic (TF), Synthetic (Fi), Fictional, Fictional (T), Noise.
    pub fn paper() -> Self {
        Self::from_toml(BUILTIN, "built-in conditions").expect("built-in conditions are valid")
    }

    /// Parse `[[condition]]` tables. `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, DataError> {
        let file: ConditionFile =
            toml::from_str(text).map_err(|e| DataError::Invalid(format!("{origin}: {e}")))?;
        let set = ConditionSet {
            conditions: file.condition,
        };
        set.validate()
            .map_err(|e| DataError::Invalid(format!("{origin}: {e}")))?;
        Ok(set)
    }

    /// Add user-defined conditions after the built-in ones; a name may not repeat.
    pub fn extend(&mut self, extra: Vec<Condition>) -> Result<(), DataError> {
        self.conditions.extend(extra);
        self.validate()
    }

    fn validate(&self) -> Result<(), DataError> {
        for c in &self.conditions {
            c.validate()?;
        }
        for (i, c) in self.conditions.iter().enumerate() {
            if self.conditions[..i].iter().any(|d| d.name == c.name) {
                return Err(DataError::Invalid(format!(
                    "condition `{}` is defined twice",
                    c.name
                )));
            }
            if c.is_baseline()
                && let Some(first) = self.conditions[..i].iter().find(|d| d.is_baseline())
            {
                return Err(DataError::Invalid(format!(
                    "condition `{}` is the baseline `{}` again (probe_true = [\"true\"], no context): it would perturb nothing",
                    c.name, first.name
                )));
            }
        }
        for c in &self.conditions {
            for other in &c.compare_with {
                let bad = |why: &str| {
                    Err(DataError::Invalid(format!(
                        "condition `{}`: `compare_with` names `{other}`, {why}",
                        c.name
                    )))
                };
                match self.conditions.iter().find(|d| &d.name == other) {
                    None => {
                        return bad(&format!(
                            "which is not a condition (known: {})",
                            self.names().join(", ")
                        ));
                    }
                    Some(d) if d.name == c.name => return bad("the condition itself"),
                    Some(d) if d.is_baseline() || c.is_baseline() => {
                        return bad("but the baseline is what every condition is measured against");
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Every (Θa, Θb) of the paired comparisons, in condition order.
    pub fn compared_pairs(&self) -> Vec<(&str, &str)> {
        self.conditions
            .iter()
            .flat_map(|c| {
                c.compare_with
                    .iter()
                    .map(move |other| (c.name.as_str(), other.as_str()))
            })
            .collect()
    }

    /// The first baseline condition ([`Condition::is_baseline`]), `None` when there is none.
    pub fn baseline(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.is_baseline())
    }

    /// The condition called `name`; [`DataError::Invalid`] listing the known names otherwise.
    pub fn get(&self, name: &str) -> Result<&Condition, DataError> {
        self.conditions
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                DataError::Invalid(format!(
                    "unknown condition `{name}` (known: {})",
                    self.names().join(", ")
                ))
            })
    }

    /// Every condition's name, in order.
    pub fn names(&self) -> Vec<&str> {
        self.conditions.iter().map(|c| c.name.as_str()).collect()
    }

    /// The perturbed conditions (everything but the baseline).
    pub fn perturbations(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| !c.is_baseline())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_conditions_match_table_2() {
        let set = ConditionSet::paper();
        assert_eq!(
            set.names(),
            [
                "baseline",
                "synthetic_tf",
                "synthetic_fi",
                "fictional",
                "fictional_t",
                "noise"
            ]
        );
        let fictional = set.get("fictional").unwrap();
        assert!(fictional.probe_label(Kind::FictionalT) && fictional.probe_label(Kind::FictionalF));
        assert!(!fictional.probe_label(Kind::SyntheticTf) && !fictional.probe_label(Kind::Noise));
        let fict_t = set.get("fictional_t").unwrap();
        assert!(fict_t.probe_label(Kind::FictionalT) && !fict_t.probe_label(Kind::FictionalF));
        let noise = set.get("noise").unwrap();
        assert!(noise.probe_label(Kind::Noise));
        assert_eq!(noise.context, ContextSource::OtherDomainsTrue);
        assert!(set.baseline().unwrap().is_baseline());
        assert_eq!(set.perturbations().count(), 5);
        assert_eq!(
            set.compared_pairs(),
            [
                ("synthetic_tf", "fictional"),
                ("synthetic_tf", "fictional_t"),
                ("synthetic_fi", "fictional"),
                ("synthetic_fi", "fictional_t"),
            ]
        );
    }

    #[test]
    fn compare_with_must_name_another_perturbation() {
        let text = "[[condition]]\nname = \"x\"\ntitle = \"X\"\nprobe_true = [\"true\", \"fictional_t\"]\ncontext = { from = \"kinds\", kinds = [\"fictional_t\"] }\ncompare_with = [\"fictional\"]\n";
        // A user's condition may name a built-in one: the set is checked once extended.
        let mut x = toml::from_str::<ConditionFile>(text)
            .unwrap()
            .condition
            .remove(0);
        let mut set = ConditionSet::paper();
        set.extend(vec![x.clone()]).unwrap();
        assert_eq!(set.compared_pairs().last(), Some(&("x", "fictional")));
        for (named, why) in [
            ("fictionl", "is not a condition"),
            ("x", "the condition itself"),
            ("baseline", "the baseline"),
        ] {
            x.compare_with = vec![named.to_string()];
            let err = ConditionSet::paper()
                .extend(vec![x.clone()])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("condition `x`: `compare_with`") && err.contains(why),
                "{err}"
            );
        }
    }

    #[test]
    fn user_defined_condition_extends_the_set() {
        let mut set = ConditionSet::paper();
        let extra = ConditionSet::from_toml(
            r#"
            [[condition]]
            name = "all_neither"
            title = "All Neither"
            probe_true = ["true", "fictional_t", "fictional_f", "synthetic_tf", "synthetic_fi"]
            context = { from = "kinds", kinds = ["fictional_t", "synthetic_tf"] }
            "#,
            "my.toml",
        )
        .unwrap();
        set.extend(extra.conditions).unwrap();
        let c = set.get("all_neither").unwrap();
        assert!(c.probe_label(Kind::SyntheticFi));
        assert!(
            set.extend(vec![c.clone()]).is_err(),
            "duplicate names are rejected"
        );
    }

    #[test]
    fn bad_conditions_are_named_errors() {
        let err = ConditionSet::from_toml(
            "[[condition]]\nname = \"x\"\ntitle = \"X\"\nprobe_true = [\"true\", \"fictionall\"]\ncontext = { from = \"none\" }\n",
            "cfg.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cfg.toml") && err.contains("fictionall"),
            "{err}"
        );
        let err = ConditionSet::from_toml(
            "[[condition]]\nname = \"x\"\ntitle = \"X\"\nprobe_true = [\"fictional_t\"]\ncontext = { from = \"none\" }\n",
            "cfg.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("must include `true`"), "{err}");
        // Keys serde's tagged enum would have ignored, and a second baseline that every table
        // would have dropped.
        let user = |body: &str| {
            let extra: ConditionFile = toml::from_str(&format!(
                "[[condition]]\nname = \"x\"\ntitle = \"X\"\n{body}"
            ))
            .map_err(|e| e.to_string())?;
            ConditionSet::paper()
                .extend(extra.condition)
                .map_err(|e| e.to_string())
        };
        for (body, expect) in [
            (
                "probe_true = [\"true\", \"fictional_t\"]\ncontext = { from = \"none\", kinds = [\"true\"] }",
                "`kinds` is read only with `from = \"kinds\"`",
            ),
            (
                "probe_true = [\"true\"]\ncontext = { from = \"kinds\" }",
                "needs `kinds`",
            ),
            (
                "probe_true = [\"true\"]\ncontext = { from = \"none\" }",
                "is the baseline `baseline` again",
            ),
        ] {
            let err = user(body).unwrap_err();
            assert!(err.contains(expect), "{body}: {err}");
        }
        user("probe_true = [\"true\", \"fictional_t\"]\ncontext = { from = \"kinds\", kinds = [\"fictional_t\"] }").unwrap();
        let err = ConditionSet::paper()
            .get("fictionl")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown condition `fictionl`"), "{err}");
    }
}
