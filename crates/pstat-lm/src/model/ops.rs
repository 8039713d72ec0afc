//! Row-wise kernels of the forward pass on plain `f32` slices: matrix products (through the
//! `gemm` crate, which candle uses underneath), RMSNorm, rotary embeddings, gated activations
//! and the exponential behind softmax.
//!
//! The element-wise kernels run hundreds of millions of `exp`s per benchmark (softmax over a
//! 2000-token belief context at every layer), so they use a polynomial `exp` that the compiler
//! vectorises, compiled twice: for the baseline target and for AVX2+FMA, picked at run time
//! (the same run-time dispatch candle and gemm use, so the binary stays portable).

use super::shared_dst::SharedDst;
use crate::gguf::Gelu;
use gemm::Parallelism;
use rayon::prelude::*;

pub use super::precision::Precision;
pub use super::weights::Matrix;

/// A strided view of a matrix operand for [`gemm_into`]: element (r, c) is at
/// `data[offset + r * row_stride + c * col_stride]`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The underlying elements.
    pub data: &'a [f32],
    /// Index of element (0, 0) in `data`.
    pub offset: usize,
    /// Distance in `data` between consecutive rows.
    pub row_stride: usize,
    /// Distance in `data` between consecutive columns.
    pub col_stride: usize,
}

impl<'a> View<'a> {
    /// Rows of `width` elements, `row_stride` apart, starting at `offset`.
    pub fn rows(data: &'a [f32], offset: usize, row_stride: usize) -> Self {
        Self {
            data,
            offset,
            row_stride,
            col_stride: 1,
        }
    }

    /// The transpose of [`View::rows`]: column j is the j-th row of the underlying storage.
    pub fn transposed(data: &'a [f32], offset: usize, row_stride: usize) -> Self {
        Self {
            data,
            offset,
            row_stride: 1,
            col_stride: row_stride,
        }
    }

    /// Index of the last element touched by an `r × c` block, for bounds checks.
    fn last_index(&self, r: usize, c: usize) -> usize {
        self.offset + (r - 1) * self.row_stride + (c - 1) * self.col_stride
    }
}

/// `dst[m × n] (+)= beta · lhs[m × k] · rhs[k × n]`, where `dst` rows are `dst_stride` apart.
/// With `accumulate` the product is added to what `dst` holds; otherwise it overwrites it.
/// `threads > 1` lets gemm split the product over rayon's pool.
#[allow(clippy::too_many_arguments)]
pub fn gemm_into(
    dst: &mut [f32],
    dst_stride: usize,
    lhs: View,
    rhs: View,
    (m, n, k): (usize, usize, usize),
    beta: f32,
    accumulate: bool,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                dst[r * dst_stride..r * dst_stride + n].fill(0.0);
            }
        }
        return;
    }
    assert!(
        (m - 1) * dst_stride + n <= dst.len(),
        "gemm dst out of bounds"
    );
    assert!(n <= dst_stride, "gemm dst rows overlap");
    // SAFETY: `dst` was bounds-checked above for the given shape and stride, and it is
    // borrowed mutably, so it cannot alias `lhs` or `rhs`.
    unsafe {
        gemm_raw(
            dst.as_mut_ptr(),
            dst_stride,
            lhs,
            rhs,
            (m, n, k),
            beta,
            accumulate,
            threads,
        )
    }
}

