//! "What this run shows": sentences computed from the run's numbers, so the report states
//! what this run found (including where it disagrees with the paper), never the paper's
//! conclusions.

use crate::inputs::{BigramDistanceRow, DistanceRow, FamiliarityRow, RunData};
use crate::names::{
    KindFamily, domain_order, domain_title, kind_family, kind_title, sorted_unique,
};
use pstat_stability::MIN_BASELINE_TRUE;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub heading: String,
    pub lines: Vec<String>,
}

/// Per (model, domain) values of each kind family; `None` when a family is absent.
struct Families {
    true_: Option<(String, f64)>,
    false_: Option<(String, f64)>,
    fictional: Vec<(String, f64)>,
    synthetic: Vec<(String, f64)>,
}

fn families<'a>(values: impl Iterator<Item = (&'a str, f64)>) -> Families {
    let mut f = Families {
        true_: None,
        false_: None,
        fictional: vec![],
        synthetic: vec![],
    };
    for (kind, v) in values {
        let named = (kind_title(kind), v);
        match kind_family(kind) {
            KindFamily::True => f.true_ = Some(named),
            KindFamily::False => f.false_ = Some(named),
            KindFamily::Fictional => f.fictional.push(named),
            KindFamily::Synthetic => f.synthetic.push(named),
            KindFamily::Other => {}
        }
    }
    f
}

fn extreme(values: &[(String, f64)], max: bool) -> Option<&(String, f64)> {
    values
        .iter()
        .reduce(|a, b| if (b.1 > a.1) == max { b } else { a })
}

/// The paper's familiarity ordering True ≥ False > Fictional > Synthetic, per (model, domain):
/// `Ok(())` when it holds, otherwise the first link that fails.
fn ordering_verdict(f: &Families) -> Option<Result<(), String>> {
    let (t, fa) = (f.true_.as_ref()?, f.false_.as_ref()?);
    let (fic_max, fic_min) = (extreme(&f.fictional, true)?, extreme(&f.fictional, false)?);
    let syn_max = extreme(&f.synthetic, true)?;
    let fail = |hi: &(String, f64), lo: &(String, f64), op: &str| {
        Err(format!("{} {:.3} {op} {} {:.3}", lo.0, lo.1, hi.0, hi.1))
    };
    Some(if t.1 < fa.1 {
        fail(t, fa, ">")
    } else if fa.1 <= fic_max.1 {
        fail(fa, fic_max, "≥")
    } else if fic_min.1 <= syn_max.1 {
        fail(fic_min, syn_max, "≥")
    } else {
        Ok(())
    })
}

pub fn familiarity_finding(rows: &[FamiliarityRow]) -> Finding {
    let mut groups: BTreeMap<(&str, &str), Vec<(&str, f64)>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((&r.model, &r.domain))
            .or_default()
            .push((&r.kind, r.mean_object_token_prob));
    }
    let (mut holds, mut checked, mut failures) = (0, 0, Vec::new());
    for ((model, domain), values) in &groups {
        match ordering_verdict(&families(values.iter().copied())) {
            Some(Ok(())) => {
                holds += 1;
                checked += 1;
            }
            Some(Err(why)) => {
                checked += 1;
                failures.push(format!("{model} · {}: fails, {why}.", domain_title(domain)));
            }
            None => failures.push(format!(
                "{model} · {}: not all kinds present, not checked.",
                domain_title(domain)
            )),
        }
    }
    let mut lines = vec![format!(
        "The paper's familiarity ordering True ≥ False > Fictional > Synthetic (mean object-token probability) holds in {holds} of {checked} (model, domain) cells."
    )];
    lines.extend(failures);
    Finding {
        heading: "Familiarity ordering".into(),
        lines,
    }
}

pub fn distance_finding(rows: &[DistanceRow]) -> Finding {
    let mut groups: BTreeMap<(&str, &str), Vec<(&str, f64)>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((&r.model, &r.domain))
            .or_default()
            .push((&r.kind, r.mean_distance));
    }
    let (mut holds, mut checked) = (0, 0);
    let mut lines = Vec::new();
    for ((model, domain), values) in &groups {
        let f = families(values.iter().copied());
        let (Some(fic), Some(syn)) = (extreme(&f.fictional, true), extreme(&f.synthetic, false))
        else {
            continue;
        };
        checked += 1;
        if fic.1 <= syn.1 {
            holds += 1;
        } else {
            lines.push(format!(
                "{model} · {}: {} {:.3} > {} {:.3}.",
                domain_title(domain),
                fic.0,
                fic.1,
                syn.0,
                syn.1
            ));
        }
    }
    lines.insert(
        0,
        format!("Fictional statements are no more spread out (within-group distance) than Synthetic ones in {holds} of {checked} (model, domain) cells."),
    );
    Finding {
        heading: "Representational spread (Fig. 2d)".into(),
        lines,
    }
}

