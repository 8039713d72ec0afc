//! Per-feature standardization, as sklearn's StandardScaler: population std (ddof 0), and a
//! zero-variance feature keeps scale 1 so it maps to 0 instead of NaN.

/// x ↦ (x − mean) / scale, feature-wise.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    /// Per-feature mean subtracted first (length = feature dimension).
    pub mean: Vec<f64>,
    /// Per-feature divisor: the population std, or 1 for a zero-variance feature (never 0).
    pub scale: Vec<f64>,
}

/// Per-feature mean and population std of row-major rows, two passes in f64.
pub fn feature_moments<'a>(
    rows: impl Iterator<Item = &'a [f32]> + Clone,
    dim: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut mean = vec![0.0f64; dim];
    let mut n = 0usize;
    for row in rows.clone() {
        for r in row.chunks_exact(dim) {
            n += 1;
            mean.iter_mut().zip(r).for_each(|(m, &x)| *m += x as f64);
        }
    }
    let n = n.max(1) as f64;
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0.0f64; dim];
    for row in rows {
        for r in row.chunks_exact(dim) {
            for ((v, &x), m) in var.iter_mut().zip(r).zip(&mean) {
                *v += (x as f64 - m).powi(2);
            }
        }
    }
    (mean, var.into_iter().map(|v| (v / n).sqrt()).collect())
}

impl Standardizer {
    /// Fit on `rows` (row-major [n, dim], n > 0).
    pub fn fit<'a>(rows: impl Iterator<Item = &'a [f32]> + Clone, dim: usize) -> Standardizer {
        let (mean, std) = feature_moments(rows, dim);
        let scale = std
            .into_iter()
            .map(|s| if s == 0.0 { 1.0 } else { s })
            .collect();
        Standardizer { mean, scale }
    }

    /// Feature dimension (length of `mean` and `scale`).
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Standardize row-major rows into f64.
    pub fn transform(&self, rows: &[f32]) -> Vec<f64> {
        let d = self.dim();
        let mut out = Vec::with_capacity(rows.len());
        for r in rows.chunks_exact(d) {
            out.extend(
                r.iter()
                    .zip(&self.mean)
                    .zip(&self.scale)
                    .map(|((&x, m), s)| (x as f64 - m) / s),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn population_std_and_constant_feature() {
        let rows = [1.0f32, 5.0, 3.0, 5.0];
        let s = Standardizer::fit(std::iter::once(&rows[..]), 2);
        assert_eq!(s.mean, vec![2.0, 5.0]);
        assert_eq!(s.scale, vec![1.0, 1.0]);
        let rows = [0.0f32, 4.0];
        let s = Standardizer::fit(std::iter::once(&rows[..]), 1);
        assert_eq!(s.scale, vec![2.0]);
        assert_eq!(s.transform(&[4.0]), vec![1.0]);
    }
}
