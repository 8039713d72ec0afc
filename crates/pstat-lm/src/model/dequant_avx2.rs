//! AVX2 dequantization of the block types the embedded models store (Q4_1, Q4_K, Q6_K, Q8_0).
//!
//! Stored-type products dequantize every weight tile for every product, so candle's scalar
//! `to_float` became a large share of a forward pass. These kernels compute each element with
//! exactly candle's operations in candle's order (`q·d + m` for Q4_1, `d1·q − m1` for Q4_K with
//! `d1 = d·sc` and `m1 = dmin·m` in scalar, `(d·sc)·q` for Q6_K, `q·d` for Q8_0), each an IEEE
//! single-precision operation without fused multiply-add, so the f32 values are bit-identical.
//!
//! The kernels read a type and raw ggml blocks, not the stored tensor, so this file sits below
//! [`super::weights`], which calls it, and reads the block layouts from
//! [`super::ggml_blocks`].

use super::ggml_blocks::{half_at, scale_min_k4};
use candle_core::quantized::GgmlDType;
use std::arch::x86_64::*;

/// Dequantizes `blocks`, whole blocks of `dtype` in ggml's layout, into `out` when `dtype` has
/// a kernel here and the CPU has AVX2; `false` (nothing written) otherwise.
pub(super) fn dequantize(dtype: GgmlDType, blocks: &[u8], out: &mut [f32]) -> bool {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return false;
    }
    // SAFETY (each arm): AVX2 is present (checked above); `blocks` holds whole blocks of
    // `dtype` in ggml's layout, and `out` holds as many blocks' elements (the caller's
    // contract, checked by debug asserts).
    unsafe {
        match dtype {
            GgmlDType::Q4_1 => q4_1(blocks, out),
            GgmlDType::Q8_0 => q8_0(blocks, out),
            GgmlDType::Q4K => q4_k(blocks, out),
            GgmlDType::Q6K => q6_k(blocks, out),
            _ => return false,
        }
    }
    true
}

/// The low 8 bytes of `v` as f32 (unsigned).
#[inline]
#[target_feature(enable = "avx2")]
fn u8x8_to_f32(v: __m128i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
}

/// The low 8 bytes of `v` as f32 (signed).
#[inline]
#[target_feature(enable = "avx2")]
fn i8x8_to_f32(v: __m128i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))
}

/// `out[..8] = q · d + m`, the multiply and the add rounded separately. Where both terms are
/// NaN the scalar code yields the product's NaN; the compiler may swap the operands of an add
/// (and x86 returns the first operand's NaN), so the product's NaN is chosen explicitly.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_mul_add(out: *mut f32, q: __m256, d: __m256, m: __m256) {
    let qd = _mm256_mul_ps(q, d);
    let sum = _mm256_add_ps(qd, m);
    let qd_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(qd, qd);
    unsafe { _mm256_storeu_ps(out, _mm256_blendv_ps(sum, qd, qd_nan)) }
}

/// `out[..8] = a · b`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_mul(out: *mut f32, a: __m256, b: __m256) {
    unsafe { _mm256_storeu_ps(out, _mm256_mul_ps(a, b)) }
}

/// Q4_1 (20 bytes: d, m, 16 bytes of nibbles): element j is low nibble j, element j + 16 high
/// nibble j, each `q·d + m`.
#[target_feature(enable = "avx2")]
unsafe fn q4_1(bytes: &[u8], out: &mut [f32]) {
    const SIZE: usize = 20;
    debug_assert_eq!(out.len(), bytes.len() / SIZE * 32);
    let mask = _mm_set1_epi8(0x0F);
    for (block, y) in bytes.chunks_exact(SIZE).zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(half_at(block, 0));
        let m = _mm256_set1_ps(half_at(block, 2));
        // SAFETY: 16 bytes from offset 4 of a 20-byte block; 32 f32 in `y`.
        unsafe {
            let qs = _mm_loadu_si128(block.as_ptr().add(4).cast());
            let lo = _mm_and_si128(qs, mask);
            let hi = _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
            let y = y.as_mut_ptr();
            store_mul_add(y, u8x8_to_f32(lo), d, m);
            store_mul_add(y.add(8), u8x8_to_f32(_mm_srli_si128(lo, 8)), d, m);
            store_mul_add(y.add(16), u8x8_to_f32(hi), d, m);
            store_mul_add(y.add(24), u8x8_to_f32(_mm_srli_si128(hi, 8)), d, m);
        }
    }
}

/// Q8_0 (34 bytes: d, 32 signed bytes): `q·d`.
#[target_feature(enable = "avx2")]
unsafe fn q8_0(bytes: &[u8], out: &mut [f32]) {
    const SIZE: usize = 34;
    debug_assert_eq!(out.len(), bytes.len() / SIZE * 32);
    for (block, y) in bytes.chunks_exact(SIZE).zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(half_at(block, 0));
        // SAFETY: 32 bytes from offset 2 of a 34-byte block; 32 f32 in `y`.
        unsafe {
            let q = block.as_ptr().add(2);
            let y = y.as_mut_ptr();
            for k in 0..4 {
                let v = _mm_loadl_epi64(q.add(8 * k).cast());
                store_mul(y.add(8 * k), i8x8_to_f32(v), d);
            }
        }
    }
}

