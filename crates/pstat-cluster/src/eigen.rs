//! Symmetric eigendecomposition: cyclic Jacobi for small matrices and seeded subspace iteration
//! (with Rayleigh–Ritz) for the top eigenpairs of a larger one. Used by PCA; written here instead
//! of pulling in a LAPACK-free linear-algebra crate because only the top few eigenpairs are needed.

use crate::matrix::{Matrix, dot};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Eigenvalues (descending) and eigenvectors (columns of an m×p matrix, same order).
pub struct EigenPairs {
    pub values: Vec<f64>,
    pub vectors: Matrix,
}

/// All eigenpairs of a small symmetric matrix by cyclic Jacobi rotations.
pub fn jacobi(a: &Matrix) -> EigenPairs {
    let n = a.rows();
    let mut a = a.clone();
    let mut v = Matrix::zeros(n, n);
    for i in 0..n {
        v.set(i, i, 1.0);
    }
    let scale: f64 = (0..n)
        .map(|i| a.get(i, i).abs())
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a.get(i, j).powi(2))
            .sum();
        if off.sqrt() <= 1e-14 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a.get(p, q);
                if apq.abs() <= f64::MIN_POSITIVE {
                    continue;
                }
                let theta = (a.get(q, q) - a.get(p, p)) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a.get(k, p);
                    let akq = a.get(k, q);
                    a.set(k, p, c * akp - s * akq);
                    a.set(k, q, s * akp + c * akq);
                }
                for k in 0..n {
                    let apk = a.get(p, k);
                    let aqk = a.get(q, k);
                    a.set(p, k, c * apk - s * aqk);
                    a.set(q, k, s * apk + c * aqk);
                }
                for k in 0..n {
                    let vkp = v.get(k, p);
                    let vkq = v.get(k, q);
                    v.set(k, p, c * vkp - s * vkq);
                    v.set(k, q, s * vkp + c * vkq);
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| a.get(j, j).total_cmp(&a.get(i, i)));
    let mut vectors = Matrix::zeros(n, n);
    for (new, &old) in order.iter().enumerate() {
        for k in 0..n {
            vectors.set(k, new, v.get(k, old));
        }
    }
    EigenPairs {
        values: order.iter().map(|&i| a.get(i, i)).collect(),
        vectors,
    }
}

/// The `k` largest eigenpairs of a symmetric positive semi-definite matrix `s` (m×m).
pub fn top_eigenpairs(s: &Matrix, k: usize, seed: u64) -> EigenPairs {
    let m = s.rows();
    let k = k.min(m);
    if m <= 64 {
        let all = jacobi(s);
        return take_columns(all, k);
    }
    // Oversampling makes convergence depend on λ_{p+1}/λ_k rather than λ_{k+1}/λ_k.
    let p = (2 * k).max(k + 10).min(m);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // q holds p basis vectors of length m, stored as rows for contiguous access.
    let mut q = Matrix::zeros(p, m);
    for i in 0..p {
        for j in 0..m {
            q.set(i, j, StandardNormal.sample(&mut rng));
        }
    }
    orthonormalize_rows(&mut q);
    let mut previous: Vec<f64> = vec![f64::INFINITY; k];
    let mut ritz = EigenPairs {
        values: Vec::new(),
        vectors: Matrix::zeros(p, p),
    };
    for _iter in 0..500 {
        let sq = multiply_rows(s, &q);
        // Rayleigh–Ritz on the current subspace: T = Q S Qᵀ (p×p).
        let mut t = Matrix::zeros(p, p);
        for i in 0..p {
            for j in 0..p {
                t.set(i, j, dot(q.row(i), sq.row(j)));
            }
        }
        ritz = jacobi(&t);
        q = rotate_rows(&ritz.vectors, &sq);
        orthonormalize_rows(&mut q);
        let scale = ritz.values[0].abs().max(f64::MIN_POSITIVE);
        let converged = ritz
            .values
            .iter()
            .zip(&previous)
            .take(k)
            .all(|(a, b)| (a - b).abs() <= 1e-12 * scale);
        previous = ritz.values[..k].to_vec();
        if converged {
            break;
        }
    }
    // After the last rotation the rows of q are the Ritz vectors in descending order.
    let mut vectors = Matrix::zeros(m, k);
    for c in 0..k {
        for r in 0..m {
            vectors.set(r, c, q.get(c, r));
        }
    }
    EigenPairs {
        values: ritz.values[..k].to_vec(),
        vectors,
    }
}

fn take_columns(all: EigenPairs, k: usize) -> EigenPairs {
    let m = all.vectors.rows();
    let mut vectors = Matrix::zeros(m, k);
    for c in 0..k {
        for r in 0..m {
            vectors.set(r, c, all.vectors.get(r, c));
        }
    }
    EigenPairs {
        values: all.values[..k].to_vec(),
        vectors,
    }
}

/// Rows of the result are S·q_i for each row q_i of `q` (S symmetric).
fn multiply_rows(s: &Matrix, q: &Matrix) -> Matrix {
    let mut out = Matrix::zeros(q.rows(), s.rows());
    for i in 0..q.rows() {
        for r in 0..s.rows() {
            out.set(i, r, dot(s.row(r), q.row(i)));
        }
    }
    out
}

/// Rows of the result are Σ_j w[j][c] · rows_j: the Ritz rotation of the basis.
fn rotate_rows(w: &Matrix, rows: &Matrix) -> Matrix {
    let mut out = Matrix::zeros(rows.rows(), rows.cols());
    for c in 0..w.cols() {
        for j in 0..w.rows() {
            let f = w.get(j, c);
            let src = rows.row(j).to_vec();
            for (o, v) in out.row_mut(c).iter_mut().zip(&src) {
                *o += f * v;
            }
        }
    }
    out
}

/// Modified Gram–Schmidt (twice, for stability); a numerically null row becomes zero.
fn orthonormalize_rows(q: &mut Matrix) {
    for _pass in 0..2 {
        for i in 0..q.rows() {
            for j in 0..i {
                let proj = dot(q.row(i), q.row(j));
                let prev = q.row(j).to_vec();
                for (a, b) in q.row_mut(i).iter_mut().zip(&prev) {
                    *a -= proj * b;
                }
            }
            let norm = dot(q.row(i), q.row(i)).sqrt();
            let row = q.row_mut(i);
            if norm > 1e-300 {
                row.iter_mut().for_each(|v| *v /= norm);
            } else {
                row.iter_mut().for_each(|v| *v = 0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_diagonalizes_small_matrix() {
        let a = Matrix::new(3, 3, vec![4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 1.0]).unwrap();
        let e = jacobi(&a);
        for c in 0..3 {
            let v: Vec<f64> = (0..3).map(|r| e.vectors.get(r, c)).collect();
            for r in 0..3 {
                let av = dot(a.row(r), &v);
                assert!((av - e.values[c] * v[r]).abs() < 1e-10);
            }
        }
        assert!(e.values[0] >= e.values[1] && e.values[1] >= e.values[2]);
    }

    #[test]
    fn subspace_iteration_matches_jacobi() {
        let m = 80;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let b: Vec<f64> = (0..m * m)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect();
        let mut s = Matrix::zeros(m, m);
        for i in 0..m {
            for j in 0..m {
                let v: f64 = (0..m).map(|k| b[i * m + k] * b[j * m + k]).sum();
                s.set(i, j, v);
            }
        }
        let exact = jacobi(&s);
        let top = top_eigenpairs(&s, 5, 1);
        for c in 0..5 {
            assert!((exact.values[c] - top.values[c]).abs() < 1e-8 * exact.values[0]);
        }
    }
}