/// [`gemm_into`] on a raw destination, for callers that write disjoint blocks of one output
/// from several threads. `m`, `n` and `k` must be non-zero.
///
/// # Safety
/// `dst` must be valid for writes at `dst + r·dst_stride + c` for every `r < m`, `c < n`, with
/// `n ≤ dst_stride`, and no other thread may access those elements during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_raw(
    dst: *mut f32,
    dst_stride: usize,
    lhs: View,
    rhs: View,
    (m, n, k): (usize, usize, usize),
    beta: f32,
    accumulate: bool,
    threads: usize,
) {
    // The operand checks make the reads sound: gemm reads exactly the elements of these blocks.
    assert!(
        lhs.last_index(m, k) < lhs.data.len(),
        "gemm lhs out of bounds"
    );
    assert!(
        rhs.last_index(k, n) < rhs.data.len(),
        "gemm rhs out of bounds"
    );
    let parallelism = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY: the operands were bounds-checked above and the caller guarantees `dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_stride as isize,
            accumulate,
            lhs.data.as_ptr().add(lhs.offset),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr().add(rhs.offset),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            if accumulate { 1.0 } else { 0.0 },
            beta,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `x[n × w.cols] · wᵀ` for a weight stored as `out × in` (GGUF's layout): `[n × w.rows]`.
///
/// An f32 weight is one gemm. Any other stored type is dequantized a tile of rows at a time
/// into a per-thread scratch buffer, and each tile's product is the same gemm restricted to
/// those output columns: gemm's sum over k for one output element depends only on k's
/// blocking (a function of k and the cache sizes) and not on how many output columns the call
/// spans, so the result is bit-identical to dequantizing the whole weight first, provided no
/// tile falls into gemm's small-matrix paths (`MIN_TILE_ROWS`).
///
/// A matrix of block-quantized weights marked [`Precision::Q8`] is multiplied by the integer
/// kernels of [`super::q8`] instead.
pub fn linear(x: &[f32], n: usize, w: &Matrix) -> Vec<f32> {
    assert_eq!(x.len(), n * w.cols, "linear input must be n × in");
    if w.precision == Precision::Q8
        && n > 0
        && let Some(out) = super::q8::linear(x, n, w, super::precision::Isa::detect())
    {
        return out;
    }
    let mut out = vec![0.0; n * w.rows];
    let threads = rayon::current_num_threads();
    if let Some(data) = w.as_f32() {
        gemm_into(
            &mut out,
            w.rows,
            View::rows(x, 0, w.cols),
            View::transposed(data, 0, w.cols),
            (n, w.rows, w.cols),
            1.0,
            false,
            threads,
        );
        return out;
    }
    if n == 0 || w.rows == 0 || w.cols == 0 {
        return out;
    }
    let tiles = row_tiles(w.rows, w.cols, threads);
    let threads_per_tile = (threads / tiles.len()).max(1);
    let dst = SharedDst(out.as_mut_ptr());
    tiles.into_par_iter().for_each(|rows| {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let len = rows.len() * w.cols;
            if scratch.len() < len {
                scratch.resize(len, 0.0);
            }
            let tile = &mut scratch[..len];
            w.dequantize_rows(rows.clone(), tile);
            let dst = &dst;
            // SAFETY: `out` is `n × w.rows`; this tile writes columns `rows` of each of its n
            // rows (the last at (n - 1)·w.rows + rows.end ≤ out.len()), and tiles are disjoint
            // column ranges, so no two tasks write the same element; x and the scratch tile
            // are exactly `n × cols` and `rows.len() × cols`.
            unsafe {
                gemm_raw(
                    dst.0.add(rows.start),
                    w.rows,
                    View::rows(x, 0, w.cols),
                    View::transposed(tile, 0, w.cols),
                    (n, rows.len(), w.cols),
                    1.0,
                    false,
                    threads_per_tile,
                );
            }
        });
    });
    out
}

/// Fewest weight rows in a tile: with more than 256 output columns (and more than 64), gemm
/// never takes its small-matrix paths (the "horizontal" kernel for m·n ≤ 256 and the
/// fixed kc = 512 blocking for m, n ≤ 64), whatever the number of input rows, so a tile sums
/// exactly as the whole matrix does. A matrix with fewer rows is one tile.
const MIN_TILE_ROWS: usize = 257;
/// A tile's dequantized f32 rows aim at this size (about an L2 cache), more rows than
/// [`MIN_TILE_ROWS`] when rows are short.
const TILE_BYTES: usize = 2 << 20;

/// Whether [`linear`] computes a row of a product with `out` output columns exactly as it does
/// among any other rows (two or more; a lone row takes gemm's matrix-vector path): true above
/// gemm's small-matrix sizes (see [`MIN_TILE_ROWS`]), so a subset of a batch's rows can be
/// multiplied alone without changing a bit.
pub fn rows_independent(out: usize) -> bool {
    out >= MIN_TILE_ROWS
}

thread_local! {
    /// Each worker's dequantized tile, reused from product to product.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Consecutive row ranges covering `0..rows`, each at least [`MIN_TILE_ROWS`] long (or the
/// whole matrix), of about [`TILE_BYTES`] of f32 each, in whole rounds of `threads` tiles
/// where there are enough rows (a last round of fewer tiles leaves threads idle).
fn row_tiles(rows: usize, cols: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let target = (TILE_BYTES / (4 * cols.max(1))).max(MIN_TILE_ROWS);
    let mut count = (rows / target).max(1).div_ceil(threads) * threads;
    while count > threads && rows / count < MIN_TILE_ROWS {
        count -= threads;
    }
    while count > 1 && rows / count < MIN_TILE_ROWS {
        count -= 1;
    }
    (0..count)
        .map(|i| i * rows / count..(i + 1) * rows / count)
        .collect()
}

/// RMSNorm of every `weight.len()`-wide chunk of `x`, in place: `x / sqrt(mean(x²) + eps) · weight`.
/// The sum of squares accumulates in f64, as llama.cpp does.
pub fn rms_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    let width = weight.len();
    x.par_chunks_mut(width * 64).for_each(|block| {
        for row in block.chunks_exact_mut(width) {
            let sum: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum();
            let scale = 1.0 / ((sum / width as f64) as f32 + eps).sqrt();
            for (v, w) in row.iter_mut().zip(weight) {
                *v = *v * scale * w;
            }
        }
    });
}

/// `dst += src`, element-wise (the residual connection). Spread over the workers: on the
/// caller's thread alone it left the other cores idle once per sublayer.
pub fn add_assign(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len());
    dst.par_chunks_mut(ELEMENTWISE_CHUNK)
        .zip(src.par_chunks(ELEMENTWISE_CHUNK))
        .for_each(|(d, s)| {
            for (d, s) in d.iter_mut().zip(s) {
                *d += s;
            }
        });
}

/// Adds a sublayer's output `out` to the residual stream `x` (rows of `width`). With `keep`,
/// `out` holds only the rows listed, and `x` keeps only those rows first.
pub fn add_to_kept_rows(x: &mut Vec<f32>, width: usize, out: &[f32], keep: Option<&[usize]>) {
    if let Some(rows) = keep {
        *x = rows_of(x, width, rows);
    }
    add_assign(x, out);
}

/// The rows `rows` of the row-major matrix `x` (rows of `width`), in the order listed.
pub fn rows_of(x: &[f32], width: usize, rows: &[usize]) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| x[r * width..(r + 1) * width].iter().copied())
        .collect()
}

/// A copy of `x` made by the workers together: a batch's residual stream is megabytes, and
/// copied on the caller's thread alone it left the other cores idle.
pub fn par_copy(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    out.spare_capacity_mut()
        .par_chunks_mut(ELEMENTWISE_CHUNK)
        .zip(x.par_chunks(ELEMENTWISE_CHUNK))
        .for_each(|(dst, src)| {
            for (d, s) in dst.iter_mut().zip(src) {
                d.write(*s);
            }
        });
    // SAFETY: the chunks above cover the first x.len() elements of the capacity, and each
    // was written.
    unsafe { out.set_len(x.len()) };
    out
}

/// Elements per task of the element-wise passes: large enough that scheduling is negligible,
/// small enough that a batch's rows spread over every worker.
const ELEMENTWISE_CHUNK: usize = 1 << 15;

/// Soft-capping, `cap · tanh(x / cap)` in place (Gemma 2's attention and output logits), in
/// llama.cpp's order of operations: scale, tanh, scale.
pub fn soft_cap(xs: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for x in xs {
        *x = (*x * inv).tanh() * cap;
    }
}

/// How RoPE pairs the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (2i, 2i+1): llama.cpp's "normal" RoPE, for Llama GGUFs whose converter
    /// permuted the q/k rows into this order.
    Interleaved,
    /// Pairs (i, i + d/2): GPT-NeoX style, used by Gemma and Qwen.
    Neox,
}

/// cos/sin of every rotated pair at positions `0..len`, for one RoPE base.
#[derive(Debug, Clone)]
pub struct RopeTable {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    /// Angles as llama.cpp computes them (`ggml_rope_cache_init`), in f32: pair i's angle is
    /// θᵢ / factorᵢ · freq_scale, where θ₀ = position and each next θ is the previous one times
    /// base^(-2/rope_dim); the factors are Llama 3's frequency divisors (1 without them).
    pub fn new(
        rope_dim: usize,
        base: f32,
        freq_scale: f32,
        freq_factors: Option<&[f32]>,
        len: usize,
    ) -> Self {
        let half = rope_dim / 2;
        let theta_scale = base.powf(-2.0 / rope_dim as f32);
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in 0..len {
            let mut theta = pos as f32;
            for i in 0..half {
                let factor = freq_factors.map_or(1.0, |f| f[i]);
                let angle = theta / factor * freq_scale;
                cos.push(angle.cos());
                sin.push(angle.sin());
                theta *= theta_scale;
            }
        }
        Self { half, cos, sin }
    }

    /// Rotates every head of every row of `x` (`[positions.len() × n_heads·head_dim]`) in place.
    pub fn apply(&self, x: &mut [f32], head_dim: usize, positions: &[usize], style: RopeStyle) {
        let width = x.len() / positions.len().max(1);
        if width == 0 {
            return;
        }
        let half = self.half;
        // Rows are independent: they go to the workers in runs of rows.
        let rows_per_task = (ELEMENTWISE_CHUNK / width).max(1);
        x.par_chunks_mut(rows_per_task * width)
            .zip(positions.par_chunks(rows_per_task))
            .for_each(|(rows, positions)| {
                for (row, &pos) in rows.chunks_exact_mut(width).zip(positions) {
                    let cos = &self.cos[pos * half..(pos + 1) * half];
                    let sin = &self.sin[pos * half..(pos + 1) * half];
                    for head in row.chunks_exact_mut(head_dim) {
                        for i in 0..half {
                            let (a, b) = match style {
                                RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                                RopeStyle::Neox => (i, i + half),
                            };
                            let (x0, x1) = (head[a], head[b]);
                            head[a] = x0 * cos[i] - x1 * sin[i];
                            head[b] = x0 * sin[i] + x1 * cos[i];
                        }
                    }
                }
            });
    }
}

/// The gated activation of an MLP: `act(gate) · up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatedActivation {
    /// SiLU (Llama, Qwen).
    Silu,
    /// GELU with the tanh approximation (Gemma), evaluated as the model's format's reference
    /// does.
    GeluTanh(Gelu),
}

/// Applies `act(gate) · up` to rows laid out as `[gate (ffn) | up (ffn)]` (the fused
/// projection's output) and returns the `[n × ffn]` product.
pub fn gated(gate_up: &[f32], ffn: usize, act: GatedActivation) -> Vec<f32> {
    let n = gate_up.len() / (2 * ffn);
    let mut out = vec![0.0; n * ffn];
    out.par_chunks_mut(ffn)
        .zip(gate_up.par_chunks(2 * ffn))
        .for_each(|(o, gu)| {
            let (g, u) = gu.split_at(ffn);
            dispatch_gated(o, g, u, act);
        });
    out
}

/// Softmax of `row` in place over the visible elements `row[visible]`; the rest are set to 0.
pub fn masked_softmax(row: &mut [f32], visible: std::ops::Range<usize>) {
    row[..visible.start].fill(0.0);
    row[visible.end..].fill(0.0);
    dispatch_softmax(&mut row[visible]);
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Adding and subtracting 1.5·2²³ rounds an f32 of magnitude < 2²² to the nearest integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// e^x with relative error below 2e-7 on [-87, 88] (Cody–Waite reduction, degree-6 Taylor
/// polynomial on |r| ≤ ln2/2), written without branches so that loops over it vectorise.
#[inline(always)]
fn exp_poly(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2E + ROUND_MAGIC;
    let k = shifted - ROUND_MAGIC;
    let r = x - k * LN2_HI - k * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^k without a float-to-int conversion (Rust's saturating `as i32` does not vectorise):
    // the low mantissa bits of `shifted` hold k, and ROUND_MAGIC's own bits vanish in the
    // shift, so (bits + 127) << 23 is the exponent field of 2^k for |k| ≤ 127.
    p * f32::from_bits(shifted.to_bits().wrapping_add(127) << 23)
}

#[inline(always)]
fn softmax_body(xs: &mut [f32]) {
    let mut max = [f32::NEG_INFINITY; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            max[l] = max[l].max(c[l]);
        }
    }
    let max = chunks.remainder().iter().fold(
        max.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        |a, &b| a.max(b),
    );
    let mut sum = [0.0f32; 8];
    let mut chunks = xs.chunks_exact_mut(8);
    for c in &mut chunks {
        for l in 0..8 {
            c[l] = exp_poly(c[l] - max);
            sum[l] += c[l];
        }
    }
    let mut total: f32 = sum.iter().sum();
    for v in chunks.into_remainder() {
        *v = exp_poly(*v - max);
        total += *v;
    }
    let inv = 1.0 / total;
    for v in xs.iter_mut() {
        *v *= inv;
    }
}

#[inline(always)]
fn gated_body(out: &mut [f32], gate: &[f32], up: &[f32], act: GatedActivation) {
    match act {
        GatedActivation::Silu => {
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                *o = g / (1.0 + exp_poly(-g)) * u;
            }
        }
        GatedActivation::GeluTanh(Gelu::F32) => {
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                *o = gelu_tanh(g) * u;
            }
        }
        GatedActivation::GeluTanh(Gelu::F16Table) => {
            let table = gelu_f16_table();
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                *o = if g <= -10.0 {
                    0.0
                } else if g >= 10.0 {
                    g * u
                } else {
                    table[usize::from(half::f16::from_f32(g).to_bits())] * u
                };
            }
        }
    }
}

