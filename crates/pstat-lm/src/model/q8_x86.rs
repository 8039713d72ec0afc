//! x86-64 kernels of the q8 products ([`super::q8`]) of the 32-element types (Q4_0, Q4_1,
//! Q5_0, Q5_1, Q8_0; the K-quants have [`super::q8k`]): one weight row times up to [`GROUP`]
//! rows of quantized activations. They compute the integer sums of every weight block
//! with vector instructions and combine them with the scalar code's f32 operations
//! ([`super::q8_activations::Combine`]), so their results are the scalar reference's bit for
//! bit.
//!
//! The kernels are written once and compiled twice: with AVX2 (`maddubs` + `madd`, as
//! llama.cpp's AVX2 path) and with AVX512-VNNI on 256-bit vectors (`vpdpbusd` for the u8×i8
//! sums of four), which needs fewer instructions for the same exact sums.

use super::precision::Isa;
use super::q8_activations::{A8_0, Activations, GROUP};
use candle_core::quantized::GgmlDType;
use std::ops::Range;

/// Runs the kernel of `dtype` for `isa`; `false` (nothing written) when there is none.
pub(super) fn rows_dot(
    isa: Isa,
    dtype: GgmlDType,
    row: &[u8],
    acts: &Activations,
    group: Range<usize>,
    out: &mut [f32],
) -> bool {
    let a0 = || -> [&[A8_0]; GROUP] {
        std::array::from_fn(|i| acts.q8_0[group.start + i.min(group.len() - 1)].as_slice())
    };
    let n = group.len();
    // SAFETY (every arm): the ISA was detected on this CPU ([`Isa::detect`]; the tests call
    // only ISAs they detected). The row holds whole blocks of `dtype`, and every activation
    // row holds as many blocks (both of the product's width); rows past the group repeat its
    // last row and their results are dropped.
    unsafe {
        macro_rules! call {
            ($f:ident, $acts:expr) => {
                match isa {
                    Isa::Avx2 => avx2::$f(row, $acts, &mut out[..n]),
                    Isa::Vnni => vnni::$f(row, $acts, &mut out[..n]),
                    Isa::Scalar => return false,
                }
            };
        }
        match dtype {
            GgmlDType::Q8_0 => call!(q8_0, a0()),
            GgmlDType::Q4_0 => call!(q4_0, a0()),
            GgmlDType::Q4_1 => call!(q4_1, a0()),
            GgmlDType::Q5_0 => call!(q5_0, a0()),
            GgmlDType::Q5_1 => call!(q5_1, a0()),
            _ => return false,
        }
    }
    true
}