/// Q4_K (144 bytes: d, dmin, 12 bytes of scales, 128 bytes of nibbles): four groups of 64
/// elements, the low then the high nibbles of 32 bytes, each `d1·q − m1`.
#[target_feature(enable = "avx2")]
unsafe fn q4_k(bytes: &[u8], out: &mut [f32]) {
    const SIZE: usize = 144;
    debug_assert_eq!(out.len(), bytes.len() / SIZE * 256);
    let mask = _mm256_set1_epi8(0x0F);
    for (block, y) in bytes.chunks_exact(SIZE).zip(out.chunks_exact_mut(256)) {
        let d = half_at(block, 0);
        let min = half_at(block, 2);
        let scales = &block[4..16];
        for g in 0..4 {
            let (sc1, m1) = scale_min_k4(2 * g, scales);
            let (sc2, m2) = scale_min_k4(2 * g + 1, scales);
            let halves = [
                (d * sc1 as f32, min * m1 as f32),
                (d * sc2 as f32, min * m2 as f32),
            ];
            // SAFETY: 32 bytes at 16 + 32g ≤ 112 of a 144-byte block; 64 f32 at 64g in `y`.
            unsafe {
                let qs = _mm256_loadu_si256(block.as_ptr().add(16 + 32 * g).cast());
                let nibbles = [
                    _mm256_and_si256(qs, mask),
                    _mm256_and_si256(_mm256_srli_epi16(qs, 4), mask),
                ];
                for (h, (nib, (dh, mh))) in nibbles.into_iter().zip(halves).enumerate() {
                    let (dh, mh) = (_mm256_set1_ps(dh), _mm256_set1_ps(mh));
                    let y = y.as_mut_ptr().add(64 * g + 32 * h);
                    let lo = _mm256_castsi256_si128(nib);
                    let hi = _mm256_extracti128_si256(nib, 1);
                    for (k, v) in [lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)]
                        .into_iter()
                        .enumerate()
                    {
                        _mm256_storeu_ps(
                            y.add(8 * k),
                            _mm256_sub_ps(_mm256_mul_ps(dh, u8x8_to_f32(v)), mh),
                        );
                    }
                }
            }
        }
    }
}

/// Q6_K (210 bytes: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, d):
/// two halves of 128 elements, each four runs of 32 whose 16-element groups share a scale,
/// each `(d·sc)·q` with q the 6-bit value minus 32.
#[target_feature(enable = "avx2")]
unsafe fn q6_k(bytes: &[u8], out: &mut [f32]) {
    const SIZE: usize = 210;
    debug_assert_eq!(out.len(), bytes.len() / SIZE * 256);
    let low4 = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(0x03);
    let bias = _mm256_set1_epi8(32);
    for (block, y) in bytes.chunks_exact(SIZE).zip(out.chunks_exact_mut(256)) {
        let d = half_at(block, 208);
        let scales = &block[192..208];
        for half in 0..2 {
            // SAFETY: ql at 64·half (+32) and qh at 128 + 32·half, 32 bytes each, inside the
            // 210-byte block; 128 f32 at 128·half in `y`.
            unsafe {
                let p = block.as_ptr();
                let ql0 = _mm256_loadu_si256(p.add(64 * half).cast());
                let ql1 = _mm256_loadu_si256(p.add(64 * half + 32).cast());
                let qh = _mm256_loadu_si256(p.add(128 + 32 * half).cast());
                let qh2 = _mm256_srli_epi16(qh, 2);
                let qh4 = _mm256_srli_epi16(qh, 4);
                let qh6 = _mm256_srli_epi16(qh, 6);
                let high = [qh, qh2, qh4, qh6].map(|bits| _mm256_and_si256(bits, two));
                let runs = [
                    (_mm256_and_si256(ql0, low4), high[0]),
                    (_mm256_and_si256(ql1, low4), high[1]),
                    (_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high[2]),
                    (_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high[3]),
                ]
                .map(|(low, high)| _mm256_or_si256(low, _mm256_slli_epi16(high, 4)));
                for (r, run) in runs.into_iter().enumerate() {
                    let q = _mm256_sub_epi8(run, bias);
                    let y = y.as_mut_ptr().add(128 * half + 32 * r);
                    let lo = _mm256_castsi256_si128(q);
                    let hi = _mm256_extracti128_si256(q, 1);
                    for (k, v) in [lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)]
                        .into_iter()
                        .enumerate()
                    {
                        let sc = scales[8 * half + 2 * r + k / 2] as i8;
                        let ds = _mm256_set1_ps(d * sc as f32);
                        store_mul(y.add(8 * k), ds, i8x8_to_f32(v));
                    }
                }
            }
        }
    }
}
