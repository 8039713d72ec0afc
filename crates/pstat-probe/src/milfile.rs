//! The generic MIL bag file read by `pstat sawmil` (safetensors):
//!
//! | tensor        | dtype   | shape            | meaning                                        |
//! |---------------|---------|------------------|------------------------------------------------|
//! | `X`           | F32/F16 | `[instances, d]`   | instance rows of all bags, concatenated        |
//! | `bag_offsets` | I64     | `[bags + 1]`       | bag i owns rows `bag_offsets[i]..bag_offsets[i+1]` |
//! | `y`           | I8      | `[bags]`           | ±1 bag labels (needed to fit)                  |
//! | `intra`       | U8      | `[instances]`      | 1 = known positive instance (optional: default the last 2 of each bag) |

use crate::bags::{Bags, KNOWN_POSITIVES, TrainingSet};
use pstat_data::activations::f16_bits_to_f32;
use pstat_data::error::Malformed;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::path::Path;

/// A parsed MIL bag file (see the module docs for its tensors).
#[derive(Debug, Clone)]
pub struct MilFile {
    /// The bags of tensors `X` and `bag_offsets` (`X` read as f32).
    pub bags: Bags,
    /// Tensor `y`, the ±1 bag labels; `None` when the file has no `y` (enough for scoring, not
    /// for fitting).
    pub labels: Option<Vec<i8>>,
    /// Tensor `intra`, the known-positive flag of each instance row; `None` when absent (the last
    /// [`KNOWN_POSITIVES`] of each bag are then the known positives).
    pub intra: Option<Vec<bool>>,
}

impl MilFile {
    /// Read and check a bag file; [`ProbeError::File`](crate::ProbeError::File) naming the path
    /// when it cannot be read or is malformed.
    pub fn read(path: &Path) -> crate::Result<Self> {
        let file_error = |message: String| crate::ProbeError::File {
            path: path.display().to_string(),
            message,
        };
        let bytes = std::fs::read(path).map_err(|e| file_error(e.to_string()))?;
        Self::from_bytes(&bytes).map_err(|Malformed(message)| file_error(message))
    }

