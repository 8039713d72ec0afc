//! Causal self-attention over packed sequences, optionally after a shared cached prefix.
//!
//! A batch is packed, not padded: the rows of all sequences are concatenated, so the
//! projections run on real tokens only, and attention is computed per (sequence, head) with a
//! per-row visibility range instead of a mask tensor. Every sequence of a batch continues the
//! same prefix (possibly empty), whose keys and values are shared, never copied per sequence.

use super::ops::{View, gemm_into, masked_softmax};
use rayon::prelude::*;

/// Keys and values of one layer for a run of positions, rows `[len × n_kv_heads·head_dim]`
/// (after RoPE), exactly as the projections produced them.
#[derive(Debug, Clone, Default)]
pub struct LayerKv {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// Where each sequence's rows lie in a packed batch.
#[derive(Debug, Clone)]
pub struct Packing {
    /// `offsets[s]..offsets[s + 1]` are the rows of sequence `s`.
    pub offsets: Vec<usize>,
}

impl Packing {
    pub fn from_lengths(lengths: impl IntoIterator<Item = usize>) -> Self {
        let mut offsets = vec![0];
        for len in lengths {
            offsets.push(offsets.last().unwrap() + len);
        }
        Self { offsets }
    }

    pub fn n_sequences(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn n_rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    pub fn range(&self, s: usize) -> std::ops::Range<usize> {
        self.offsets[s]..self.offsets[s + 1]
    }
}

/// Head layout and masking rule of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub value_dim: usize,
    /// Multiplier of q·k.
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at positions p' with p − p' < window.
    pub window: Option<usize>,
}

/// Attention output `[rows × n_heads·value_dim]` for queries `q` `[rows × n_heads·head_dim]`
/// against the prefix's keys/values followed by each sequence's own `k`/`v`
/// (`[rows × n_kv_heads·head_dim]`). A row at index i of its sequence has position
/// `prefix_len + i` and sees the prefix and its own sequence up to itself.
pub fn attend(
    q: &[f32],
    own: &LayerKv,
    prefix: Option<&LayerKv>,
    packing: &Packing,
    shape: AttentionShape,
) -> Vec<f32> {
    let AttentionShape {
        n_heads,
        n_kv_heads,
        head_dim,
        value_dim,
        ..
    } = shape;
    let q_stride = n_heads * head_dim;
    let k_stride = n_kv_heads * head_dim;
    let v_stride = n_kv_heads * value_dim;
    let empty = LayerKv::default();
    let prefix = prefix.unwrap_or(&empty);
    let prefix_len = prefix.k.len() / k_stride;
    let group = n_heads / n_kv_heads;
    let tasks: Vec<(usize, usize)> = (0..packing.n_sequences())
        .flat_map(|s| (0..n_heads).map(move |h| (s, h)))
        .collect();
    let head_outputs: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&(s, h)| {
            let rows = packing.range(s);
            let t = rows.len();
            let kv = h / group;
            // Keys of the prefix that no query of this sequence can see (sliding window) are
            // skipped: the first query sits at position prefix_len.
            let first_visible = shape
                .window
                .map_or(0, |w| (prefix_len + 1).saturating_sub(w));
            let p = prefix_len - first_visible;
            let width = p + t;
            let mut scores = vec![0.0f32; t * width];
            let q_view = View::rows(q, rows.start * q_stride + h * head_dim, q_stride);
            gemm_into(
                &mut scores,
                width,
                q_view,
                View::transposed(
                    &prefix.k,
                    first_visible * k_stride + kv * head_dim,
                    k_stride,
                ),
                (t, p, head_dim),
                shape.scale,
                false,
                1,
            );
            gemm_into(
                &mut scores[p..],
                width,
                q_view,
                View::transposed(&own.k, rows.start * k_stride + kv * head_dim, k_stride),
                (t, t, head_dim),
                shape.scale,
                false,
                1,
            );
            for (i, row) in scores.chunks_exact_mut(width).enumerate() {
                let pos = prefix_len + i;
                // Visible key positions: [pos + 1 − window, pos], mapped to score columns.
                let lo_pos = shape.window.map_or(0, |w| (pos + 1).saturating_sub(w));
                let lo = lo_pos.max(first_visible) - first_visible;
                masked_softmax(row, lo..p + i + 1);
            }
            let mut out = vec![0.0f32; t * value_dim];
            gemm_into(
                &mut out,
                value_dim,
                View::rows(&scores, 0, width),
                View::rows(
                    &prefix.v,
                    first_visible * v_stride + kv * value_dim,
                    v_stride,
                ),
                (t, value_dim, p),
                1.0,
                false,
                1,
            );
            gemm_into(
                &mut out,
                value_dim,
                View::rows(&scores, p, width),
                View::rows(&own.v, rows.start * v_stride + kv * value_dim, v_stride),
                (t, value_dim, t),
                1.0,
                true,
                1,
            );
            out
        })
        .collect();
    let out_stride = n_heads * value_dim;
    let mut out = vec![0.0f32; packing.n_rows() * out_stride];
    for (&(s, h), head) in tasks.iter().zip(&head_outputs) {
        for (i, row) in packing.range(s).zip(head.chunks_exact(value_dim)) {
            let at = i * out_stride + h * value_dim;
            out[at..at + value_dim].copy_from_slice(row);
        }
    }
    out
}
