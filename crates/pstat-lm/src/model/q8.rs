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
//! (`q8_x86`: AVX2, and AVX512-VNNI where present; `q8k` for the K-quants) compute the same
//! integer sums with vector instructions and combine them with the same f32 operations
//! (`q8_activations::Combine`), so every kernel's result is bit-identical to the scalar one;
//! which kernel runs is chosen at run time from the CPU's features. Integer sums are exact
//! whatever their lane order, which is what makes this possible: the SIMD kernels never
//! saturate (activations lie in ±127, so the AVX2 `maddubs` pairs stay below 2¹⁵).
//!
//! Weights stored as F32, F16 or BF16 keep the f32 product under `q8` (there is no integer
//! arithmetic to gain from them); so does a matrix that stacks such a part with quantized ones.
//!
//! This file is the product driver and the scalar reference: it quantizes the activations,
//! splits the weight rows into tasks and runs each with a kernel. The SIMD kernels and what
//! every kernel shares (the activation blocks and `Combine` in `q8_activations`, ggml's block
//! layouts in `ggml_blocks`, the instruction sets in [`super::precision`]) sit below it and
//! never import it; [`super::ops::linear`], which picks a product's precision, sits above.

use super::ggml_blocks::decode;
use super::precision::Isa;
use super::q8_activations::{Activations, Combine, GROUP, quantize_q8_0, quantize_q8_k};
use super::q8k::{KActs, KTile, Kind, QK, TILE, tile_dot};
use super::shared_dst::SharedDst;
use super::weights::{Matrix, Stored};
use rayon::prelude::*;

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

/// Weight rows per task: their blocks (or, for the K-quants, their decoded tile) stay in cache
/// while every group of activation rows passes.
const ROWS_PER_TASK: usize = 32;

/// `x[n × w.cols] · wᵀ` under [`super::precision::Precision::Q8`], with the kernels of `isa`;
/// `None` when a part of `w` is stored as floats (the caller keeps the f32 product).
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
    let dst = SharedDst(out.as_mut_ptr());
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
    use half::f16;
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
}
