//! A dense row-major f64 matrix: the only container this crate needs (points × features).

use crate::ClusterError;

/// A dense row-major f64 matrix, rows × cols; [`Matrix::new`] refuses non-finite values.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// Builds a matrix from row-major values; every value must be finite.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Self, ClusterError> {
        if data.len() != rows * cols {
            return Err(ClusterError::Shape(format!(
                "{rows}x{cols} matrix needs {} values, got {}",
                rows * cols,
                data.len()
            )));
        }
        if let Some(pos) = data.iter().position(|v| !v.is_finite()) {
            return Err(ClusterError::NonFinite {
                row: pos / cols.max(1),
                col: pos % cols.max(1),
                value: data[pos],
            });
        }
        Ok(Matrix { rows, cols, data })
    }

    /// Converts f32 row-major values (the activation dtype) to a checked f64 matrix.
    pub fn from_f32(rows: usize, cols: usize, data: &[f32]) -> Result<Self, ClusterError> {
        Self::new(rows, cols, data.iter().map(|&v| f64::from(v)).collect())
    }

    /// A rows × cols matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// Number of rows (points).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i` (panics when out of range).
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i`, writable (panics when out of range).
    pub fn row_mut(&mut self, i: usize) -> &mut [f64] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The value at row `i`, column `j`.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// Sets the value at row `i`, column `j` (no finiteness check).
    pub fn set(&mut self, i: usize, j: usize, v: f64) {
        self.data[i * self.cols + j] = v;
    }

    /// Row-major copy as f32, e.g. for safetensors output.
    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|&v| v as f32).collect()
    }
}

/// Σ (aᵢ − bᵢ)² over the shorter length of the two.
pub fn squared_euclidean(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Σ aᵢ·bᵢ over the shorter length of the two.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_wrong_length_and_non_finite() {
        assert!(Matrix::new(2, 2, vec![0.0; 3]).is_err());
        let err = Matrix::new(2, 2, vec![0.0, 1.0, f64::NAN, 0.0]).unwrap_err();
        assert!(matches!(
            err,
            ClusterError::NonFinite { row: 1, col: 0, .. }
        ));
    }
}