/// For each domain, which real or Fictional kind each Synthetic kind is lexically nearest to;
/// the construction intends Synthetic (TF) ≈ True/False and Synthetic (Fi) ≈ Fictional.
pub fn bigram_finding(rows: &[BigramDistanceRow]) -> Finding {
    let domains = sorted_unique(rows.iter().map(|r| r.domain.as_str()), domain_order);
    let mut lines = Vec::new();
    for domain in &domains {
        for (synthetic, expected) in [
            ("synthetic_tf", [KindFamily::True, KindFamily::False]),
            ("synthetic_fi", [KindFamily::Fictional; 2]),
        ] {
            let nearest = rows
                .iter()
                .filter(|r| &r.domain == domain)
                .filter_map(|r| {
                    let other = if kind_title(&r.kind_a) == kind_title(synthetic) {
                        &r.kind_b
                    } else if kind_title(&r.kind_b) == kind_title(synthetic) {
                        &r.kind_a
                    } else {
                        return None;
                    };
                    (kind_family(other) != KindFamily::Synthetic).then_some((other, r.js_distance))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((other, d)) = nearest {
                let as_intended = expected.contains(&kind_family(other));
                lines.push(format!(
                    "{}: {} is nearest to {} (JS distance {d:.3}){}.",
                    domain_title(domain),
                    kind_title(synthetic),
                    kind_title(other),
                    if as_intended {
                        ", as constructed"
                    } else {
                        ", not the kind it was built to mimic"
                    }
                ));
            }
        }
    }
    Finding {
        heading: "Lexical match (Fig. 2a–c)".into(),
        lines,
    }
}

/// Baselines with fewer than MIN_BASELINE_TRUE True beliefs make their rates noisy.
pub fn flagged_baselines(data: &RunData) -> Finding {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in data
        .stability
        .iter()
        .filter(|r| r.flag.as_deref() == Some("small_baseline"))
    {
        let mut what = vec![r.instantiation.to_string(), r.probe.to_string()];
        what.extend(r.k.map(|k| format!("K = {k}")));
        what.extend(r.baseline.map(|b| format!("{b} baseline")));
        what.extend(r.format.map(|f| f.to_string()));
        what.extend(r.layer.map(|l| format!("layer {l}")));
        seen.insert(
            format!(
                "{} · {} · {}",
                r.model,
                domain_title(&r.domain),
                what.join(", ")
            ),
            r.n_baseline_true,
        );
    }
    let mut lines: Vec<String> = seen
        .iter()
        .map(|(what, n)| format!("{what}: |B_true(Θ0)| = {n}."))
        .collect();
    lines.insert(
        0,
        if seen.is_empty() {
            format!("No baseline has fewer than {MIN_BASELINE_TRUE} held-out True statements judged True.")
        } else {
            format!(
                "{} baseline(s) have fewer than {MIN_BASELINE_TRUE} held-out True statements judged True; their rates are noisy:",
                seen.len()
            )
        },
    );
    Finding {
        heading: "Small baselines".into(),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fam(kind: &str, v: f64) -> (&str, f64) {
        (kind, v)
    }

    #[test]
    fn familiarity_ordering_names_the_failing_link() {
        let ok = families(
            [
                fam("true", 0.3),
                fam("false", 0.2),
                fam("fictional_t", 0.1),
                fam("synthetic_tf", 0.01),
            ]
            .into_iter(),
        );
        assert_eq!(ordering_verdict(&ok), Some(Ok(())));
        let bad = families(
            [
                fam("true", 0.2),
                fam("false", 0.25),
                fam("fictional_t", 0.1),
                fam("synthetic_fi", 0.01),
            ]
            .into_iter(),
        );
        assert_eq!(
            ordering_verdict(&bad),
            Some(Err("False 0.250 > True 0.200".into()))
        );
        let syn_high = families(
            [
                fam("true", 0.3),
                fam("false", 0.2),
                fam("fictional", 0.05),
                fam("synthetic_fi", 0.06),
            ]
            .into_iter(),
        );
        assert_eq!(
            ordering_verdict(&syn_high),
            Some(Err("Synthetic (Fi) 0.060 ≥ Fictional 0.050".into()))
        );
        let partial = families([fam("true", 0.3)].into_iter());
        assert_eq!(ordering_verdict(&partial), None);
    }
}
