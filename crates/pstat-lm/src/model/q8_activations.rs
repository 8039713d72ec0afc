//! The activation side of q8 products and what every q8 kernel shares: the q8_0 and q8_K
//! activation blocks with llama.cpp's quantizers that fill them, the activations of one
//! product quantized for the weight types it meets ([`Activations`]), how many activation
//! rows one kernel call takes ([`GROUP`]), and the f32 combination of a weight block's integer
//! sums with the scales ([`Combine`]), the only rounded arithmetic of a q8 product.
//!
//! The scalar reference ([`super::q8`]) and the SIMD kernels (`q8_x86`, [`super::q8k`]) all
//! compute with these, so this file sits below all of them and imports nothing of the model.

use half::f16;

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

/// The activations of a product, quantized for the weight types it meets.
pub(super) struct Activations {
    pub q8_0: Vec<Vec<A8_0>>,
    pub q8_k: Vec<Vec<A8K>>,
}

/// Activation rows one kernel call multiplies with a weight row (the unpacked weights are
/// reused across them).
pub(super) const GROUP: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

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
}
