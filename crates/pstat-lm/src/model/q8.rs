//! The `q8` precision: products of quantized weights with activations quantized per block to
//! 8 bits, summed in integers, as llama.cpp's CPU backend computes them.
//!
//! Each row of activations is quantized the way llama.cpp quantizes the activation side of a
//! product: to q8_0 blocks (32 values, one f16 scale) for the 32-element weight types (Q4_0,
//! Q4_1, Q5_0, Q5_1, Q8_0) and to q8_K blocks (256 values, one f32 scale, sums of each 16)
//! for the K-quants (Q2_K … Q6_K). A weight block times an activation block is then an exact
//! integer dot product (per sub-block, with the sub-block's integer scale and min), and only
//! the combination of blocks is done in f32.
//!
//! The arithmetic is defined once, by the scalar code here: for every weight block, the
//! integer sums (`S`, and `M` for the types with mins), then `acc += (d_a·d_w)·S` (plus
//! `m_w·(d_a·Σa)` or minus `(d_a·dmin_w)·M`) in f32, block after block. The SIMD kernels
//! (`q8_x86`: AVX2, and AVX512-VNNI where present) compute the same integer sums with vector
//! instructions and combine them with the same f32 operations (`Combine`), so every kernel's
//! result is bit-identical to the scalar one; which kernel runs is chosen at run time from the
//! CPU's features. Integer sums are exact whatever their lane order, which is what makes this
//! possible: the SIMD kernels never saturate (activations lie in ±127, so the AVX2 `maddubs`
//! pairs stay below 2¹⁵).
//!
//! Weights stored as F32, F16 or BF16 keep the f32 product under `q8` (there is no integer
//! arithmetic to gain from them); so does a matrix that stacks such a part with quantized ones.

use super::q8k::{KActs, KTile, Kind, QK, TILE, tile_dot};
use super::weights::{Matrix, Stored};
use half::f16;
use rayon::prelude::*;

/// How products with weight matrices are computed (`precision` in a run config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 products on exactly the dequantized weights (the default; comparable with
    /// llama.cpp on an F32 re-quantized file).
    #[default]
    F32,
    /// Activations quantized to 8 bits per block and integer dot products against the stored
    /// blocks, as llama.cpp computes quantized products.
    Q8,
}

impl Precision {
    /// Every precision's name, as configs and `--precision` spell it.
    pub const NAMES: [&'static str; 2] = ["f32", "q8"];

    /// This precision's name ([`Precision::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Q8 => "q8",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "q8" => Ok(Precision::Q8),
            _ => Err(format!("unknown precision `{s}` (expected f32 or q8)")),
        }
    }
}

/// One q8_0 block of activations: 32 values `d·qs[i]`, with `sum = Σ qs` for the weight
/// types with a per-block min.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct A8_0 {
    /// The quantized values.
    pub qs: [i8; 32],
    /// The scale, rounded to f16 as llama.cpp stores it.
    pub d: f32,
    /// `Σ qs`.
    pub sum: i32,
}

/// One q8_K block of activations: 256 values `d·qs[i]`, with the sums of each 16.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct A8K {
    /// The quantized values.
    pub qs: [i8; 256],
    /// The sums of each 16 quantized values.
    pub bsums: [i16; 16],
    /// The scale.
    pub d: f32,
}

/// `x` rounded to the nearest integer, ties to even, for |x| < 2²²: adding and subtracting
/// 1.5·2²³ leaves no fraction bits (a plain add, where `round_ties_even` is a libm call on
/// baseline x86-64).
#[inline(always)]
fn round_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// llama.cpp's x86 q8_0 quantization: `d = amax/127` (stored as f16), `q = round(x·127/amax)`
/// with ties to even.
pub fn quantize_q8_0(x: &[f32]) -> Vec<A8_0> {
    x.chunks_exact(32)
        .map(|xs| {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let mut qs = [0i8; 32];
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = round_even(v * id) as i8;
            }
            A8_0 {
                qs,
                d: f16::from_f32(d).to_f32(),
                sum: qs.iter().map(|&q| q as i32).sum(),
            }
        })
        .collect()
}