    /// Parse and check a bag file's bytes: shapes, dtypes, offsets within `X`, labels ±1,
    /// `intra` 0 or 1, and the bag layout of [`Bags::new`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Malformed> {
        Self::parse(bytes).map_err(Malformed)
    }

    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let x = st.tensor("X").map_err(|e| format!("tensor `X`: {e}"))?;
        let &[instances, d] = x.shape() else {
            return Err(format!(
                "tensor `X` must be 2-D [instances, d], found shape {:?}",
                x.shape()
            ));
        };
        let values: Vec<f32> = match x.dtype() {
            Dtype::F32 => x
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            Dtype::F16 => x
                .data()
                .chunks_exact(2)
                .map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            other => {
                return Err(format!(
                    "tensor `X` has dtype {other:?}, expected F32 or F16"
                ));
            }
        };
        let offsets = st
            .tensor("bag_offsets")
            .map_err(|e| format!("tensor `bag_offsets`: {e}"))?;
        if offsets.dtype() != Dtype::I64 || offsets.shape().len() != 1 || offsets.shape()[0] < 1 {
            return Err(format!(
                "tensor `bag_offsets` must be 1-D I64 [bags + 1], found {:?} {:?}",
                offsets.dtype(),
                offsets.shape()
            ));
        }
        let offsets: Vec<i64> = offsets
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if let Some(i) =
            (0..offsets.len()).find(|&i| offsets[i] < 0 || offsets[i] as usize > instances)
        {
            return Err(format!(
                "bag_offsets[{i}] = {} is outside 0..={instances} (the rows of `X`)",
                offsets[i]
            ));
        }
        let offsets: Vec<usize> = offsets.into_iter().map(|o| o as usize).collect();
        let bags_n = offsets.len() - 1;
        let bags = Bags::new(d, values, offsets).map_err(|e| e.to_string())?;
        let labels = match st.tensor("y") {
            Err(_) => None,
            Ok(t) => {
                if t.dtype() != Dtype::I8 || t.shape() != [bags_n] {
                    return Err(format!(
                        "tensor `y` must be I8 [{bags_n}], found {:?} {:?}",
                        t.dtype(),
                        t.shape()
                    ));
                }
                let y: Vec<i8> = t.data().iter().map(|&b| b as i8).collect();
                if let Some(i) = y.iter().position(|&v| v != 1 && v != -1) {
                    return Err(format!("y[{i}] = {}, expected 1 or -1", y[i]));
                }
                Some(y)
            }
        };
        let intra = match st.tensor("intra") {
            Err(_) => None,
            Ok(t) => {
                if t.dtype() != Dtype::U8 || t.shape() != [instances] {
                    return Err(format!(
                        "tensor `intra` must be U8 [{instances}], found {:?} {:?}",
                        t.dtype(),
                        t.shape()
                    ));
                }
                if let Some(i) = t.data().iter().position(|&v| v > 1) {
                    return Err(format!("intra[{i}] = {}, expected 0 or 1", t.data()[i]));
                }
                Some(t.data().iter().map(|&v| v == 1).collect())
            }
        };
        Ok(MilFile {
            bags,
            labels,
            intra,
        })
    }

    /// A training set, or an error if `y` is missing. Without `intra`, the last
    /// [`KNOWN_POSITIVES`] instances of each bag are the known positives.
    pub fn training_set(self) -> crate::Result<TrainingSet> {
        let labels = self.labels.ok_or_else(|| {
            crate::ProbeError::Invalid("tensor `y` (bag labels) is required to fit".into())
        })?;
        match self.intra {
            Some(intra) => TrainingSet::new(self.bags, labels, intra),
            None => TrainingSet::with_last_known(self.bags, labels, KNOWN_POSITIVES),
        }
    }

    /// The file's bytes (safetensors; `X` as F32, `y` and `intra` only when present).
    pub fn to_bytes(&self) -> Vec<u8> {
        let x: Vec<u8> = self
            .bags
            .values()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let offsets: Vec<u8> = self
            .bags
            .offsets()
            .iter()
            .flat_map(|&o| (o as i64).to_le_bytes())
            .collect();
        let y: Option<Vec<u8>> = self
            .labels
            .as_ref()
            .map(|l| l.iter().map(|&v| v as u8).collect());
        let intra: Option<Vec<u8>> = self
            .intra
            .as_ref()
            .map(|m| m.iter().map(|&k| u8::from(k)).collect());
        let (n, d) = (self.bags.n_instances(), self.bags.dim());
        let mut views = vec![
            (
                "X",
                TensorView::new(Dtype::F32, vec![n, d], &x).expect("X shape"),
            ),
            (
                "bag_offsets",
                TensorView::new(Dtype::I64, vec![self.bags.len() + 1], &offsets)
                    .expect("offsets shape"),
            ),
        ];
        if let Some(y) = &y {
            views.push((
                "y",
                TensorView::new(Dtype::I8, vec![y.len()], y).expect("y shape"),
            ));
        }
        if let Some(intra) = &intra {
            views.push((
                "intra",
                TensorView::new(Dtype::U8, vec![intra.len()], intra).expect("intra shape"),
            ));
        }
        safetensors::serialize(views, None).expect("in-memory safetensors serialization")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_named_errors() {
        let bags = Bags::new(2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![0, 1, 3]).unwrap();
        let file = MilFile {
            bags,
            labels: Some(vec![1, -1]),
            intra: Some(vec![false, true, true]),
        };
        let back = MilFile::from_bytes(&file.to_bytes()).unwrap();
        assert_eq!(back.bags, file.bags);
        assert_eq!(back.labels, file.labels);
        assert_eq!(back.intra, file.intra);

        let bad = MilFile {
            labels: Some(vec![1, 0]),
            ..file.clone()
        };
        assert!(
            MilFile::from_bytes(&bad.to_bytes())
                .unwrap_err()
                .0
                .contains("y[1] = 0")
        );
        let bad = MilFile {
            intra: Some(vec![true]),
            ..file.clone()
        };
        assert!(
            MilFile::from_bytes(&bad.to_bytes())
                .unwrap_err()
                .0
                .contains("tensor `intra` must be U8 [3]")
        );
        let no_labels = MilFile {
            labels: None,
            ..file
        };
        let err = MilFile::from_bytes(&no_labels.to_bytes())
            .unwrap()
            .training_set()
            .unwrap_err();
        assert!(err.to_string().contains("tensor `y`"));
    }
}