/// GELU-tanh as ggml computes it on the CPU (its `GGML_GELU_FP16` path, which llama.cpp
/// builds with): the input rounded to f16 indexes a table of GELU values rounded to f16. Gemma's
/// activations then match llama.cpp's; the exact function differs from it by up to 2^-11
/// relative per element, which the tiny Gemma models turn into 5e-3 in log p.
fn gelu_f16_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                half::f16::from_f32(gelu_tanh(half::f16::from_bits(bits).to_f32())).to_f32()
            })
            .collect()
    })
}

/// GELU-tanh in f32: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), torch's
/// `gelu(approximate="tanh")`, which transformers runs for Gemma.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn softmax_avx2(xs: &mut [f32]) {
    softmax_body(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gated_avx2(out: &mut [f32], gate: &[f32], up: &[f32], act: GatedActivation) {
    gated_body(out, gate, up, act)
}

/// The SIMD family this CPU runs the f32 kernels with (gemm picks AVX-512 where present, else
/// AVX2 + FMA). Different families sum in different orders, so results are bit-identical only
/// between machines that share one; manifests record it.
pub fn kernel_isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            "x86_64 avx512f"
        } else if has_avx2() {
            "x86_64 avx2+fma"
        } else {
            "x86_64 sse2"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVX2.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

fn dispatch_softmax(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
        return unsafe { softmax_avx2(xs) };
    }
    softmax_body(xs)
}

