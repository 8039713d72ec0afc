//! Reading the point matrix (tensor `X`, [points, dims], f32) and optional integer labels from a
//! safetensors file.

use crate::ClusterError;
use crate::matrix::Matrix;
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

fn read_file(path: &Path) -> Result<Vec<u8>, ClusterError> {
    std::fs::read(path).map_err(|e| ClusterError::Input(format!("{}: {e}", path.display())))
}

/// Loads the 2-D f32 tensor `name` as a matrix.
pub fn load_matrix(path: &Path, name: &str) -> Result<Matrix, ClusterError> {
    let bytes = read_file(path)?;
    let at = |msg: String| ClusterError::Input(format!("{}: {msg}", path.display()));
    let st = SafeTensors::deserialize(&bytes).map_err(|e| at(e.to_string()))?;
    let view = st
        .tensor(name)
        .map_err(|e| at(format!("tensor `{name}`: {e}")))?;
    if view.dtype() != Dtype::F32 || view.shape().len() != 2 {
        return Err(at(format!(
            "tensor `{name}` must be a 2-D f32 [points, dims] tensor, found {:?} {:?}",
            view.dtype(),
            view.shape()
        )));
    }
    let values: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Matrix::from_f32(view.shape()[0], view.shape()[1], &values)
        .map_err(|e| at(format!("tensor `{name}`: {e}")))
}

/// Loads the 1-D i32 or i64 tensor `name` (e.g. ground-truth labels).
pub fn load_labels(path: &Path, name: &str) -> Result<Vec<i32>, ClusterError> {
    let bytes = read_file(path)?;
    let at = |msg: String| ClusterError::Input(format!("{}: {msg}", path.display()));
    let st = SafeTensors::deserialize(&bytes).map_err(|e| at(e.to_string()))?;
    let view = st
        .tensor(name)
        .map_err(|e| at(format!("tensor `{name}`: {e}")))?;
    match view.dtype() {
        Dtype::I32 => Ok(view
            .data()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        Dtype::I64 => view
            .data()
            .chunks_exact(8)
            .map(|c| {
                let v = i64::from_le_bytes(c.try_into().expect("chunk of 8"));
                i32::try_from(v)
                    .map_err(|_| at(format!("tensor `{name}`: label {v} out of i32 range")))
            })
            .collect(),
        other => Err(at(format!(
            "tensor `{name}` must be i32 or i64, found {other:?}"
        ))),
    }
}
