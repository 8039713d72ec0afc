//! Lexical structure of the statement types (Fig. 2 a–c): character-bigram rank–frequency
//! curves over the entity strings (subject and object) of each domain × statement type, and
//! the Jensen–Shannon distance between the types' bigram distributions. If Synthetic (TF)
//! mimics True/False and Synthetic (Fi) mimics Fictional, stability differences between
//! Neither types are not explained by surface statistics alone.

use pstat_data::{Dataset, Kind};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The statement types compared. Fictional (T) and (F) share their entities, so they form
/// one lexical group; Noise has no text.
pub const GROUPS: [&str; 5] = [
    "True",
    "False",
    "Fictional",
    "Synthetic (TF)",
    "Synthetic (Fi)",
];

fn group_of(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::True => Some(GROUPS[0]),
        Kind::False => Some(GROUPS[1]),
        Kind::FictionalT | Kind::FictionalF => Some(GROUPS[2]),
        Kind::SyntheticTf => Some(GROUPS[3]),
        Kind::SyntheticFi => Some(GROUPS[4]),
        Kind::Noise => None,
    }
}

/// Rows of `bigram_rank_frequency.csv` and `bigram_distances.csv` (the Jensen–Shannon
/// distance is the square root of the base-2 divergence, in [0, 1]).
pub use pstat_tables::{BigramDistanceRow as DistanceRow, BigramRankRow as RankFrequencyRow};

// Ordered, so the divergence sums in the same order in every process (same bytes).
type Counts = BTreeMap<String, u64>;

/// Lower-cased character bigrams of every subject and object string, per statement type.
fn bigram_counts(dataset: &Dataset) -> BTreeMap<&'static str, Counts> {
    let mut out: BTreeMap<&'static str, Counts> = BTreeMap::new();
    for s in &dataset.statements {
        let Some(group) = group_of(s.kind) else {
            continue;
        };
        let counts = out.entry(group).or_default();
        for entity in [&s.subject, &s.object] {
            let chars: Vec<char> = entity.to_lowercase().chars().collect();
            for pair in chars.windows(2) {
                *counts.entry(pair.iter().collect()).or_default() += 1;
            }
        }
    }
    out
}

/// Rank–frequency curves of every domain × statement type present in `datasets`.
pub fn bigram_rank_frequency(datasets: &[Dataset]) -> Vec<RankFrequencyRow> {
    let mut rows = Vec::new();
    for dataset in datasets {
        let by_group = bigram_counts(dataset);
        for group in GROUPS {
            let Some(counts) = by_group.get(group) else {
                continue;
            };
            let total: u64 = counts.values().sum();
            let mut ranked: Vec<(&String, &u64)> = counts.iter().collect();
            ranked.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            rows.extend(ranked.into_iter().enumerate().map(|(i, (bigram, &count))| {
                RankFrequencyRow {
                    domain: dataset.domain.to_string(),
                    kind: group.to_string(),
                    rank: i + 1,
                    bigram: bigram.clone(),
                    count,
                    frequency: count as f64 / total as f64,
                }
            }));
        }
    }
    rows
}

/// Jensen–Shannon distances between every two statement types of each domain.
pub fn bigram_js_distances(datasets: &[Dataset]) -> Vec<DistanceRow> {
    let mut rows = Vec::new();
    for dataset in datasets {
        let by_group = bigram_counts(dataset);
        let present: Vec<&str> = GROUPS
            .into_iter()
            .filter(|g| by_group.contains_key(g))
            .collect();
        for (i, a) in present.iter().enumerate() {
            for b in &present[i + 1..] {
                rows.push(DistanceRow {
                    domain: dataset.domain.to_string(),
                    kind_a: a.to_string(),
                    kind_b: b.to_string(),
                    js_distance: js_distance(&by_group[a], &by_group[b]),
                });
            }
        }
    }
    rows
}

