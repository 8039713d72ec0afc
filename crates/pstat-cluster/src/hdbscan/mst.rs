//! Mutual-reachability minimum spanning tree (Prim, O(n²)) and its single-linkage merge list.

use crate::knn::exact_knn;
use crate::matrix::{Matrix, squared_euclidean};

/// One single-linkage merge: clusters `left` and `right` (ids < n are points, id n+m is the m-th
/// merge) join at `distance` into a cluster of `size` points.
#[derive(Debug, Clone, Copy)]
pub struct Merge {
    pub left: usize,
    pub right: usize,
    pub distance: f64,
    pub size: usize,
}

/// Core distance: Euclidean distance to the `min_samples`-th nearest other point (the Python
/// `hdbscan` convention; scikit-learn's HDBSCAN counts the point itself instead).
fn core_distances(x: &Matrix, min_samples: usize) -> Vec<f64> {
    let k = min_samples.min(x.rows().saturating_sub(1));
    let nn = exact_knn(x, k + 1);
    nn.distances
        .iter()
        .map(|d| d.last().copied().unwrap_or(0.0))
        .collect()
}

/// Merges of the mutual-reachability MST in increasing distance (requires n ≥ 2).
pub fn single_linkage(x: &Matrix, min_samples: usize) -> Vec<Merge> {
    let n = x.rows();
    let core = core_distances(x, min_samples);
    let mut in_tree = vec![false; n];
    let mut best = vec![f64::INFINITY; n];
    let mut best_from = vec![0usize; n];
    let mut edges: Vec<(usize, usize, f64)> = Vec::with_capacity(n.saturating_sub(1));
    let mut current = 0usize;
    in_tree[0] = true;
    for _ in 1..n {
        for j in 0..n {
            if in_tree[j] {
                continue;
            }
            let d = squared_euclidean(x.row(current), x.row(j)).sqrt();
            let reach = d.max(core[current]).max(core[j]);
            if reach < best[j] {
                best[j] = reach;
                best_from[j] = current;
            }
        }
        let next = (0..n)
            .filter(|&j| !in_tree[j])
            .min_by(|&a, &b| best[a].total_cmp(&best[b]).then(a.cmp(&b)))
            .expect("a point remains outside the tree");
        edges.push((best_from[next], next, best[next]));
        in_tree[next] = true;
        current = next;
    }
    edges.sort_by(|a, b| a.2.total_cmp(&b.2));
    // Union-find over points; each root remembers the id of the cluster it currently stands for.
    let mut parent: Vec<usize> = (0..n).collect();
    let mut cluster_of: Vec<usize> = (0..n).collect();
    let mut size = vec![1usize; n];
    let find = |parent: &mut Vec<usize>, mut a: usize| {
        while parent[a] != a {
            parent[a] = parent[parent[a]];
            a = parent[a];
        }
        a
    };
    let mut merges = Vec::with_capacity(edges.len());
    for (m, &(a, b, distance)) in edges.iter().enumerate() {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        merges.push(Merge {
            left: cluster_of[ra],
            right: cluster_of[rb],
            distance,
            size: size[ra] + size[rb],
        });
        parent[rb] = ra;
        size[ra] += size[rb];
        cluster_of[ra] = n + m;
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_distance_excludes_self() {
        let x = Matrix::new(4, 1, vec![0.0, 1.0, 3.0, 6.0]).unwrap();
        assert_eq!(core_distances(&x, 1), vec![1.0, 1.0, 2.0, 3.0]);
        assert_eq!(core_distances(&x, 2), vec![3.0, 2.0, 3.0, 5.0]);
        assert_eq!(core_distances(&x, 99), vec![6.0, 5.0, 3.0, 6.0]);
        let merges = single_linkage(&x, 1);
        assert_eq!(merges.len(), 3);
        assert_eq!(merges.last().unwrap().size, 4);
        assert_eq!(
            merges.iter().map(|m| m.distance).collect::<Vec<_>>(),
            vec![1.0, 2.0, 3.0]
        );
    }
}
