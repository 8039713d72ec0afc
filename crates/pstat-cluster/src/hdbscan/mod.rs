//! HDBSCAN (Campello et al. 2013) as in the Python `hdbscan` package with its defaults
//! (Euclidean, alpha 1, excess-of-mass selection, no single cluster at the root): condensed tree
//! from the mutual-reachability single linkage, cluster stabilities, and flat labels (−1 = noise).

mod mst;

use crate::matrix::Matrix;
use serde::{Deserialize, Serialize};

/// HDBSCAN's two hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HdbscanParams {
    /// Smallest group of points that counts as a cluster (at least 2 is used).
    pub min_cluster_size: usize,
    /// The neighbour whose distance is a point's core distance, itself not counted (at least 1
    /// is used; at most the number of other points).
    pub min_samples: usize,
}

/// One condensed-tree row: `child` (a point id < n, or a cluster id ≥ n) leaves `parent` at
/// λ = 1/distance with `size` points.
struct CondensedRow {
    parent: usize,
    child: usize,
    lambda: f64,
    size: usize,
}

/// Flat cluster labels 0..k−1 (numbered in condensed-tree order) and −1 for noise.
pub fn hdbscan(x: &Matrix, params: &HdbscanParams) -> Vec<i32> {
    let n = x.rows();
    if n < 2 {
        return vec![-1; n];
    }
    let merges = mst::single_linkage(x, params.min_samples.max(1));
    let tree = condense(&merges, n, params.min_cluster_size.max(2));
    let selected = select_eom(&tree, n);
    label_points(&tree, &selected, n)
}

/// Children of a merge-tree node (points have none).
fn merge_children(merges: &[mst::Merge], n: usize, node: usize) -> Option<(usize, usize)> {
    (node >= n).then(|| (merges[node - n].left, merges[node - n].right))
}

fn node_size(merges: &[mst::Merge], n: usize, node: usize) -> usize {
    if node < n { 1 } else { merges[node - n].size }
}

/// All points below `node` in the merge tree.
fn leaves(merges: &[mst::Merge], n: usize, node: usize) -> Vec<usize> {
    let mut stack = vec![node];
    let mut out = Vec::new();
    while let Some(v) = stack.pop() {
        match merge_children(merges, n, v) {
            Some((l, r)) => stack.extend([r, l]),
            None => out.push(v),
        }
    }
    out
}

/// Walks the merge tree from the root; a split where both sides have ≥ min_cluster_size points
/// creates two new clusters, otherwise the small side's points fall out of the current cluster.
fn condense(merges: &[mst::Merge], n: usize, min_cluster_size: usize) -> Vec<CondensedRow> {
    let root = 2 * n - 2;
    let mut rows = Vec::new();
    let mut next_label = n + 1;
    // (merge-tree node, condensed cluster it belongs to)
    let mut stack = vec![(root, n)];
    while let Some((node, cluster)) = stack.pop() {
        let Some((left, right)) = merge_children(merges, n, node) else {
            continue;
        };
        let distance = merges[node - n].distance;
        let lambda = if distance > 0.0 {
            1.0 / distance
        } else {
            f64::INFINITY
        };
        let (left_size, right_size) = (node_size(merges, n, left), node_size(merges, n, right));
        let left_big = left_size >= min_cluster_size;
        let right_big = right_size >= min_cluster_size;
        let fall_out = |side: usize, rows: &mut Vec<CondensedRow>| {
            for point in leaves(merges, n, side) {
                rows.push(CondensedRow {
                    parent: cluster,
                    child: point,
                    lambda,
                    size: 1,
                });
            }
        };
        match (left_big, right_big) {
            (true, true) => {
                // Ids grow in visiting order, so every child id exceeds its parent's.
                let (l_id, r_id) = (next_label, next_label + 1);
                next_label += 2;
                rows.push(CondensedRow {
                    parent: cluster,
                    child: l_id,
                    lambda,
                    size: left_size,
                });
                rows.push(CondensedRow {
                    parent: cluster,
                    child: r_id,
                    lambda,
                    size: right_size,
                });
                stack.push((right, r_id));
                stack.push((left, l_id));
            }
            (false, false) => {
                fall_out(left, &mut rows);
                fall_out(right, &mut rows);
            }
            (true, false) => {
                fall_out(right, &mut rows);
                stack.push((left, cluster));
            }
            (false, true) => {
                fall_out(left, &mut rows);
                stack.push((right, cluster));
            }
        }
    }
    rows
}