/// sqrt(JSD) with log base 2: 0 for identical distributions, 1 for disjoint ones.
pub fn js_distance(p: &Counts, q: &Counts) -> f64 {
    let (np, nq) = (
        p.values().sum::<u64>() as f64,
        q.values().sum::<u64>() as f64,
    );
    if np == 0.0 || nq == 0.0 {
        return if np == nq { 0.0 } else { 1.0 };
    }
    let mut divergence = 0.0;
    let mut add = |x: f64, m: f64| {
        if x > 0.0 {
            divergence += 0.5 * x * (x / m).log2();
        }
    };
    for (k, &cp) in p {
        let (x, y) = (cp as f64 / np, q.get(k).copied().unwrap_or(0) as f64 / nq);
        let m = 0.5 * (x + y);
        add(x, m);
        add(y, m);
    }
    for (k, &cq) in q {
        if !p.contains_key(k) {
            add(cq as f64 / nq, 0.5 * cq as f64 / nq);
        }
    }
    divergence.clamp(0.0, 1.0).sqrt()
}

/// For each domain and Synthetic type, the non-synthetic type it is lexically nearest to:
/// the check that Synthetic (TF) sits with True/False and Synthetic (Fi) with Fictional.
pub fn nearest_kinds_report(distances: &[DistanceRow]) -> String {
    let mut out = String::new();
    let domains: Vec<&str> = {
        let mut d: Vec<&str> = distances.iter().map(|r| r.domain.as_str()).collect();
        d.dedup();
        d
    };
    for domain in domains {
        for synthetic in ["Synthetic (TF)", "Synthetic (Fi)"] {
            let mut to: Vec<(&str, f64)> = distances
                .iter()
                .filter(|r| r.domain == domain)
                .filter_map(|r| match (r.kind_a.as_str(), r.kind_b.as_str()) {
                    (a, b) if a == synthetic && !b.starts_with("Synthetic") => {
                        Some((b, r.js_distance))
                    }
                    (a, b) if b == synthetic && !a.starts_with("Synthetic") => {
                        Some((a, r.js_distance))
                    }
                    _ => None,
                })
                .collect();
            if to.is_empty() {
                continue;
            }
            to.sort_by(|a, b| a.1.total_cmp(&b.1));
            let list: Vec<String> = to.iter().map(|(k, d)| format!("{k} {d:.3}")).collect();
            let _ = writeln!(
                out,
                "{domain}: {synthetic} nearest {} ({})",
                to[0].0,
                list.join(", ")
            );
        }
    }
    out
}

/// Write `bigram_rank_frequency.csv` and `bigram_distances.csv` into `dir` (atomically) and
/// return the distances.
pub fn write_tables(
    datasets: &[Dataset],
    dir: &std::path::Path,
) -> Result<Vec<DistanceRow>, pstat_tables::TableError> {
    pstat_tables::write_table(dir, &bigram_rank_frequency(datasets))?;
    let distances = bigram_js_distances(datasets);
    pstat_tables::write_table(dir, &distances)?;
    Ok(distances)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_data::{DataRoot, Domain, load_domain};

    fn counts(pairs: &[(&str, u64)]) -> Counts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn js_distance_bounds_and_symmetry() {
        let p = counts(&[("ab", 2), ("bc", 2)]);
        let q = counts(&[("xy", 1)]);
        let r = counts(&[("ab", 1), ("xy", 1)]);
        assert_eq!(js_distance(&p, &p), 0.0);
        assert!((js_distance(&p, &q) - 1.0).abs() < 1e-12);
        assert!((js_distance(&p, &r) - js_distance(&r, &p)).abs() < 1e-12);
        // p = (.5,.5,0), r = (.5,0,.5): JSD = 0.5 bit.
        assert!((js_distance(&p, &r) - 0.5f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn bundled_curves_are_ranked_and_normalized() {
        let city = load_domain(&DataRoot::bundled(), Domain::CityLocations).unwrap();
        let rows = bigram_rank_frequency(std::slice::from_ref(&city));
        for group in ["True", "Synthetic (TF)"] {
            let curve: Vec<&RankFrequencyRow> = rows.iter().filter(|r| r.kind == group).collect();
            assert!(!curve.is_empty());
            assert!(
                curve
                    .windows(2)
                    .all(|w| w[0].count >= w[1].count && w[1].rank == w[0].rank + 1)
            );
            let total: f64 = curve.iter().map(|r| r.frequency).sum();
            assert!((total - 1.0).abs() < 1e-9);
        }
        let d = bigram_js_distances(std::slice::from_ref(&city));
        assert!(
            d.iter()
                .any(|r| r.kind_a == "True" && r.kind_b == "Synthetic (TF)")
        );
        assert!(nearest_kinds_report(&d).contains("Synthetic (TF) nearest"));
    }
}
