//! One request's file of vLLM's hidden-state extraction (`extract_hidden_states` with
//! `ExampleHiddenStatesConnector`): a safetensors file `<request id>.safetensors` holding
//! `token_ids` (I64, `[seq]`: the prompt token ids) and `hidden_states` (BF16/F16/F32,
//! `[seq, n_layers, hidden]`: the connector reads each token's slot of its cache, which holds
//! the layers given to vLLM as `eagle_aux_hidden_state_layer_ids`, in that order). That is the
//! layout vLLM 0.32.0 writes (checked against files it wrote, crates/pstat-study/tests/vllm_engine.rs).

use crate::activations::f16_bits_to_f32;
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// A request's prompt token ids and its hidden states, layer by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmRequest {
    /// The prompt's token ids, one per row (`seq` of them).
    pub token_ids: Vec<u32>,
    /// Width of each hidden-state row.
    pub hidden: usize,
    /// Per layer (in the file's order), the `[seq, hidden]` rows, row-major.
    pub layers: Vec<Vec<f32>>,
}

impl VllmRequest {
    /// Reads and checks one request file; an error names the tensor or field.
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        Self::from_bytes(&bytes)
    }

    /// Parses and checks a request file's bytes; an error names the tensor or field.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let st =
            SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
        let ids = st
            .tensor("token_ids")
            .map_err(|_| "no `token_ids` tensor".to_string())?;
        let token_ids: Vec<u32> = match ids.dtype() {
            Dtype::I64 => ids
                .data()
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                .map(|v| u32::try_from(v).map_err(|_| format!("`token_ids` holds {v}")))
                .collect::<Result<_, _>>()?,
            Dtype::I32 | Dtype::U32 => ids
                .data()
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
            other => {
                return Err(format!(
                    "`token_ids` is {other:?}; token ids are read as I64, I32 or U32"
                ));
            }
        };
        let hs = st
            .tensor("hidden_states")
            .map_err(|_| "no `hidden_states` tensor".to_string())?;
        let values: Vec<f32> = match hs.dtype() {
            Dtype::BF16 => hs
                .data()
                .chunks_exact(2)
                .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
                .collect(),
            Dtype::F16 => hs
                .data()
                .chunks_exact(2)
                .map(|b| f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            Dtype::F32 => hs
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
            other => {
                return Err(format!(
                    "`hidden_states` is {other:?}, not BF16, F16 or F32"
                ));
            }
        };
        let seq = token_ids.len();
        let (n_layers, hidden) = match *hs.shape() {
            [s, l, h] if s == seq => (l, h),
            ref shape => {
                return Err(format!(
                    "`hidden_states` has shape {shape:?}; expected [{seq}, n_layers, hidden] for {seq} token ids"
                ));
            }
        };
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("`hidden_states` value {bad} is not finite"));
        }
        let layers = (0..n_layers)
            .map(|l| {
                (0..seq)
                    .flat_map(|t| {
                        let at = (t * n_layers + l) * hidden;
                        values[at..at + hidden].iter().copied()
                    })
                    .collect()
            })
            .collect();
        Ok(VllmRequest {
            token_ids,
            hidden,
            layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    fn file(ids: &[i64], dtype: Dtype, shape: Vec<usize>, values: &[f32]) -> Vec<u8> {
        let id_bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        let hs: Vec<u8> = match dtype {
            Dtype::BF16 => values
                .iter()
                .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
                .collect(),
            _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let tensors = [
            (
                "token_ids",
                TensorView::new(Dtype::I64, vec![ids.len()], &id_bytes).unwrap(),
            ),
            ("hidden_states", TensorView::new(dtype, shape, &hs).unwrap()),
        ];
        safetensors::serialize(tensors, None).unwrap()
    }

    #[test]
    fn token_major_files_are_read_in_bf16_and_f32_and_other_shapes_refused() {
        // 3 tokens and 3 layers (so only the order tells them apart), hidden 2; values exact in
        // bf16. Layer l's rows are l*6 .. l*6+6 (times 0.5).
        let token_major: Vec<f32> = (0..3)
            .flat_map(|t| {
                (0..3).flat_map(move |l| (0..2).map(move |h| (l * 6 + t * 2 + h) as f32 * 0.5))
            })
            .collect();
        let a =
            VllmRequest::from_bytes(&file(&[1, 5, 9], Dtype::BF16, vec![3, 3, 2], &token_major))
                .unwrap();
        assert_eq!(a.token_ids, vec![1, 5, 9]);
        assert_eq!(a.hidden, 2);
        for (l, rows) in a.layers.iter().enumerate() {
            let expected: Vec<f32> = (0..6).map(|i| (l * 6 + i) as f32 * 0.5).collect();
            assert_eq!(rows, &expected, "layer {l}");
        }
        let b = VllmRequest::from_bytes(&file(&[1, 5, 9], Dtype::F32, vec![3, 3, 2], &token_major))
            .unwrap();
        assert_eq!(a, b);
        let err = VllmRequest::from_bytes(&file(&[1, 5], Dtype::F32, vec![3, 2, 3], &token_major))
            .unwrap_err();
        assert!(err.contains("expected [2, n_layers, hidden]"), "{err}");
    }
}