/// Excess-of-mass selection: a cluster is kept unless its children's summed stability exceeds
/// its own; the root is never selected.
fn select_eom(tree: &[CondensedRow], n: usize) -> Vec<usize> {
    let n_clusters = tree
        .iter()
        .flat_map(|r| [Some(r.parent), (r.size > 1).then_some(r.child)])
        .flatten()
        .max()
        .map_or(0, |m| m + 1 - n);
    if n_clusters <= 1 {
        return Vec::new();
    }
    let mut birth = vec![0.0_f64; n_clusters];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n_clusters];
    for r in tree.iter().filter(|r| r.size > 1) {
        birth[r.child - n] = r.lambda;
        children[r.parent - n].push(r.child - n);
    }
    let mut stability = vec![0.0_f64; n_clusters];
    for r in tree {
        stability[r.parent - n] += (r.lambda - birth[r.parent - n]) * r.size as f64;
    }
    let mut is_cluster = vec![true; n_clusters];
    is_cluster[0] = false;
    // Children have larger ids than parents, so a reverse sweep settles children first.
    for c in (1..n_clusters).rev() {
        let subtree: f64 = children[c].iter().map(|&ch| stability[ch]).sum();
        if subtree > stability[c] {
            is_cluster[c] = false;
            stability[c] = subtree;
        } else {
            let mut stack = children[c].clone();
            while let Some(d) = stack.pop() {
                is_cluster[d] = false;
                stack.extend(children[d].iter().copied());
            }
        }
    }
    (0..n_clusters)
        .filter(|&c| is_cluster[c])
        .map(|c| c + n)
        .collect()
}

/// A point belongs to the selected cluster it (or an unselected descendant cluster it sits in)
/// falls out of; points that leave the tree above every selected cluster are noise.
fn label_points(tree: &[CondensedRow], selected: &[usize], n: usize) -> Vec<i32> {
    let max_id = tree
        .iter()
        .map(|r| r.parent.max(r.child))
        .max()
        .unwrap_or(n);
    let mut parent_of = vec![usize::MAX; max_id + 1];
    for r in tree {
        parent_of[r.child] = r.parent;
    }
    let mut labels = vec![-1i32; n];
    for (point, label) in labels.iter_mut().enumerate() {
        let mut node = parent_of[point];
        while node != usize::MAX {
            if let Ok(index) = selected.binary_search(&node) {
                *label = index as i32;
                break;
            }
            node = parent_of[node];
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs() -> Matrix {
        // Three tight groups of 6 points on a line plus one far outlier.
        let mut v = Vec::new();
        for centre in [0.0, 100.0, 200.0] {
            for i in 0..6 {
                v.push(centre + i as f64 * 0.5);
            }
        }
        v.push(1000.0);
        Matrix::new(v.len(), 1, v).unwrap()
    }

    #[test]
    fn finds_three_groups_and_an_outlier() {
        let labels = hdbscan(
            &blobs(),
            &HdbscanParams {
                min_cluster_size: 3,
                min_samples: 3,
            },
        );
        // Python hdbscan 0.8.44 (`HDBSCAN(min_cluster_size=3, min_samples=3)`) gives the same labels.
        let python = [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, -1];
        assert_eq!(labels, python);
    }

    #[test]
    fn degenerate_inputs_give_noise() {
        let p = HdbscanParams {
            min_cluster_size: 5,
            min_samples: 5,
        };
        assert!(hdbscan(&Matrix::zeros(0, 2), &p).is_empty());
        assert_eq!(hdbscan(&Matrix::zeros(1, 2), &p), vec![-1]);
        assert_eq!(hdbscan(&Matrix::zeros(4, 2), &p), vec![-1; 4]);
        // Identical points: every distance is 0 (λ = ∞); must not panic.
        let same = hdbscan(&Matrix::zeros(12, 2), &p);
        assert_eq!(same.len(), 12);
    }
}
