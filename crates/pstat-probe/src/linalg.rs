//! The few dense kernels the probes need. Reductions keep eight independent partial sums so
//! the compiler can vectorise them without reassociating floating-point adds.

const LANES: usize = 8;

/// A storage type the kernels read; the arithmetic is always f64.
pub trait Real: Copy {
    /// The value as f64.
    fn widen(self) -> f64;
}

impl Real for f64 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
}

impl Real for f32 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self as f64
    }
}

/// Σ a_i b_i.
pub fn dot<T: Real>(a: &[T], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        return unsafe { dot_avx2(a, b) };
    }
    dot_body(a, b)
}

/// y += s·x.
pub fn axpy<T: Real>(s: f64, x: &[T], y: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        return unsafe { axpy_avx2(s, x, y) };
    }
    axpy_body(s, x, y)
}

#[inline(always)]
fn dot_body<T: Real>(a: &[T], b: &[f64]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f64; LANES];
    let (a8, a_rest) = a.split_at(a.len() - a.len() % LANES);
    let (b8, b_rest) = b.split_at(a8.len());
    for (ca, cb) in a8.chunks_exact(LANES).zip(b8.chunks_exact(LANES)) {
        for k in 0..LANES {
            acc[k] += ca[k].widen() * cb[k];
        }
    }
    let tail: f64 = a_rest.iter().zip(b_rest).map(|(x, y)| x.widen() * y).sum();
    acc.iter().sum::<f64>() + tail
}

#[inline(always)]
fn axpy_body<T: Real>(s: f64, x: &[T], y: &mut [f64]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += s * xi.widen();
    }
}

// The QP's coordinate steps are these two kernels over 576-wide rows; the portable build
// targets SSE2 (two f64 lanes), so an AVX2 copy (four lanes) is picked at run time. Rust never
// fuses a multiply and an add on its own, so both copies give the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_avx2<T: Real>(a: &[T], b: &[f64]) -> f64 {
    dot_body(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn axpy_avx2<T: Real>(s: f64, x: &[T], y: &mut [f64]) {
    axpy_body(s, x, y)
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVX2.get_or_init(|| is_x86_feature_detected!("avx2"))
}

/// Euclidean norm ‖a‖₂.
pub fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Lower-triangular Cholesky factor L (row-major, n×n) of a symmetric positive-definite
/// matrix, or `None` when a pivot is not positive.
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s = a[i * n + j] - dot(&l[i * n..i * n + j], &l[j * n..j * n + j]);
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Solve (L Lᵀ) x = b for the Cholesky factor `l` from [`cholesky`].
pub fn cholesky_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut z = b.to_vec();
    for i in 0..n {
        z[i] = (z[i] - dot(&l[i * n..i * n + i], &z[..i])) / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = z[i];
        for k in i + 1..n {
            s -= l[k * n + i] * z[k];
        }
        z[i] = s / l[i * n + i];
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_tails() {
        let a: Vec<f64> = (0..19).map(|i| i as f64).collect();
        let expect: f64 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), expect);
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        assert_eq!(dot(&a32, &a), expect);
        assert_eq!(dot_body(&a32, &a), dot(&a32, &a), "dispatch keeps the bits");
    }

    #[test]
    fn cholesky_solves_spd_system() {
        let a = [4.0, 2.0, 0.6, 2.0, 5.0, 1.0, 0.6, 1.0, 3.0];
        let l = cholesky(&a, 3).unwrap();
        let x = cholesky_solve(&l, 3, &[1.0, 2.0, 3.0]);
        for i in 0..3 {
            let row: f64 = (0..3).map(|j| a[i * 3 + j] * x[j]).sum();
            assert!((row - [1.0, 2.0, 3.0][i]).abs() < 1e-12);
        }
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
    }
}
