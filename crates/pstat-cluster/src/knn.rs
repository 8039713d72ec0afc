//! Exact k-nearest neighbours by brute force: the clustered sets are a few thousand points in
//! at most a few dozen PCA dimensions, where an index would not pay for itself.

use crate::matrix::{Matrix, squared_euclidean};

/// Neighbour indices and Euclidean distances per point, nearest first, the point itself first
/// (distance 0), as umap-learn's exact path returns them. `k` is clamped to the number of points.
pub struct Neighbours {
    pub indices: Vec<Vec<usize>>,
    pub distances: Vec<Vec<f64>>,
}

pub fn exact_knn(x: &Matrix, k: usize) -> Neighbours {
    let n = x.rows();
    let k = k.min(n);
    let mut indices = Vec::with_capacity(n);
    let mut distances = Vec::with_capacity(n);
    for i in 0..n {
        let mut all: Vec<(f64, usize)> = (0..n)
            .map(|j| {
                (
                    if i == j {
                        0.0
                    } else {
                        squared_euclidean(x.row(i), x.row(j))
                    },
                    j,
                )
            })
            .collect();
        // Self first on ties at distance 0 (duplicates), then by index for determinism.
        let key = |&(d, j): &(f64, usize)| (d, j != i, j);
        if k < n {
            all.select_nth_unstable_by(k, |a, b| key(a).partial_cmp(&key(b)).expect("finite"));
            all.truncate(k);
        }
        all.sort_by(|a, b| key(a).partial_cmp(&key(b)).expect("finite"));
        indices.push(all.iter().map(|&(_, j)| j).collect());
        distances.push(all.iter().map(|&(d, _)| d.sqrt()).collect());
    }
    Neighbours { indices, distances }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_first_then_nearest() {
        let x = Matrix::new(4, 1, vec![0.0, 1.0, 3.0, 0.0]).unwrap();
        let nn = exact_knn(&x, 3);
        assert_eq!(nn.indices[0], vec![0, 3, 1]);
        assert_eq!(nn.indices[3], vec![3, 0, 1]);
        assert_eq!(nn.distances[2], vec![0.0, 2.0, 3.0]);
        assert_eq!(exact_knn(&x, 10).indices[0].len(), 4);
    }
}
