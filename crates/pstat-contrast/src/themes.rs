//! Tabulating labeled clusters into themes per model and domain. The paper consolidates labels
//! into broader themes by hand; this groups labels that are identical after normalisation
//! (case, whitespace, surrounding punctuation) and leaves any further merging to the reader.

use super::labeler::ClusterLabel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One cluster of a (model, domain) pair and the label the labeler gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledCluster {
    /// The model whose activations were clustered.
    pub model: String,
    /// The domain (dataset) of the statements.
    pub domain: String,
    /// The cluster's label from the clustering.
    pub cluster_id: i32,
    /// Number of retracted statements in the cluster ([`crate::ClusterPrompt::n_retracted`]).
    pub n_retracted: usize,
    /// The labeler's answer.
    pub label: ClusterLabel,
}

/// One theme: the labeled clusters whose `cluster_label`s are identical after normalisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThemeRow {
    /// The normalised label: lowercase, whitespace collapsed, surrounding ASCII punctuation
    /// trimmed.
    pub theme: String,
    /// Number of labeled clusters with this theme.
    pub clusters: usize,
    /// Sum of their retracted statements.
    pub retracted_statements: usize,
    /// The models it occurs in, sorted, each once.
    pub models: Vec<String>,
    /// The domains it occurs in, sorted, each once.
    pub domains: Vec<String>,
}

fn normalise(label: &str) -> String {
    label
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_matches(|c: char| c.is_ascii_punctuation())
        .to_lowercase()
}

/// Themes ordered by the number of models they occur in, then clusters, then name.
pub fn tabulate_themes(labeled: &[LabeledCluster]) -> Vec<ThemeRow> {
    let mut groups: BTreeMap<String, (usize, usize, BTreeSet<String>, BTreeSet<String>)> =
        BTreeMap::new();
    for c in labeled {
        let entry = groups.entry(normalise(&c.label.cluster_label)).or_default();
        entry.0 += 1;
        entry.1 += c.n_retracted;
        entry.2.insert(c.model.clone());
        entry.3.insert(c.domain.clone());
    }
    let mut rows: Vec<ThemeRow> = groups
        .into_iter()
        .map(
            |(theme, (clusters, retracted_statements, models, domains))| ThemeRow {
                theme,
                clusters,
                retracted_statements,
                models: models.into_iter().collect(),
                domains: domains.into_iter().collect(),
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        b.models
            .len()
            .cmp(&a.models.len())
            .then(b.clusters.cmp(&a.clusters))
            .then_with(|| a.theme.cmp(&b.theme))
    });
    rows
}

/// Markdown table: one row per labeled cluster (model, domain, cluster, label, hypothesis).
pub fn labels_markdown(labeled: &[LabeledCluster]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut md = String::from(
        "| model | domain | cluster | retracted | label | hypothesis |\n|---|---|---|---|---|---|\n",
    );
    for c in labeled {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            cell(&c.model),
            cell(&c.domain),
            c.cluster_id,
            c.n_retracted,
            cell(&c.label.cluster_label),
            cell(&c.label.retraction_hypothesis)
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labeled(model: &str, domain: &str, label: &str) -> LabeledCluster {
        LabeledCluster {
            model: model.into(),
            domain: domain.into(),
            cluster_id: 0,
            n_retracted: 4,
            label: ClusterLabel {
                cluster_label: label.into(),
                shared_cluster_pattern: "p".into(),
                retracted_vs_stable_contrast: "c".into(),
                retraction_hypothesis: "h | x".into(),
                caveats: String::new(),
            },
        }
    }

    #[test]
    fn groups_normalised_labels_across_models() {
        let rows = tabulate_themes(&[
            labeled("m1", "cities", "Ambiguous  city names."),
            labeled("m2", "cities", "ambiguous city names"),
            labeled("m1", "medical", "Rare drugs"),
        ]);
        assert_eq!(rows[0].theme, "ambiguous city names");
        assert_eq!((rows[0].clusters, rows[0].retracted_statements), (2, 8));
        assert_eq!(rows[0].models, ["m1", "m2"]);
        assert_eq!(rows[1].theme, "rare drugs");
        assert!(
            labels_markdown(&[labeled("m", "d", "L")]).contains("| m | d | 0 | 4 | L | h \\| x |")
        );
    }
}
