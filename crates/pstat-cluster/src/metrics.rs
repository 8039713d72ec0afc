//! Cluster-quality metrics: silhouette (for Algorithm 1) and the adjusted Rand index (for the
//! validation against ground truth).

use crate::matrix::{Matrix, squared_euclidean};
use std::collections::BTreeMap;

/// Mean silhouette (Rousseeuw 1987, Euclidean) over the non-noise points (label ≥ 0); noise is
/// excluded entirely, both as points and as a cluster. `None` where it is undefined: fewer than 2
/// clusters, or as many clusters as clustered points (scikit-learn's rule). A point alone in its
/// cluster scores 0.
pub fn silhouette(x: &Matrix, labels: &[i32]) -> Option<f64> {
    let members: Vec<usize> = (0..labels.len()).filter(|&i| labels[i] >= 0).collect();
    let mut ids: Vec<i32> = members.iter().map(|&i| labels[i]).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < 2 || ids.len() >= members.len() {
        return None;
    }
    let slot = |label: i32| ids.binary_search(&label).expect("label collected above");
    let mut sizes = vec![0usize; ids.len()];
    for &i in &members {
        sizes[slot(labels[i])] += 1;
    }
    let mut total = 0.0;
    for &i in &members {
        let mut sums = vec![0.0; ids.len()];
        for &j in &members {
            if i != j {
                sums[slot(labels[j])] += squared_euclidean(x.row(i), x.row(j)).sqrt();
            }
        }
        let own = slot(labels[i]);
        if sizes[own] == 1 {
            continue;
        }
        let a = sums[own] / (sizes[own] - 1) as f64;
        let b = (0..ids.len())
            .filter(|&c| c != own)
            .map(|c| sums[c] / sizes[c] as f64)
            .fold(f64::INFINITY, f64::min);
        let denom = a.max(b);
        if denom > 0.0 {
            total += (b - a) / denom;
        }
    }
    Some(total / members.len() as f64)
}

/// Adjusted Rand index (Hubert & Arabie 1985) between two labelings; noise (−1) counts as one
/// label, as scikit-learn's `adjusted_rand_score` treats it. Identical trivial labelings give 1.
pub fn adjusted_rand_index(a: &[i32], b: &[i32]) -> f64 {
    assert_eq!(a.len(), b.len(), "labelings must have equal length");
    let n = a.len() as f64;
    let mut table: BTreeMap<(i32, i32), f64> = BTreeMap::new();
    let mut rows: BTreeMap<i32, f64> = BTreeMap::new();
    let mut cols: BTreeMap<i32, f64> = BTreeMap::new();
    for (&x, &y) in a.iter().zip(b) {
        *table.entry((x, y)).or_default() += 1.0;
        *rows.entry(x).or_default() += 1.0;
        *cols.entry(y).or_default() += 1.0;
    }
    let pairs = |c: f64| c * (c - 1.0) / 2.0;
    let index: f64 = table.values().copied().map(pairs).sum();
    let row_sum: f64 = rows.values().copied().map(pairs).sum();
    let col_sum: f64 = cols.values().copied().map(pairs).sum();
    let expected = if n > 1.0 {
        row_sum * col_sum / pairs(n)
    } else {
        0.0
    };
    let max = (row_sum + col_sum) / 2.0;
    if (max - expected).abs() < f64::EPSILON {
        1.0
    } else {
        (index - expected) / (max - expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silhouette_matches_hand_computation() {
        // Clusters {0, 1} and {4}; noise at 100 is ignored.
        let x = Matrix::new(4, 1, vec![0.0, 1.0, 4.0, 100.0]).unwrap();
        let s = silhouette(&x, &[0, 0, 1, -1]).unwrap();
        // Point 0: a=1, b=4 → 0.75; point 1: a=1, b=3 → 2/3; point 2 alone → 0.
        assert!((s - (0.75 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert_eq!(silhouette(&x, &[0, 0, 0, -1]), None);
        assert_eq!(silhouette(&x, &[-1, -1, -1, -1]), None);
        assert_eq!(silhouette(&x, &[0, 1, 2, 3]), None);
    }

    #[test]
    fn ari_reference_values() {
        assert_eq!(adjusted_rand_index(&[0, 0, 1, 1], &[5, 5, 7, 7]), 1.0);
        // scikit-learn: adjusted_rand_score([0,0,1,1],[0,0,1,2]) = 0.5714285714285715
        assert!(
            (adjusted_rand_index(&[0, 0, 1, 1], &[0, 0, 1, 2]) - 0.5714285714285715).abs() < 1e-12
        );
        // adjusted_rand_score([0,0,0,1,1,1],[0,1,2,0,1,2]) = -0.36363636363636365
        assert!(
            (adjusted_rand_index(&[0, 0, 0, 1, 1, 1], &[0, 1, 2, 0, 1, 2]) + 0.36363636363636365)
                .abs()
                < 1e-12
        );
        assert_eq!(adjusted_rand_index(&[], &[]), 1.0);
    }
}
