//! PCA by eigendecomposition of the smaller of the covariance (d×d) and Gram (n×n) matrices.

use crate::eigen::top_eigenpairs;
use crate::matrix::{Matrix, dot};

/// Projects the centred rows of `x` onto their top `k` principal components (k is clamped to
/// min(n, d)). Component signs are fixed so that each score column's largest-magnitude entry is
/// positive (the convention of scikit-learn's `svd_flip`), making the output deterministic.
pub fn pca_scores(x: &Matrix, k: usize, seed: u64) -> Matrix {
    let (n, d) = (x.rows(), x.cols());
    let k = k.min(n).min(d);
    let mut centred = x.clone();
    for j in 0..d {
        let mean = (0..n).map(|i| x.get(i, j)).sum::<f64>() / n.max(1) as f64;
        for i in 0..n {
            centred.set(i, j, x.get(i, j) - mean);
        }
    }
    let mut scores = Matrix::zeros(n, k);
    if k == 0 {
        return scores;
    }
    if d <= n {
        // Covariance route: eigenvectors of XᵀX are the loadings; scores = X·V.
        let mut cov = Matrix::zeros(d, d);
        for row in 0..n {
            let r = centred.row(row);
            for a in 0..d {
                let ra = r[a];
                if ra == 0.0 {
                    continue;
                }
                for (c, &rb) in cov.row_mut(a)[a..].iter_mut().zip(&r[a..]) {
                    *c += ra * rb;
                }
            }
        }
        for a in 0..d {
            for b in 0..a {
                cov.set(a, b, cov.get(b, a));
            }
        }
        let eig = top_eigenpairs(&cov, k, seed);
        for c in 0..k {
            let v: Vec<f64> = (0..d).map(|r| eig.vectors.get(r, c)).collect();
            for i in 0..n {
                scores.set(i, c, dot(centred.row(i), &v));
            }
        }
    } else {
        // Gram route (n < d): XXᵀ = U Λ Uᵀ and the scores are U·√Λ.
        let mut gram = Matrix::zeros(n, n);
        for i in 0..n {
            for j in i..n {
                let v = dot(centred.row(i), centred.row(j));
                gram.set(i, j, v);
                gram.set(j, i, v);
            }
        }
        let eig = top_eigenpairs(&gram, k, seed);
        for c in 0..k {
            let root = eig.values[c].max(0.0).sqrt();
            for i in 0..n {
                scores.set(i, c, eig.vectors.get(i, c) * root);
            }
        }
    }
    for c in 0..k {
        let (mut best, mut best_abs) = (0.0_f64, -1.0_f64);
        for i in 0..n {
            let v = scores.get(i, c);
            if v.abs() > best_abs {
                best_abs = v.abs();
                best = v;
            }
        }
        if best < 0.0 {
            for i in 0..n {
                scores.set(i, c, -scores.get(i, c));
            }
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on a line y = 2x (plus a constant offset) have one component with all the variance.
    #[test]
    fn recovers_dominant_direction_both_routes() {
        for d in [2usize, 30] {
            let n = 10;
            let mut data = Vec::new();
            for i in 0..n {
                let t = i as f64 - 4.5;
                let mut row = vec![1.0; d];
                row[0] = t + 3.0;
                row[1] = 2.0 * t;
                data.extend(row);
            }
            let x = Matrix::new(n, d, data).unwrap();
            let s = pca_scores(&x, 2, 0);
            for i in 0..n {
                let t = i as f64 - 4.5;
                assert!(
                    (s.get(i, 0).abs() - t.abs() * 5f64.sqrt()).abs() < 1e-8,
                    "d={d}"
                );
                assert!(s.get(i, 1).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        assert_eq!(pca_scores(&Matrix::zeros(0, 5), 3, 0).rows(), 0);
        let one = pca_scores(&Matrix::new(1, 3, vec![1.0, 2.0, 3.0]).unwrap(), 3, 0);
        assert_eq!((one.rows(), one.cols()), (1, 1));
        let same = pca_scores(&Matrix::new(3, 2, vec![1.0; 6]).unwrap(), 2, 0);
        assert!((0..3).all(|i| same.get(i, 0) == 0.0));
    }
}