/// llama.cpp's q8_K quantization (`quantize_row_q8_K_ref`): the element of largest magnitude
/// maps to ∓127, `q = nearest(−127/max · x)` with ties to even, `d = 1/iscale`.
pub fn quantize_q8_k(x: &[f32]) -> Vec<A8K> {
    x.chunks_exact(256)
        .map(|xs| {
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in xs {
                if v.abs() > amax {
                    amax = v.abs();
                    max = v;
                }
            }
            let mut block = A8K {
                qs: [0; 256],
                bsums: [0; 16],
                d: 0.0,
            };
            if amax == 0.0 {
                return block;
            }
            let iscale = -127.0 / max;
            for (q, &v) in block.qs.iter_mut().zip(xs) {
                *q = (round_even(iscale * v) as i32).min(127) as i8;
            }
            for (s, qs) in block.bsums.iter_mut().zip(block.qs.chunks_exact(16)) {
                *s = qs.iter().map(|&q| q as i16).sum();
            }
            block.d = 1.0 / iscale;
            block
        })
        .collect()
}

pub(super) fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// The f32 combination of one weight block's integer sums with the scales (the only rounded
/// arithmetic of a q8 product), shared by the scalar and SIMD kernels so that they agree bit
/// for bit. `d_w`/`m_w` are the weight block's scale and min (or dmin), `d_a` the activation
/// block's scale, `s` the scaled integer dot product, `m` the min term's integer sum.
pub(super) struct Combine;

impl Combine {
    /// Q4_0, Q5_0, Q8_0, Q3_K, Q6_K.
    #[inline(always)]
    pub fn scale(acc: f32, d_w: f32, d_a: f32, s: i32) -> f32 {
        acc + (d_w * d_a) * s as f32
    }

    /// Q4_1, Q5_1: `m_w · (d_a · Σa)` added.
    #[inline(always)]
    pub fn scale_min(acc: f32, d_w: f32, m_w: f32, d_a: f32, s: i32, sum_a: i32) -> f32 {
        acc + ((d_w * d_a) * s as f32 + m_w * (d_a * sum_a as f32))
    }

    /// Q2_K, Q4_K, Q5_K: `(d_a · dmin_w) · M` subtracted.
    #[inline(always)]
    pub fn scale_dmin(acc: f32, d_w: f32, dmin_w: f32, d_a: f32, s: i32, m: i32) -> f32 {
        acc + ((d_a * d_w) * s as f32 - (d_a * dmin_w) * m as f32)
    }
}

/// Bytes of one stored block and elements per block, by type.
pub(super) fn block_shape(stored: &Stored) -> Option<(usize, usize)> {
    use candle_core::quantized::GgmlDType as T;
    let dtype = stored.dtype();
    match dtype {
        T::F32 | T::F16 | T::BF16 => None,
        _ => Some((dtype.type_size(), dtype.block_size())),
    }
}

