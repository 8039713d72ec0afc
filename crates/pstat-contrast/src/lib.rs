#![warn(missing_docs)]

//! Contrastive prompts (Appendix I.1): per cluster, the retracted members ranked by how many
//! perturbation conditions retract them, and the nearest non-retracted statements by cosine
//! distance in standardized activation space, filled into the paper's template verbatim; the
//! client that asks an OpenAI-compatible chat endpoint to name each cluster ([`labeler`]) and
//! the table of the themes it names ([`themes`]). The clustering itself is pstat-cluster's.

pub mod labeler;
pub mod themes;

use pstat_cluster::matrix::dot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The paper's prompt template, byte-identical to Appendix I.1.
pub const TEMPLATE: &str = include_str!("template.txt");

/// One statement of a (model, domain) pair, as the prompt builder needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptPoint {
    /// The statement's id in its dataset.
    pub id: String,
    /// The statement as written in the dataset.
    pub text: String,
    /// Number of perturbation conditions under which it retracts (0 = not retracted).
    pub retraction_count: usize,
    /// The retracting conditions, e.g. "behavioral Θ=25%" (instantiation and condition).
    pub retraction_types: Vec<String>,
    /// Whether the statement was believed True at baseline. A non-retracted statement that was
    /// not is neither stable nor retracted: it counts under "other baseline statuses".
    pub believed_at_baseline: bool,
    /// Cluster label from the clustering (members only); `None` for noise and unclustered points.
    pub cluster: Option<i32>,
    /// Standardized veracity-layer representation (all points the same length).
    pub representation: Vec<f64>,
}

/// How many examples a prompt lists (15 and 15 by default).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PromptOptions {
    /// Retracted examples listed per cluster (highest retraction counts first).
    pub max_retracted: usize,
    /// Nearby non-retracted examples listed per cluster (nearest first).
    pub max_nearby: usize,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            max_retracted: 15,
            max_nearby: 15,
        }
    }
}

/// A retracted member of a cluster, as listed in its prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetractedExample {
    /// The statement's id in its dataset.
    pub id: String,
    /// The statement as written in the dataset.
    pub text: String,
    /// Number of perturbation conditions under which it retracts (at least 1).
    pub retraction_count: usize,
    /// The retracting conditions, as in [`PromptPoint::retraction_types`].
    pub retraction_types: Vec<String>,
}

/// A non-retracted statement outside a cluster, believed True at baseline, listed in the
/// cluster's prompt as a stable contrast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NearbyExample {
    /// The statement's id in its dataset.
    pub id: String,
    /// The statement as written in the dataset.
    pub text: String,
    /// Smallest cosine distance to any cluster member.
    pub cosine_distance: f64,
}

/// A filled prompt and the facts it was filled from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterPrompt {
    /// The dataset (domain) the statements come from.
    pub dataset: String,
    /// The model whose activations were clustered.
    pub model: String,
    /// The cluster's label from the clustering (0 or more).
    pub cluster_id: i32,
    /// Number of statements in the cluster.
    pub cluster_size: usize,
    /// Number of cluster members retracted under at least one condition (all of them, not
    /// only those the prompt lists).
    pub n_retracted: usize,
    /// Number of nearby non-retracted examples listed (at most
    /// [`PromptOptions::max_nearby`]).
    pub n_nearby_non_retracted: usize,
    /// Non-retracted statements not believed at baseline, within the distance of the farthest
    /// listed nearby example.
    pub n_other: usize,
    /// For each retracting condition, how many retracted members retract under it.
    pub retraction_type_counts: BTreeMap<String, usize>,
    /// Every retracted member, most retraction conditions first, then by id; the prompt lists
    /// the first [`PromptOptions::max_retracted`].
    pub retracted: Vec<RetractedExample>,
    /// The non-retracted statements outside the cluster, believed True at baseline, nearest
    /// first (then by id).
    pub nearby: Vec<NearbyExample>,
    /// The template filled with the facts above (a list with no entries reads "(none)").
    pub prompt: String,
}

/// Why [`build_prompts`] rejected its points.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// A representation's length differs from the first point's.
    #[error("statement {id}: representation has {found} values, expected {expected}")]
    Dimension {
        /// The statement whose representation is off.
        id: String,
        /// Its length.
        found: usize,
        /// The first point's length.
        expected: usize,
    },
    /// A representation holds a NaN or infinity.
    #[error("statement {id}: non-finite value in representation")]
    NonFinite {
        /// The statement whose representation holds it.
        id: String,
    },
}