/// The kernels, for one instruction set: `$features` to compile with and `dot4(u, s)` (i32
/// lanes of four u8×i8 products).
macro_rules! kernels {
    ($features:literal, $dot4:path) => {
        use super::*;
        use std::arch::x86_64::*;

        /// 16 bytes of nibbles as 32 bytes: low nibbles (elements 0–15), then high (16–31).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn nibbles16(p: *const u8) -> __m256i {
            let qs = unsafe { _mm_loadu_si128(p.cast()) };
            let mask = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(qs, mask);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(qs), mask);
            _mm256_set_m128i(hi, lo)
        }

        /// The 32 bits at `p` as 32 bytes, 0x10 where the bit is set (Q5's fifth bit).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn fifth_bits(p: *const u8) -> __m256i {
            let bits = unsafe { std::ptr::read_unaligned(p.cast::<u32>()) };
            let spread = _mm256_shuffle_epi8(
                _mm256_set1_epi32(bits as i32),
                _mm256_set_epi64x(
                    0x0303_0303_0303_0303,
                    0x0202_0202_0202_0202,
                    0x0101_0101_0101_0101,
                    0,
                ),
            );
            let set = _mm256_cmpeq_epi8(
                _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe)),
                _mm256_set1_epi64x(-1),
            );
            _mm256_and_si256(set, _mm256_set1_epi8(0x10))
        }

        /// The f16 at `p` as f32 (F16C: the exact conversion, as `half`'s).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn f16_at(p: *const u8) -> f32 {
            let bits = unsafe { std::ptr::read_unaligned(p.cast::<u16>()) };
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
        }

        /// Four vectors of i32 lanes summed each, as a vector `[Σv0, Σv1, Σv2, Σv3]`.
        #[inline]
        #[target_feature(enable = $features)]
        fn hsum4v(v: [__m256i; 4]) -> __m128i {
            let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
        }

        /// The 32-element types: each block's integer dot product with each row (`SIGNED`
        /// weights through the sign trick, |w| times ±a), combined block by block with
        /// [`Combine::scale`] (or [`Combine::scale_min`] for `MIN`), the four rows' f32
        /// operations in the four lanes of one vector.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn blocks32<const SIGNED: bool, const MIN: bool>(
            row: &[u8],
            size: usize,
            acts: [&[A8_0]; GROUP],
            out: &mut [f32],
            weights: impl Fn(*const u8) -> __m256i,
        ) {
            let mut acc = _mm_setzero_ps();
            for (b, block) in row.chunks_exact(size).enumerate() {
                let p = block.as_ptr();
                let w = weights(p);
                let u = if SIGNED { _mm256_sign_epi8(w, w) } else { w };
                let a: [&A8_0; GROUP] = std::array::from_fn(|r| &acts[r][b]);
                let v: [__m256i; GROUP] = std::array::from_fn(|r| {
                    // SAFETY: 32 bytes of the block's activations.
                    let x = unsafe { _mm256_loadu_si256(a[r].qs.as_ptr().cast()) };
                    let s = if SIGNED { _mm256_sign_epi8(x, w) } else { x };
                    $dot4(u, s)
                });
                let sums = _mm_cvtepi32_ps(hsum4v(v));
                let d_a = _mm_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d);
                // SAFETY: d (and m) are the block's first f16s.
                let d_w = _mm_set1_ps(unsafe { f16_at(p) });
                let mut t = _mm_mul_ps(_mm_mul_ps(d_w, d_a), sums);
                if MIN {
                    let m_w = _mm_set1_ps(unsafe { f16_at(p.add(2)) });
                    let sum_a =
                        _mm_cvtepi32_ps(_mm_setr_epi32(a[0].sum, a[1].sum, a[2].sum, a[3].sum));
                    t = _mm_add_ps(t, _mm_mul_ps(m_w, _mm_mul_ps(d_a, sum_a)));
                }
                acc = _mm_add_ps(acc, t);
            }
            let mut all = [0.0f32; GROUP];
            // SAFETY: 16 bytes into a 4 × f32 array.
            unsafe { _mm_storeu_ps(all.as_mut_ptr(), acc) };
            out.copy_from_slice(&all[..out.len()]);
        }

        #[target_feature(enable = $features)]
        pub unsafe fn q8_0(row: &[u8], acts: [&[A8_0]; GROUP], out: &mut [f32]) {
            unsafe {
                blocks32::<true, false>(row, 34, acts, out, |p| _mm256_loadu_si256(p.add(2).cast()))
            }
        }

        #[target_feature(enable = $features)]
        pub unsafe fn q4_0(row: &[u8], acts: [&[A8_0]; GROUP], out: &mut [f32]) {
            unsafe {
                blocks32::<true, false>(row, 18, acts, out, |p| {
                    _mm256_sub_epi8(nibbles16(p.add(2)), _mm256_set1_epi8(8))
                })
            }
        }

        #[target_feature(enable = $features)]
        pub unsafe fn q4_1(row: &[u8], acts: [&[A8_0]; GROUP], out: &mut [f32]) {
            unsafe { blocks32::<false, true>(row, 20, acts, out, |p| nibbles16(p.add(4))) }
        }

        #[target_feature(enable = $features)]
        pub unsafe fn q5_0(row: &[u8], acts: [&[A8_0]; GROUP], out: &mut [f32]) {
            unsafe {
                blocks32::<true, false>(row, 22, acts, out, |p| {
                    let q = _mm256_or_si256(nibbles16(p.add(6)), fifth_bits(p.add(2)));
                    _mm256_sub_epi8(q, _mm256_set1_epi8(16))
                })
            }
        }

        #[target_feature(enable = $features)]
        pub unsafe fn q5_1(row: &[u8], acts: [&[A8_0]; GROUP], out: &mut [f32]) {
            unsafe {
                blocks32::<false, true>(row, 24, acts, out, |p| {
                    _mm256_or_si256(nibbles16(p.add(8)), fifth_bits(p.add(4)))
                })
            }
        }
    };
}

mod avx2 {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn dot4(
        u: std::arch::x86_64::__m256i,
        s: std::arch::x86_64::__m256i,
    ) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }

    kernels!("avx2,f16c", dot4);
}

mod vnni {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    fn dot4(
        u: std::arch::x86_64::__m256i,
        s: std::arch::x86_64::__m256i,
    ) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    }

    kernels!("avx2,avx512f,avx512bw,avx512vl,avx512vnni", dot4);
}