/// Q4_K/Q5_K: 6-bit scale and min of sub-block `j` (ggml's `get_scale_min_k4`).
pub(super) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q3_K's 16 scales (6 bits each, stored with an offset of 32), unpacked as ggml does.
pub(super) fn q3k_scales(s: &[u8]) -> [i8; 16] {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (k1, k2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
    let (a0, a1, tmp) = (word(0), word(1), word(2));
    let aux = [
        (a0 & k2) | ((tmp & k1) << 4),
        (a1 & k2) | (((tmp >> 2) & k1) << 4),
        ((a0 >> 4) & k2) | (((tmp >> 4) & k1) << 4),
        ((a1 >> 4) & k2) | (((tmp >> 6) & k1) << 4),
    ];
    let mut out = [0i8; 16];
    for (i, w) in aux.iter().enumerate() {
        for (b, byte) in w.to_le_bytes().iter().enumerate() {
            out[4 * i + b] = (*byte as i8).wrapping_sub(32);
        }
    }
    out
}

/// A weight block decoded to integers: element values `q`, their scales per 16 elements, and
/// the mins per 16 (K-quants with mins) — what the scalar kernels multiply with.
pub(super) struct Decoded {
    pub q: [i32; 256],
    pub scales: [i32; 16],
    pub mins: [i32; 16],
    pub d: f32,
    /// Q4_1/Q5_1's min, or the K-quants' dmin.
    pub m: f32,
}

/// Decodes one block of `dtype` (ggml's layout) into integers; `q[..block_size]` is used.
pub(super) fn decode(dtype: candle_core::quantized::GgmlDType, b: &[u8]) -> Decoded {
    use candle_core::quantized::GgmlDType as T;
    let mut out = Decoded {
        q: [0; 256],
        scales: [1; 16],
        mins: [0; 16],
        d: 0.0,
        m: 0.0,
    };
    let nibbles = |qs: &[u8], q: &mut [i32; 256]| {
        for j in 0..16 {
            q[j] = (qs[j] & 0xF) as i32;
            q[j + 16] = (qs[j] >> 4) as i32;
        }
    };
    let high_bits = |qh: &[u8], q: &mut [i32; 256]| {
        let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
        for (j, v) in q.iter_mut().take(32).enumerate() {
            *v |= (((qh >> j) & 1) << 4) as i32;
        }
    };
    match dtype {
        T::Q4_0 => {
            out.d = half_at(b, 0);
            nibbles(&b[2..18], &mut out.q);
            out.q[..32].iter_mut().for_each(|v| *v -= 8);
        }
        T::Q4_1 => {
            (out.d, out.m) = (half_at(b, 0), half_at(b, 2));
            nibbles(&b[4..20], &mut out.q);
        }
        T::Q5_0 => {
            out.d = half_at(b, 0);
            nibbles(&b[6..22], &mut out.q);
            high_bits(&b[2..6], &mut out.q);
            out.q[..32].iter_mut().for_each(|v| *v -= 16);
        }
        T::Q5_1 => {
            (out.d, out.m) = (half_at(b, 0), half_at(b, 2));
            nibbles(&b[8..24], &mut out.q);
            high_bits(&b[4..8], &mut out.q);
        }
        T::Q8_0 => {
            out.d = half_at(b, 0);
            for (v, &x) in out.q.iter_mut().zip(&b[2..34]) {
                *v = x as i8 as i32;
            }
        }
        T::Q2K => {
            // scales[16], qs[64], d, dmin
            (out.d, out.m) = (half_at(b, 80), half_at(b, 82));
            for (j, &byte) in b[..16].iter().enumerate() {
                out.scales[j] = (byte & 0xF) as i32;
                out.mins[j] = (byte >> 4) as i32;
            }
            let qs = &b[16..80];
            for i in 0..256 {
                let (half, j, l) = (i / 128, (i % 128) / 32, i % 32);
                out.q[i] = ((qs[32 * half + l] >> (2 * j)) & 3) as i32;
            }
        }
        T::Q3K => {
            // hmask[32], qs[64], scales[12], d
            out.d = half_at(b, 108);
            for (o, s) in out.scales.iter_mut().zip(q3k_scales(&b[96..108])) {
                *o = s as i32;
            }
            let (hmask, qs) = (&b[0..32], &b[32..96]);
            for i in 0..256 {
                let (half, j, l) = (i / 128, (i % 128) / 32, i % 32);
                let low = (qs[32 * half + l] >> (2 * j)) & 3;
                let high = (hmask[l] >> (4 * half + j)) & 1;
                out.q[i] = (low | (high << 2)) as i32 - 4;
            }
        }
        T::Q4K | T::Q5K => {
            (out.d, out.m) = (half_at(b, 0), half_at(b, 2));
            let scales = &b[4..16];
            let (qh, qs) = if dtype == T::Q5K {
                (Some(&b[16..48]), &b[48..176])
            } else {
                (None, &b[16..144])
            };
            for sub in 0..8 {
                let (sc, m) = scale_min_k4(sub, scales);
                out.scales[2 * sub..2 * sub + 2].fill(sc as i32);
                out.mins[2 * sub..2 * sub + 2].fill(m as i32);
            }
            for i in 0..256 {
                let (g, high_nibble, l) = (i / 64, (i % 64) / 32, i % 32);
                let byte = qs[32 * g + l];
                let mut v = if high_nibble == 1 {
                    byte >> 4
                } else {
                    byte & 0xF
                };
                if let Some(qh) = qh {
                    v |= ((qh[l] >> (2 * g + high_nibble)) & 1) << 4;
                }
                out.q[i] = v as i32;
            }
        }
        T::Q6K => {
            // ql[128], qh[64], scales[16] (i8), d
            out.d = half_at(b, 208);
            for j in 0..16 {
                out.scales[j] = b[192 + j] as i8 as i32;
            }
            let (ql, qh) = (&b[0..128], &b[128..192]);
            for i in 0..256 {
                let (half, run, l) = (i / 128, (i % 128) / 32, i % 32);
                let low = ql[64 * half + 32 * (run % 2) + l];
                let low = if run >= 2 { low >> 4 } else { low & 0xF };
                let high = (qh[32 * half + l] >> (2 * run)) & 3;
                out.q[i] = (low | (high << 4)) as i32 - 32;
            }
        }
        T::F32 | T::F16 | T::BF16 | T::Q8_1 | T::Q8K => {
            unreachable!("{dtype:?} has no q8 kernel")
        }
    }
    out
}

/// The activations of a product, quantized for the weight types it meets.
pub(super) struct Activations {
    pub q8_0: Vec<Vec<A8_0>>,
    pub q8_k: Vec<Vec<A8K>>,
}

/// Whether `dtype` multiplies q8_K blocks (the K-quants) rather than q8_0 ones.
fn is_k_quant(dtype: candle_core::quantized::GgmlDType) -> bool {
    dtype.block_size() == 256
}

/// The scalar reference of one weight row (`row`, ggml blocks) times activation rows `acts`:
/// `out[r]` is row `r`'s dot product. Its arithmetic defines the results of every kernel.
fn row_scalar(
    dtype: candle_core::quantized::GgmlDType,
    row: &[u8],
    acts: &Activations,
    act_rows: std::ops::Range<usize>,
    out: &mut [f32],
) {
    use candle_core::quantized::GgmlDType as T;
    let size = dtype.type_size();
    out.fill(0.0);
    for (b, block) in row.chunks_exact(size).enumerate() {
        let w = decode(dtype, block);
        for (o, r) in out.iter_mut().zip(act_rows.clone()) {
            if is_k_quant(dtype) {
                let a = &acts.q8_k[r][b];
                let mut s = 0i32;
                let mut m = 0i32;
                for j in 0..16 {
                    let dot: i32 = (0..16)
                        .map(|i| w.q[16 * j + i] * a.qs[16 * j + i] as i32)
                        .sum();
                    s += w.scales[j] * dot;
                    m += w.mins[j] * a.bsums[j] as i32;
                }
                *o = match dtype {
                    T::Q3K | T::Q6K => Combine::scale(*o, w.d, a.d, s),
                    _ => Combine::scale_dmin(*o, w.d, w.m, a.d, s, m),
                };
            } else {
                let a = &acts.q8_0[r][b];
                let s: i32 = (0..32).map(|i| w.q[i] * a.qs[i] as i32).sum();
                *o = match dtype {
                    T::Q4_1 | T::Q5_1 => Combine::scale_min(*o, w.d, w.m, a.d, s, a.sum),
                    _ => Combine::scale(*o, w.d, a.d, s),
                };
            }
        }
    }
}

/// The instruction set a q8 product runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// The scalar reference kernels (every CPU).
    Scalar,
    /// AVX2 (`maddubs` + `madd` integer sums).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX512-VNNI (`vpdpbusd`), with AVX512F/BW/VL.
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Isa {
    /// The best this CPU has, detected once.
    pub fn detect() -> Isa {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                if has!("avx2")
                    && has!("avx512f")
                    && has!("avx512bw")
                    && has!("avx512vl")
                    && has!("avx512vnni")
                {
                    return Isa::Vnni;
                }
                if has!("avx2") {
                    return Isa::Avx2;
                }
            }
            Isa::Scalar
        })
    }

    /// The name manifests record.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Vnni => "avx512vnni",
        }
    }
}