/// 1 − cos(a, b); a zero vector is at distance 1 from everything.
fn cosine_distance(a: &[f64], b: &[f64]) -> f64 {
    let norms = dot(a, a).sqrt() * dot(b, b).sqrt();
    if norms > 0.0 {
        1.0 - dot(a, b) / norms
    } else {
        1.0
    }
}

/// One prompt per cluster, in increasing cluster id (none when no point has a cluster); points
/// with no cluster or a negative one only serve as nearby candidates.
///
/// # Errors
///
/// [`PromptError`] when the representations differ in length or hold a non-finite value.
pub fn build_prompts(
    dataset: &str,
    model: &str,
    points: &[PromptPoint],
    options: &PromptOptions,
) -> Result<Vec<ClusterPrompt>, PromptError> {
    let expected = points.first().map_or(0, |p| p.representation.len());
    for p in points {
        if p.representation.len() != expected {
            return Err(PromptError::Dimension {
                id: p.id.clone(),
                found: p.representation.len(),
                expected,
            });
        }
        if p.representation.iter().any(|v| !v.is_finite()) {
            return Err(PromptError::NonFinite { id: p.id.clone() });
        }
    }
    let mut clusters: BTreeMap<i32, Vec<&PromptPoint>> = BTreeMap::new();
    for p in points {
        if let Some(c) = p.cluster.filter(|&c| c >= 0) {
            clusters.entry(c).or_default().push(p);
        }
    }
    Ok(clusters
        .into_iter()
        .map(|(cluster_id, members)| {
            cluster_prompt(dataset, model, cluster_id, &members, points, options)
        })
        .collect())
}

