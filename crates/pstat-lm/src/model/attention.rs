//! Causal self-attention over packed sequences, optionally after a shared cached prefix.
//!
//! A batch is packed, not padded: the rows of all sequences are concatenated, so the
//! projections run on real tokens only, and attention is computed per (sequence, head) with a
//! per-row visibility range instead of a mask tensor. Every sequence of a batch continues the
//! same prefix (possibly empty), whose keys and values are shared, never copied per sequence.

use super::ops::{View, gemm_into, masked_softmax, soft_cap};
use rayon::prelude::*;

/// Keys and values of one layer for a run of positions, rows `[len × n_kv_heads·head_dim]`
/// (after RoPE), exactly as the projections produced them.
#[derive(Debug, Clone, Default)]
pub struct LayerKv {
    /// Keys, `[len × n_kv_heads·head_dim]`, row-major.
    pub k: Vec<f32>,
    /// Values, `[len × n_kv_heads·value_dim]`, row-major.
    pub v: Vec<f32>,
}

/// Where each sequence's rows lie in a packed batch.
#[derive(Debug, Clone)]
pub struct Packing {
    /// `offsets[s]..offsets[s + 1]` are the rows of sequence `s`.
    pub offsets: Vec<usize>,
}

impl Packing {
    /// The packing of sequences of these lengths, in order.
    pub fn from_lengths(lengths: impl IntoIterator<Item = usize>) -> Self {
        let mut offsets = vec![0];
        for len in lengths {
            offsets.push(offsets.last().unwrap() + len);
        }
        Self { offsets }
    }

    /// How many sequences the batch holds.
    pub fn n_sequences(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Rows (tokens) of all sequences together.
    pub fn n_rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    /// The rows of sequence `s`; panics when `s` is out of range.
    pub fn range(&self, s: usize) -> std::ops::Range<usize> {
        self.offsets[s]..self.offsets[s + 1]
    }
}

/// Head layout and masking rule of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (fewer than `n_heads` with grouped-query attention).
    pub n_kv_heads: usize,
    /// Width of one query or key head.
    pub head_dim: usize,
    /// Width of one value head.
    pub value_dim: usize,
    /// Multiplier of q·k.
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at positions p' with p − p' < window.
    pub window: Option<usize>,
    /// Soft-capping of the scaled logits, `cap · tanh(logit / cap)` (Gemma 2).
    pub softcap: Option<f32>,
}

/// Rows of queries one attention task handles: whole sequences are grouped up to this many
/// rows, so that the product against the shared prefix's keys runs as one tall matrix product
/// (a single sequence's ~50 suffix rows leave gemm mostly packing the prefix) while a task's
/// score block (rows × prefix length) stays cache-sized.
const ROWS_PER_TASK: usize = 256;

/// Consecutive runs of whole sequences, each up to [`ROWS_PER_TASK`] rows (a longer sequence
/// forms a group of its own): `groups[g]..groups[g + 1]` are sequence indices.
fn sequence_groups(packing: &Packing) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    for s in 0..packing.n_sequences() {
        let rows = packing.offsets[s + 1] - packing.offsets[start];
        if s > start && rows > ROWS_PER_TASK {
            groups.push(start..s);
            start = s;
        }
    }
    if start < packing.n_sequences() {
        groups.push(start..packing.n_sequences());
    }
    groups
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
    let group_size = n_heads / n_kv_heads;
    // Keys of the prefix that no query can see (sliding window) are skipped: every sequence's
    // first query sits at position prefix_len.
    let first_visible = shape
        .window
        .map_or(0, |w| (prefix_len + 1).saturating_sub(w));
    let p = prefix_len - first_visible;
    let tasks: Vec<(std::ops::Range<usize>, usize)> = sequence_groups(packing)
        .into_iter()
        .flat_map(|g| (0..n_heads).map(move |h| (g.clone(), h)))
        .collect();
    let head_outputs: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|(group, h)| {
            let h = *h;
            let kv = h / group_size;
            let first_row = packing.offsets[group.start];
            let n_rows = packing.offsets[group.end] - first_row;
            let longest = group
                .clone()
                .map(|s| packing.range(s).len())
                .max()
                .unwrap_or(0);
            let width = p + longest;
            let mut scores = vec![0.0f32; n_rows * width];
            let q_rows = |row: usize| View::rows(q, row * q_stride + h * head_dim, q_stride);
            // Every row of the group against the shared prefix: one product.
            gemm_into(
                &mut scores,
                width,
                q_rows(first_row),
                View::transposed(
                    &prefix.k,
                    first_visible * k_stride + kv * head_dim,
                    k_stride,
                ),
                (n_rows, p, head_dim),
                shape.scale,
                false,
                1,
            );
            for s in group.clone() {
                let rows = packing.range(s);
                let t = rows.len();
                let local = rows.start - first_row;
                gemm_into(
                    &mut scores[local * width + p..],
                    width,
                    q_rows(rows.start),
                    View::transposed(&own.k, rows.start * k_stride + kv * head_dim, k_stride),
                    (t, t, head_dim),
                    shape.scale,
                    false,
                    1,
                );
                for (i, row) in scores[local * width..(local + t) * width]
                    .chunks_exact_mut(width)
                    .enumerate()
                {
                    let pos = prefix_len + i;
                    // Visible key positions: [pos + 1 − window, pos], mapped to score columns.
                    let lo_pos = shape.window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    let lo = lo_pos.max(first_visible) - first_visible;
                    if let Some(cap) = shape.softcap {
                        soft_cap(&mut row[lo..p + i + 1], cap);
                    }
                    masked_softmax(row, lo..p + i + 1);
                }
            }
            let mut out = vec![0.0f32; n_rows * value_dim];
            gemm_into(
                &mut out,
                value_dim,
                View::rows(&scores, 0, width),
                View::rows(
                    &prefix.v,
                    first_visible * v_stride + kv * value_dim,
                    v_stride,
                ),
                (n_rows, value_dim, p),
                1.0,
                false,
                1,
            );
            for s in group.clone() {
                let rows = packing.range(s);
                let t = rows.len();
                let local = rows.start - first_row;
                gemm_into(
                    &mut out[local * value_dim..],
                    value_dim,
                    View::rows(&scores, local * width + p, width),
                    View::rows(&own.v, rows.start * v_stride + kv * value_dim, v_stride),
                    (t, value_dim, t),
                    1.0,
                    true,
                    1,
                );
            }
            out
        })
        .collect();
    let out_stride = n_heads * value_dim;
    let mut out = vec![0.0f32; packing.n_rows() * out_stride];
    for ((group, h), head) in tasks.iter().zip(&head_outputs) {
        let first_row = packing.offsets[group.start];
        for (i, row) in head.chunks_exact(value_dim).enumerate() {
            let at = (first_row + i) * out_stride + h * value_dim;
            out[at..at + value_dim].copy_from_slice(row);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_hold_whole_sequences_up_to_the_row_budget() {
        let lengths = [100, 100, 56, 1, 300, 20, 20];
        let groups = sequence_groups(&Packing::from_lengths(lengths));
        // 100 + 100 + 56 = 256 fits; the 1 would overflow; 300 stands alone.
        assert_eq!(groups, vec![0..3, 3..4, 4..5, 5..7]);
        assert!(sequence_groups(&Packing::from_lengths([])).is_empty());
    }
}