fn dispatch_gated(out: &mut [f32], gate: &[f32], up: &[f32], act: GatedActivation) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
        return unsafe { gated_avx2(out, gate, up, act) };
    }
    gated_body(out, gate, up, act)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_exp_is_accurate() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let rel = ((exp_poly(x) as f64) - (x as f64).exp()).abs() / (x as f64).exp();
            worst = worst.max(rel);
            x += 0.013;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
    }

    #[test]
    fn softmax_matches_definition_and_masks() {
        let mut row = vec![1.0, 2.0, 3.0, 0.5, -1.0, 7.0, 0.0, 1.0, 2.0, 2.5, 9.0];
        let reference: Vec<f64> = {
            let vis = &row[1..10];
            let m = vis.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let e: Vec<f64> = vis.iter().map(|&v| (v as f64 - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|v| v / s).collect()
        };
        masked_softmax(&mut row, 1..10);
        assert_eq!(row[0], 0.0);
        assert_eq!(row[10], 0.0);
        for (a, b) in row[1..10].iter().zip(&reference) {
            assert!((*a as f64 - b).abs() < 1e-6);
        }
    }

    #[test]
    fn row_tiles_cover_rows_in_long_enough_balanced_tiles() {
        for (rows, cols, threads) in [
            (100, 64, 2),
            (500, 576, 2),
            (3072, 576, 2),
            (49152, 576, 2),
            (8192, 2048, 16),
            (2048, 8192, 3),
        ] {
            let tiles = row_tiles(rows, cols, threads);
            assert_eq!(tiles.first().unwrap().start, 0);
            assert_eq!(tiles.last().unwrap().end, rows);
            assert!(tiles.windows(2).all(|w| w[0].end == w[1].start));
            assert!(tiles.len() == 1 || tiles.iter().all(|t| t.len() >= MIN_TILE_ROWS));
            if rows >= threads * MIN_TILE_ROWS {
                assert_eq!(tiles.len() % threads, 0, "{rows} rows on {threads} threads");
            }
        }
    }

    #[test]
    fn gemm_views_compute_transposed_products() {
        // a: 2×3, b stored as 2×3 rows (so bᵀ is 3×2).
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, -1.0, 2.0, 1.0, 0.0];
        let mut c = vec![0.0; 4];
        gemm_into(
            &mut c,
            2,
            View::rows(&a, 0, 3),
            View::transposed(&b, 0, 3),
            (2, 2, 3),
            1.0,
            false,
            1,
        );
        assert_eq!(c, vec![-2.0, 4.0, -2.0, 13.0]);
    }
}