fn cluster_prompt(
    dataset: &str,
    model: &str,
    cluster_id: i32,
    members: &[&PromptPoint],
    points: &[PromptPoint],
    options: &PromptOptions,
) -> ClusterPrompt {
    let mut retracted: Vec<&PromptPoint> = members
        .iter()
        .copied()
        .filter(|p| p.retraction_count > 0)
        .collect();
    retracted.sort_by(|a, b| {
        b.retraction_count
            .cmp(&a.retraction_count)
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut retraction_type_counts: BTreeMap<String, usize> = BTreeMap::new();
    for p in &retracted {
        for t in &p.retraction_types {
            *retraction_type_counts.entry(t.clone()).or_default() += 1;
        }
    }
    // Candidates: non-retracted statements outside this cluster, by distance to the cluster.
    let mut candidates: Vec<(f64, &PromptPoint)> = points
        .iter()
        .filter(|p| p.retraction_count == 0 && p.cluster != Some(cluster_id))
        .map(|p| {
            let d = members
                .iter()
                .map(|m| cosine_distance(&m.representation, &p.representation))
                .fold(f64::INFINITY, f64::min);
            (d, p)
        })
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    let nearby: Vec<NearbyExample> = candidates
        .iter()
        .filter(|(_, p)| p.believed_at_baseline)
        .take(options.max_nearby)
        .map(|(d, p)| NearbyExample {
            id: p.id.clone(),
            text: p.text.clone(),
            cosine_distance: *d,
        })
        .collect();
    let radius = nearby
        .last()
        .map_or(f64::NEG_INFINITY, |n| n.cosine_distance);
    let n_other = candidates
        .iter()
        .filter(|(d, p)| !p.believed_at_baseline && *d <= radius)
        .count();
    let retracted: Vec<RetractedExample> = retracted
        .iter()
        .map(|p| RetractedExample {
            id: p.id.clone(),
            text: p.text.clone(),
            retraction_count: p.retraction_count,
            retraction_types: p.retraction_types.clone(),
        })
        .collect();
    let mut prompt = ClusterPrompt {
        dataset: dataset.to_string(),
        model: model.to_string(),
        cluster_id,
        cluster_size: members.len(),
        n_retracted: retracted.len(),
        n_nearby_non_retracted: nearby.len(),
        n_other,
        retraction_type_counts,
        retracted,
        nearby,
        prompt: String::new(),
    };
    prompt.prompt = fill_template(&prompt, options.max_retracted);
    prompt
}

fn fill_template(p: &ClusterPrompt, max_retracted: usize) -> String {
    let counts = serde_json::to_string(&p.retraction_type_counts).expect("string map serializes");
    let retracted: String = p
        .retracted
        .iter()
        .take(max_retracted)
        .map(|r| {
            format!(
                "\n- \"{}\" (id {}; retracted under {} condition(s): {})",
                r.text,
                r.id,
                r.retraction_count,
                r.retraction_types.join(", ")
            )
        })
        .collect();
    let nearby: String = p
        .nearby
        .iter()
        .map(|n| {
            format!(
                "\n- \"{}\" (id {}; cosine distance {:.3})",
                n.text, n.id, n.cosine_distance
            )
        })
        .collect();
    let none = |s: String| {
        if s.is_empty() {
            "(none)".to_string()
        } else {
            s
        }
    };
    let values: BTreeMap<&str, String> = BTreeMap::from([
        ("dataset", p.dataset.clone()),
        ("model", p.model.clone()),
        ("cluster id", p.cluster_id.to_string()),
        ("cluster size", p.cluster_size.to_string()),
        ("number retracted", p.n_retracted.to_string()),
        (
            "number nearby non-retracted",
            p.n_nearby_non_retracted.to_string(),
        ),
        ("number other", p.n_other.to_string()),
        ("counts", counts),
        // The lists follow "…examples: " in the template, so each item starts on a new line.
        ("retracted examples", none(retracted)),
        ("nearby non-retracted examples", none(nearby)),
    ]);
    substitute(TEMPLATE, &values)
}

/// Replaces each `[name]` whose name is in `values`, scanning once so that substituted text
/// (which may itself contain brackets) is never re-examined.
fn substitute(template: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find(']')
            .and_then(|close| values.get(&after[..close]).map(|v| (close, v)))
        {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Markdown rendering of the prompts: one section per cluster with its facts and the prompt.
pub fn prompts_markdown(prompts: &[ClusterPrompt]) -> String {
    let mut md = String::new();
    for p in prompts {
        md.push_str(&format!(
            "## {} · {} · cluster {}\n\n{} statements, {} retracted, {} nearby non-retracted, {} other baseline statuses\n\n```text\n{}\n```\n\n",
            p.dataset, p.model, p.cluster_id, p.cluster_size, p.n_retracted, p.n_nearby_non_retracted, p.n_other, p.prompt.trim_end()
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(
        id: &str,
        count: usize,
        believed: bool,
        cluster: Option<i32>,
        rep: [f64; 2],
    ) -> PromptPoint {
        PromptPoint {
            id: id.into(),
            text: format!("statement {id} [x]"),
            retraction_count: count,
            retraction_types: (0..count).map(|i| format!("behavioral Θ{i}")).collect(),
            believed_at_baseline: believed,
            cluster,
            representation: rep.to_vec(),
        }
    }

    #[test]
    fn ranks_retracted_and_finds_nearest_stable() {
        let points = vec![
            point("a", 1, true, Some(0), [1.0, 0.0]),
            point("b", 3, true, Some(0), [1.0, 0.1]),
            point("near", 0, true, None, [1.0, 0.2]),
            point("other", 0, false, None, [1.0, 0.25]),
            point("far", 0, true, None, [0.0, 1.0]),
            point("c", 2, true, Some(1), [-1.0, 0.0]),
        ];
        let prompts = build_prompts(
            "cities",
            "smollm2",
            &points,
            &PromptOptions {
                max_retracted: 5,
                max_nearby: 2,
            },
        )
        .unwrap();
        assert_eq!(prompts.len(), 2);
        let p = &prompts[0];
        assert_eq!(
            p.retracted
                .iter()
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>(),
            ["b", "a"]
        );
        assert_eq!(
            p.nearby.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
            ["near", "far"]
        );
        assert_eq!(p.n_other, 1);
        assert_eq!(p.retraction_type_counts["behavioral Θ0"], 2);
        assert!(
            p.prompt
                .contains("- Cluster size: 2\n- Number retracted: 2\n")
        );
        assert!(p.prompt.contains("- Retraction-type counts: {\"behavioral Θ0\":2,\"behavioral Θ1\":1,\"behavioral Θ2\":1}\n"));
        assert!(p.prompt.contains(
            "cluster: \n- \"statement b [x]\" (id b; retracted under 3 condition(s): behavioral Θ0, behavioral Θ1, behavioral Θ2)\n"
        ));
        // Bracketed text inside statements is left alone; the rest of the template is verbatim.
        assert!(p.prompt.starts_with("You are helping analyze clusters"));
        assert!(p.prompt.ends_with("retraction_hypothesis\ncaveats\n"));
        assert!(prompts_markdown(&prompts).contains("## cities · smollm2 · cluster 1"));
    }

    #[test]
    fn rejects_ragged_representations() {
        let mut bad = point("z", 0, true, None, [1.0, 0.0]);
        bad.representation.push(2.0);
        let err = build_prompts(
            "d",
            "m",
            &[point("a", 1, true, Some(0), [1.0, 0.0]), bad],
            &PromptOptions::default(),
        );
        assert!(matches!(err, Err(PromptError::Dimension { .. })));
    }
}