/// Weight rows per task: their blocks (or, for the K-quants, their decoded tile) stay in cache
/// while every group of activation rows passes.
const ROWS_PER_TASK: usize = 32;

/// `x[n × w.cols] · wᵀ` under [`Precision::Q8`], with the kernels of `isa`; `None` when a part
/// of `w` is stored as floats (the caller keeps the f32 product).
///
/// With a SIMD `isa`, K-quant parts run the register-blocked kernels of [`super::q8k`] on
/// activations quantized and packed once per product; the 32-element types run one weight
/// row against [`GROUP`] activation rows per call.
pub(super) fn linear(x: &[f32], n: usize, w: &Matrix, isa: Isa) -> Option<Vec<f32>> {
    let parts = w.quantized_parts()?;
    let cols = w.cols;
    let tiled = |dtype| isa != Isa::Scalar && is_k_quant(dtype);
    let needs = |k: bool| {
        parts
            .iter()
            .any(|(_, s)| is_k_quant(s.dtype()) == k && !tiled(s.dtype()))
    };
    let acts = Activations {
        q8_0: if needs(false) {
            x.par_chunks_exact(cols).map(quantize_q8_0).collect()
        } else {
            Vec::new()
        },
        q8_k: if needs(true) {
            x.par_chunks_exact(cols).map(quantize_q8_k).collect()
        } else {
            Vec::new()
        },
    };
    let packed = parts
        .iter()
        .any(|(_, s)| tiled(s.dtype()))
        .then(|| KActs::quantize(x, cols));
    let mut out = vec![0.0f32; n * w.rows];
    let dst = super::ops::SharedDst(out.as_mut_ptr());
    let tasks: Vec<(usize, &Stored, usize)> = parts
        .iter()
        .flat_map(|&(first_row, stored)| {
            let rows = stored.n_elements() / cols;
            (0..rows)
                .step_by(ROWS_PER_TASK)
                .map(move |r| (first_row, stored, r))
        })
        .collect();
    tasks
        .into_par_iter()
        .for_each(|(first_row, stored, start)| {
            let dtype = stored.dtype();
            let row_bytes = cols / dtype.block_size() * dtype.type_size();
            let bytes = stored.bytes();
            let end = (start + ROWS_PER_TASK).min(bytes.len() / row_bytes);
            let dst = &dst;
            // SAFETY (both writers): `out` is `n × w.rows`; element (i, first_row + r) with
            // i < n and start ≤ r < end (first_row + r < w.rows) is written by this task
            // alone (tasks own disjoint weight rows).
            let write =
                |i: usize, r: usize, v: f32| unsafe { *dst.0.add(i * w.rows + first_row + r) = v };
            if let Some(packed) = packed.as_ref().filter(|_| tiled(dtype)) {
                K_TILE.with(|tile| {
                    let mut tile = tile.borrow_mut();
                    tile.fill(dtype, bytes, cols / QK, start..end);
                    let kind = Kind::of(dtype);
                    let mut dots = [0.0f32; TILE * TILE];
                    for c0 in (0..packed.rows).step_by(TILE) {
                        for r0 in (0..tile.rows).step_by(TILE) {
                            let done = tile_dot(isa, kind, &tile, r0, packed, c0, &mut dots);
                            assert!(done, "{isa:?} has K-quant kernels");
                            for r in (start + r0..end).take(TILE) {
                                for i in (c0..n).take(TILE) {
                                    write(i, r, dots[TILE * (r - start - r0) + i - c0]);
                                }
                            }
                        }
                    }
                });
                return;
            }
            let mut dots = [0.0f32; GROUP];
            for first in (0..n).step_by(GROUP) {
                let group = first..(first + GROUP).min(n);
                for r in start..end {
                    let row = &bytes[r * row_bytes..(r + 1) * row_bytes];
                    let dots = &mut dots[..group.len()];
                    rows_dot(isa, dtype, row, &acts, group.clone(), dots);
                    for (i, &v) in group.clone().zip(dots.iter()) {
                        write(i, r, v);
                    }
                }
            }
        });
    Some(out)
}

