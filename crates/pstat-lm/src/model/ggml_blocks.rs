//! ggml's block layouts read as integers: each block type's scales, mins and element values
//! where ggml stores them (`decode`), and the helpers the direct decoders share (`half_at`,
//! `scale_min_k4`).
//!
//! The layouts are ggml's, independent of any product, so this file imports nothing of the
//! model: the scalar q8 reference ([`super::q8`]), the K-quant tiles ([`super::q8k`]) and the
//! AVX2 dequantizer (`dequant_avx2`) all read blocks through it.

use half::f16;

/// The f16 at byte `at` of a block (ggml stores scales and mins little-endian).
pub(super) fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
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
fn q3k_scales(s: &[u8]) -> [i8; 16] {
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