thread_local! {
    /// Each worker's decoded K-quant weight rows, reused from product to product.
    static K_TILE: std::cell::RefCell<KTile> = std::cell::RefCell::new(KTile::default());
}

/// Activation rows one kernel call multiplies with a weight row (the unpacked weights are
/// reused across them).
pub(super) const GROUP: usize = 4;

/// One weight row times activation rows `group` (at most [`GROUP`]) with the kernels of `isa`.
fn rows_dot(
    isa: Isa,
    dtype: candle_core::quantized::GgmlDType,
    row: &[u8],
    acts: &Activations,
    group: std::ops::Range<usize>,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && super::q8_x86::rows_dot(isa, dtype, row, acts, group.clone(), out) {
        return;
    }
    let _ = isa;
    row_scalar(dtype, row, acts, group, out)
}

/// The name of the kernel family a q8 product uses on this CPU, for manifests.
pub fn kernel_isa() -> &'static str {
    Isa::detect().name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::GgmlDType;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const TYPES: [GgmlDType; 10] = [
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q2K,
        GgmlDType::Q3K,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
    ];

    fn random_matrix(rng: &mut ChaCha8Rng, dtype: GgmlDType, rows: usize, cols: usize) -> Matrix {
        let n = rows * cols;
        let bytes: Vec<u8> = (0..n / dtype.block_size() * dtype.type_size())
            .map(|_| rng.random())
            .collect();
        let mut bytes = bytes;
        // Finite scales: random f16 bytes are NaN or infinite often enough to hide the
        // comparison of everything else (NaN ≠ NaN).
        let offsets: &[usize] = match dtype {
            GgmlDType::Q4_0 | GgmlDType::Q5_0 | GgmlDType::Q8_0 => &[0],
            GgmlDType::Q4_1 | GgmlDType::Q5_1 | GgmlDType::Q4K | GgmlDType::Q5K => &[0, 2],
            GgmlDType::Q2K => &[80, 82],
            GgmlDType::Q3K => &[108],
            GgmlDType::Q6K => &[208],
            _ => unreachable!(),
        };
        for block in bytes.chunks_exact_mut(dtype.type_size()) {
            for &at in offsets {
                let scale = f16::from_f32(rng.random_range(-0.05f32..0.05));
                block[at..at + 2].copy_from_slice(&scale.to_bits().to_le_bytes());
            }
        }
        let stored = Stored::read(&mut bytes.as_slice(), dtype, n)
            .unwrap()
            .unwrap();
        Matrix::from_stored(rows, cols, stored).unwrap()
    }

    /// The decoded integers times their scales are the values candle's dequantization gives
    /// (checks that the decoding reads ggml's layouts right).
    #[test]
    fn decoded_blocks_are_the_dequantized_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for dtype in TYPES {
            let m = random_matrix(&mut rng, dtype, 4, 512);
            let mut reference = vec![0.0; 4 * 512];
            m.dequantize_rows(0..4, &mut reference);
            let (_, stored) = m.quantized_parts().unwrap()[0];
            let bytes = stored.bytes();
            let bs = dtype.block_size();
            for (b, block) in bytes.chunks_exact(dtype.type_size()).enumerate() {
                let w = decode(dtype, block);
                for i in 0..bs {
                    let sub = i / 16;
                    let value = if is_k_quant(dtype) {
                        w.d * w.scales[sub] as f32 * w.q[i] as f32 - w.m * w.mins[sub] as f32
                    } else {
                        w.d * w.q[i] as f32 + w.m
                    };
                    let expected = reference[b * bs + i];
                    let magnitude = w.d.abs() * 64.0 * 64.0 + w.m.abs() * 64.0;
                    assert!(
                        (value - expected).abs() <= 1e-6 * magnitude,
                        "{dtype:?} block {b} element {i}: {value} vs {expected}"
                    );
                }
            }
        }
    }

    /// A q8 product is the f32 product up to the activations' 8-bit rounding.
    #[test]
    fn q8_products_approximate_f32_products() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for dtype in TYPES {
            let (rows, cols, n) = (40, 512, 6);
            let m = random_matrix(&mut rng, dtype, rows, cols);
            let x: Vec<f32> = (0..n * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
            let exact = super::super::ops::linear(&x, n, &m);
            let q8 = linear(&x, n, &m, Isa::Scalar).unwrap();
            let norm = exact.iter().map(|v| v * v).sum::<f32>().sqrt();
            let err = exact
                .iter()
                .zip(&q8)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f32>()
                .sqrt();
            assert!(err <= 0.02 * norm, "{dtype:?}: error {err} of norm {norm}");
        }
    }

    /// Every SIMD kernel this CPU can run gives the scalar kernel's results bit for bit, for
    /// every type, every group size (1–4 activation rows) and rows of one or many blocks.
    #[test]
    fn simd_kernels_equal_the_scalar_reference_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        assert!(
            std::env::var_os("CI").is_none() || std::arch::is_x86_feature_detected!("avx2"),
            "the CI machine must have AVX2 to test the AVX2 kernels"
        );
        let mut isas = vec![];
        #[cfg(target_arch = "x86_64")]
        {
            if Isa::detect() != Isa::Scalar {
                isas.push(Isa::Avx2);
            }
            if Isa::detect() == Isa::Vnni {
                isas.push(Isa::Vnni);
            }
        }
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for dtype in TYPES {
            for (rows, cols, n) in [(3, 256, 1), (37, 768, 7), (20, 2048, 4)] {
                let m = random_matrix(&mut rng, dtype, rows, cols);
                let x: Vec<f32> = (0..n * cols)
                    .map(|_| rng.random_range(-3.0f32..3.0) * rng.random_range(0.0f32..1.0))
                    .collect();
                let reference = linear(&x, n, &m, Isa::Scalar).unwrap();
                for &isa in &isas {
                    let fast = linear(&x, n, &m, isa).unwrap();
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&fast),
                        bits(&reference),
                        "{dtype:?} {isa:?} {rows}×{cols}, n = {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantizers_follow_llama_cpp() {
        let x: Vec<f32> = (0..256).map(|i| (i as f32 - 100.0) / 7.0).collect();
        let b = &quantize_q8_0(&x[..32])[0];
        // amax = 100/7 at element 0.
        assert_eq!(b.qs[0], -127);
        assert_eq!(b.d, f16::from_f32(100.0 / 7.0 / 127.0).to_f32());
        assert_eq!(b.sum, b.qs.iter().map(|&q| q as i32).sum::<i32>());
        let k = &quantize_q8_k(&x)[0];
        // max = 155/7 (element 255, positive): iscale = −127/max maps it to −127.
        assert_eq!(k.qs[255], -127);
        assert!(k.d < 0.0);
        assert_eq!(
            k.bsums[0],
            k.qs[..16].iter().map(|&q| q as i16).sum::<i16>()
        );
        let zero = &quantize_q8_k(&[0.0; 256])[0];
        assert_eq!((zero.d, zero.qs[0]), (0.0, 0));
    }

    #[test]
    fn precision_names_parse() {
        assert_eq!("q8".parse::<Precision>().unwrap(), Precision::Q8);
        assert_eq!("f32".parse::<Precision>().unwrap(), Precision::F32);
        assert!("q4".parse::<Precision>().unwrap_err().contains("f32 or q8"));
    }
}
