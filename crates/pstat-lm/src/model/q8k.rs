//! Register-blocked q8 products for the K-quants (Q2_K … Q6_K): tiles of weight rows times
//! tiles of activation rows, summed with the arithmetic of the scalar reference
//! ([`super::q8`]) bit for bit.
//!
//! Each task decodes its weight rows once per product into a packed tile ([`KTile`]): every
//! element as an unsigned byte (Q3_K and Q6_K shifted by their offset 4 or 32), in a packed
//! layout ([`pack_block`]), where one 64-byte step holds four consecutive elements of each of a
//! block's sixteen groups of 16 (lane k of a 16-lane vector of sums is group k). The
//! activations are quantized to q8_K once per product and packed the same way ([`KActs`]).
//! A kernel then multiplies 4 weight rows by 4 activation rows at a time: four
//! `vpdpbusd` steps per block and pair (AVX512-VNNI; `maddubs` + `madd` on AVX2) leave each
//! group's exact integer dot product in its own lane, the groups' scales are applied with one
//! integer multiply, and the block's integer sums (`S`, and `M` for the types with mins) are
//! combined in f32 with [`super::q8_activations::Combine`]'s operations, block after block, as
//! the scalar reference does. The decoded tile is a few hundred KiB per thread, reused from
//! product to product: the stored weights are not repacked, so memory stays that of the file.
//!
//! Integer sums are exact: a group's lane holds at most 16·63·127 (Q6_K plus offset), its
//! scaled value at most 128 times that, and a block's sum stays below 2³¹; on AVX2 the
//! `maddubs` pairs stay below 2·63·127 < 2¹⁵, so they never saturate.

use super::ggml_blocks::{decode, half_at, scale_min_k4};
use super::precision::Isa;
use super::q8_activations::{Combine, quantize_q8_k};
use candle_core::quantized::GgmlDType;
use rayon::prelude::*;

/// Elements of a K-quant block.
pub(super) const QK: usize = 256;
/// Groups of 16 elements per block (the finest scale granularity of any K-quant).
const GROUPS: usize = 16;
/// Weight rows and activation rows of one kernel call.
pub(super) const TILE: usize = 4;
/// The lane of a 16-lane vector of sums that holds group `g`: even groups in lanes 0–7, odd
/// ones in 8–15, so that adding a vector's two halves adds the two groups of each 32-element
/// sub-block (which share their scale in Q4_K and Q5_K).
const fn lane(g: usize) -> usize {
    g / 2 + 8 * (g % 2)
}

/// A block's 256 bytes in element order rearranged into the packed order: element `i` goes to
/// step `(i % 16) / 4` (64 bytes each), lane `lane(i / 16)` (4 bytes each), byte `i % 4`, so
/// that a step's sums of four leave each group in its own lane. Four bytes at a time: a
/// 16 × 4 transpose of 32-bit words.
#[inline]
fn pack_block<T: Copy>(natural: &[T; QK], packed: &mut [T]) {
    for step in 0..4 {
        for group in 0..GROUPS {
            let from = 16 * group + 4 * step;
            let to = 64 * step + 4 * lane(group);
            packed[to..to + 4].copy_from_slice(&natural[from..from + 4]);
        }
    }
}

/// How a K-quant's integer sums are combined: with a min per sub-block (`dmin`, subtracted
/// as `M`), or with signed values stored as unsigned plus an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Q2_K, Q4_K, Q5_K: [`Combine::scale_dmin`]; `paired` when the scales are per 32
    /// elements (Q4_K, Q5_K), so that a block's two halves of lanes add before scaling.
    Mins { paired: bool },
    /// Q3_K (offset 4 = 2²), Q6_K (offset 32 = 2⁵): [`Combine::scale`]; the offset's share,
    /// `2^shift · Σ scale·(sum of 16 activations)`, is subtracted in integers.
    Offset { shift: u32 },
}

impl Kind {
    /// The kind of a K-quant type.
    pub(super) fn of(dtype: GgmlDType) -> Kind {
        match dtype {
            GgmlDType::Q3K => Kind::Offset { shift: 2 },
            GgmlDType::Q6K => Kind::Offset { shift: 5 },
            GgmlDType::Q2K => Kind::Mins { paired: false },
            _ => Kind::Mins { paired: true },
        }
    }
}

/// Weight rows decoded for the kernels; rows past the real ones (to a multiple of [`TILE`])
/// are zero.
#[derive(Default)]
pub(super) struct KTile {
    /// Rows held (a multiple of [`TILE`]).
    pub rows: usize,
    /// Blocks per row.
    pub blocks: usize,
    /// `[row][block][256]`, packed ([`pack_block`]), unsigned.
    pub q: Vec<u8>,
    /// `[row][block][16]`: the scale of each group of 16, in lane order ([`lane`]).
    pub scales: Vec<i32>,
    /// `[row][block][16]`: per group, the min (kind `Mins`) or the scale (kind `Offset`).
    pub corr: Vec<i16>,
    /// `[block][row]`: the block's scale `d`, and its `dmin` (kind `Mins`).
    pub d: Vec<f32>,
    pub dmin: Vec<f32>,
}

impl KTile {
    /// Decodes rows `rows` of `bytes` (rows of `blocks` blocks of `dtype`).
    pub(super) fn fill(
        &mut self,
        dtype: GgmlDType,
        bytes: &[u8],
        blocks: usize,
        rows: std::ops::Range<usize>,
    ) {
        let held = rows.len().div_ceil(TILE) * TILE;
        let size = dtype.type_size();
        let offset = match Kind::of(dtype) {
            Kind::Mins { .. } => 0,
            Kind::Offset { shift } => 1 << shift,
        };
        self.rows = held;
        self.blocks = blocks;
        self.q.clear();
        self.q.resize(held * blocks * QK, 0);
        self.scales.clear();
        self.scales.resize(held * blocks * GROUPS, 0);
        self.corr.clear();
        self.corr.resize(held * blocks * GROUPS, 0);
        self.d.clear();
        self.d.resize(blocks * held, 0.0);
        self.dmin.clear();
        self.dmin.resize(blocks * held, 0.0);
        let row_bytes = blocks * size;
        for (r, row) in rows.enumerate() {
            let row = &bytes[row * row_bytes..(row + 1) * row_bytes];
            for (b, block) in row.chunks_exact(size).enumerate() {
                let at = r * blocks + b;
                let q = &mut self.q[at * QK..(at + 1) * QK];
                let scales = &mut self.scales[at * GROUPS..(at + 1) * GROUPS];
                let corr = &mut self.corr[at * GROUPS..(at + 1) * GROUPS];
                let (d, dmin) = match dtype {
                    GgmlDType::Q4K => unpack_q4_k(block, q, scales, corr),
                    GgmlDType::Q6K => unpack_q6_k(block, q, scales, corr),
                    _ => unpack_decoded(dtype, offset, block, q, scales, corr),
                };
                self.d[b * held + r] = d;
                self.dmin[b * held + r] = dmin;
            }
        }
    }
}

/// Any K-quant block through the scalar reference's [`decode`]: its values (plus `offset`)
/// packed, the scales and corrections of [`KTile`]; returns `(d, dmin)`.
fn unpack_decoded(
    dtype: GgmlDType,
    offset: i32,
    block: &[u8],
    q: &mut [u8],
    scales: &mut [i32],
    corr: &mut [i16],
) -> (f32, f32) {
    let w = decode(dtype, block);
    let natural: [u8; QK] = std::array::from_fn(|i| (w.q[i] + offset) as u8);
    pack_block(&natural, q);
    for g in 0..GROUPS {
        scales[lane(g)] = w.scales[g];
        corr[g] = if offset == 0 { w.mins[g] } else { w.scales[g] } as i16;
    }
    (w.d, w.m)
}

/// Q4_K (d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles: 64 elements per
/// 32 bytes, low nibbles first) unpacked directly, as [`unpack_decoded`] would.
fn unpack_q4_k(block: &[u8], q: &mut [u8], scales: &mut [i32], corr: &mut [i16]) -> (f32, f32) {
    let qs = &block[16..144];
    let mut natural = [0u8; QK];
    for g in 0..4 {
        for l in 0..32 {
            let byte = qs[32 * g + l];
            natural[64 * g + l] = byte & 0xF;
            natural[64 * g + 32 + l] = byte >> 4;
        }
    }
    pack_block(&natural, q);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &block[4..16]);
        (scales[lane(2 * j)], scales[lane(2 * j + 1)]) = (sc as i32, sc as i32);
        corr[2 * j..2 * j + 2].fill(m as i16);
    }
    (half_at(block, 0), half_at(block, 2))
}

/// Q6_K (128 bytes of low nibbles, 64 of high bit pairs, 16 signed scales, d) unpacked
/// directly, as [`unpack_decoded`] would (values 0–63: the stored ones, offset 32 included).
fn unpack_q6_k(block: &[u8], q: &mut [u8], scales: &mut [i32], corr: &mut [i16]) -> (f32, f32) {
    let (ql, qh) = (&block[0..128], &block[128..192]);
    let mut natural = [0u8; QK];
    for half in 0..2 {
        for l in 0..32 {
            let (a, b) = (ql[64 * half + l], ql[64 * half + 32 + l]);
            let h = qh[32 * half + l];
            let at = 128 * half + l;
            natural[at] = (a & 0xF) | ((h & 3) << 4);
            natural[at + 32] = (b & 0xF) | (((h >> 2) & 3) << 4);
            natural[at + 64] = (a >> 4) | (((h >> 4) & 3) << 4);
            natural[at + 96] = (b >> 4) | (((h >> 6) & 3) << 4);
        }
    }
    pack_block(&natural, q);
    for (g, &s) in block[192..208].iter().enumerate() {
        scales[lane(g)] = s as i8 as i32;
        corr[g] = s as i8 as i16;
    }
    (half_at(block, 208), 0.0)
}

/// Activation rows quantized to q8_K and packed for the kernels; rows past the real ones
/// (to a multiple of [`TILE`]) are zero.
pub(super) struct KActs {
    /// Rows held (a multiple of [`TILE`]).
    pub rows: usize,
    /// Blocks per row.
    pub blocks: usize,
    /// `[row][block][256]`, packed ([`pack_block`]).
    pub q: Vec<i8>,
    /// `[row][block][16]`: the sums of each group of 16 quantized activations.
    pub bsums: Vec<i16>,
    /// `[block][row]`: the blocks' scales.
    pub d: Vec<f32>,
}

impl KActs {
    /// The rows of `x` (`cols` wide) quantized to q8_K ([`quantize_q8_k`]) and packed, in
    /// parallel over rows.
    pub(super) fn quantize(x: &[f32], cols: usize) -> Self {
        let n = x.len() / cols;
        let blocks = cols / QK;
        let held = n.div_ceil(TILE) * TILE;
        let mut q = vec![0i8; held * blocks * QK];
        let mut bsums = vec![0i16; held * blocks * GROUPS];
        let mut d_rows = vec![0.0f32; held * blocks];
        q.par_chunks_mut(blocks * QK)
            .zip(bsums.par_chunks_mut(blocks * GROUPS))
            .zip(d_rows.par_chunks_mut(blocks))
            .zip(x.par_chunks_exact(cols))
            .for_each(|(((q, sums), d), xs)| {
                for (b, a) in quantize_q8_k(xs).iter().enumerate() {
                    pack_block(&a.qs, &mut q[b * QK..(b + 1) * QK]);
                    sums[b * GROUPS..(b + 1) * GROUPS].copy_from_slice(&a.bsums);
                    d[b] = a.d;
                }
            });
        let mut d = vec![0.0f32; blocks * held];
        for (r, row) in d_rows.chunks_exact(blocks.max(1)).enumerate() {
            for (b, &v) in row.iter().enumerate() {
                d[b * held + r] = v;
            }
        }
        KActs {
            rows: held,
            blocks,
            q,
            bsums,
            d,
        }
    }
}

/// Weight rows `r0..r0 + 4` of `w` times activation rows `c0..c0 + 4` of `a`: `out[4r + c]`.
/// `false` (nothing written) when `isa` has no kernel.
pub(super) fn tile_dot(
    isa: Isa,
    kind: Kind,
    w: &KTile,
    r0: usize,
    a: &KActs,
    c0: usize,
    out: &mut [f32; TILE * TILE],
) -> bool {
    assert!(r0 + TILE <= w.rows && c0 + TILE <= a.rows && w.blocks == a.blocks);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the ISA was detected on this CPU ([`Isa::detect`]; the tests call only
        // ISAs they detected), and the rows and blocks read were bounds-checked above.
        unsafe {
            match (isa, kind) {
                (Isa::Vnni, Kind::Mins { paired: true }) => {
                    x86::vnni_4x4::<true, true>(w, r0, a, c0, 0, out)
                }
                (Isa::Vnni, Kind::Mins { paired: false }) => {
                    x86::vnni_4x4::<true, false>(w, r0, a, c0, 0, out)
                }
                (Isa::Vnni, Kind::Offset { shift }) => {
                    x86::vnni_4x4::<false, false>(w, r0, a, c0, shift, out)
                }
                (Isa::Avx2, _) => x86::avx2_4x4(kind, w, r0, a, c0, out),
                (Isa::Scalar, _) => return false,
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, kind, w, r0, a, c0, out);
        false
    }
}

/// The f32 step of one block for one (weight row, activation row) pair: the scalar
/// reference's [`Combine`] for `kind`.
#[inline(always)]
fn combine(kind: Kind, acc: f32, d: f32, dmin: f32, d_a: f32, s: i32, m: i32) -> f32 {
    match kind {
        Kind::Mins { .. } => Combine::scale_dmin(acc, d, dmin, d_a, s, m),
        Kind::Offset { .. } => Combine::scale(acc, d, d_a, s),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// The sums of eight vectors of eight i32 lanes, as one vector `[Σv0, …, Σv7]`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn sum8(v: &[__m256i]) -> __m256i {
        let a = _mm256_hadd_epi32(v[0], v[1]);
        let b = _mm256_hadd_epi32(v[2], v[3]);
        let c = _mm256_hadd_epi32(v[4], v[5]);
        let d = _mm256_hadd_epi32(v[6], v[7]);
        let ab = _mm256_hadd_epi32(a, b);
        let cd = _mm256_hadd_epi32(c, d);
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(ab, cd),
            _mm256_permute2x128_si256::<0x31>(ab, cd),
        )
    }

    /// 4 weight rows × 4 activation rows with AVX512-VNNI: per block and pair, four
    /// 64-byte `vpdpbusd` steps, the groups' scales by one `vpmulld` and the two halves
    /// added (`PAIRED`: added first, then scaled);
    /// then the 16 pairs' sums reduced together and combined in f32 in eight-lane vectors
    /// (lane `4(r % 2) + c`, rows 0–1 in the first vector, 2–3 in the second), with the
    /// scalar reference's operations.
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn vnni_4x4<const MINS: bool, const PAIRED: bool>(
        w: &KTile,
        r0: usize,
        a: &KActs,
        c0: usize,
        shift: u32,
        out: &mut [f32; TILE * TILE],
    ) {
        let blocks = w.blocks;
        let mut acc_f = [_mm256_setzero_ps(); 2];
        let row_of = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let row_hi = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
        let shift = _mm_cvtsi32_si128(shift as i32);
        for b in 0..blocks {
            // SAFETY (pointers and loads below): rows r0..r0+4 and c0..c0+4 exist (checked
            // by `tile_dot`), each holding `blocks` packed blocks of 256 bytes, 16 scales
            // and 16 corrections; `d`/`dmin` hold `blocks × rows` values.
            let wq: [*const u8; TILE] =
                std::array::from_fn(|r| unsafe { w.q.as_ptr().add(((r0 + r) * blocks + b) * QK) });
            let aq: [*const i8; TILE] =
                std::array::from_fn(|c| unsafe { a.q.as_ptr().add(((c0 + c) * blocks + b) * QK) });
            let mut acc = [[_mm512_setzero_si512(); TILE]; TILE];
            for step in 0..4 {
                let wv: [__m512i; TILE] = std::array::from_fn(|r| unsafe {
                    _mm512_loadu_si512(wq[r].add(64 * step).cast())
                });
                for c in 0..TILE {
                    let av = unsafe { _mm512_loadu_si512(aq[c].add(64 * step).cast()) };
                    for r in 0..TILE {
                        acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], wv[r], av);
                    }
                }
            }
            let mut s = [_mm256_setzero_si256(); TILE * TILE];
            let mut m = [_mm256_setzero_si256(); TILE * TILE];
            for r in 0..TILE {
                let at = ((r0 + r) * blocks + b) * GROUPS;
                let (sc, corr) = unsafe {
                    (
                        _mm512_loadu_si512(w.scales.as_ptr().add(at).cast()),
                        _mm256_loadu_si256(w.corr.as_ptr().add(at).cast()),
                    )
                };
                let add_halves = |v| {
                    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
                };
                for c in 0..TILE {
                    // Paired scales: the halves hold the two groups of each sub-block, which
                    // share the scale in lanes j and j + 8; add first, scale eight lanes.
                    let halves = if PAIRED {
                        _mm256_mullo_epi32(add_halves(acc[r][c]), _mm512_castsi512_si256(sc))
                    } else {
                        add_halves(_mm512_mullo_epi32(acc[r][c], sc))
                    };
                    let bsums = unsafe {
                        _mm256_loadu_si256(
                            a.bsums
                                .as_ptr()
                                .add(((c0 + c) * blocks + b) * GROUPS)
                                .cast(),
                        )
                    };
                    let corr = _mm256_madd_epi16(corr, bsums);
                    if MINS {
                        s[4 * r + c] = halves;
                        m[4 * r + c] = corr;
                    } else {
                        s[4 * r + c] = _mm256_sub_epi32(halves, _mm256_sll_epi32(corr, shift));
                    }
                }
            }
            let (d, d_a) = unsafe {
                (
                    _mm_loadu_ps(w.d.as_ptr().add(b * w.rows + r0)),
                    _mm_loadu_ps(a.d.as_ptr().add(b * a.rows + c0)),
                )
            };
            let d_a = _mm256_set_m128(d_a, d_a);
            let d = _mm256_castps128_ps256(d);
            let dmin = if MINS {
                _mm256_castps128_ps256(unsafe {
                    _mm_loadu_ps(w.dmin.as_ptr().add(b * w.rows + r0))
                })
            } else {
                _mm256_setzero_ps()
            };
            for (half, rows) in [row_of, row_hi].into_iter().enumerate() {
                let sums = _mm256_cvtepi32_ps(sum8(&s[8 * half..8 * half + 8]));
                let d_w = _mm256_permutevar8x32_ps(d, rows);
                let t = if MINS {
                    let mins = _mm256_cvtepi32_ps(sum8(&m[8 * half..8 * half + 8]));
                    let dmin_w = _mm256_permutevar8x32_ps(dmin, rows);
                    // Combine::scale_dmin: (d_a·d_w)·S − (d_a·dmin_w)·M.
                    _mm256_sub_ps(
                        _mm256_mul_ps(_mm256_mul_ps(d_a, d_w), sums),
                        _mm256_mul_ps(_mm256_mul_ps(d_a, dmin_w), mins),
                    )
                } else {
                    // Combine::scale: (d_w·d_a)·S.
                    _mm256_mul_ps(_mm256_mul_ps(d_w, d_a), sums)
                };
                acc_f[half] = _mm256_add_ps(acc_f[half], t);
            }
        }
        // SAFETY: 2 × 8 f32 into a 16 × f32 array.
        unsafe {
            _mm256_storeu_ps(out.as_mut_ptr(), acc_f[0]);
            _mm256_storeu_ps(out.as_mut_ptr().add(8), acc_f[1]);
        }
    }

    /// 4 × 4 rows with AVX2, as pairs of 2 × 2: per block and pair, the 64-byte steps as two
    /// 32-byte halves (`maddubs` + `madd` for the u8 × i8 sums of four), the scales by
    /// `vpmulld`, the sums reduced per pair and combined with [`combine`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2_4x4(
        kind: Kind,
        w: &KTile,
        r0: usize,
        a: &KActs,
        c0: usize,
        out: &mut [f32; TILE * TILE],
    ) {
        let blocks = w.blocks;
        let ones = _mm256_set1_epi16(1);
        let shift = match kind {
            Kind::Mins { .. } => 0,
            Kind::Offset { shift } => shift,
        };
        let shift = _mm_cvtsi32_si128(shift as i32);
        for (rr, cc) in [(0, 0), (0, 2), (2, 0), (2, 2)] {
            let mut acc_f = [0.0f32; 4];
            for b in 0..blocks {
                // SAFETY (pointers and loads below): as in `vnni_4x4`.
                let wq: [*const u8; 2] = std::array::from_fn(|r| unsafe {
                    w.q.as_ptr().add(((r0 + rr + r) * blocks + b) * QK)
                });
                let aq: [*const i8; 2] = std::array::from_fn(|c| unsafe {
                    a.q.as_ptr().add(((c0 + cc + c) * blocks + b) * QK)
                });
                // acc[half][pair]: lanes 0–7 (the even groups) and 8–15 (the odd ones).
                let mut acc = [[_mm256_setzero_si256(); 4]; 2];
                for step in 0..4 {
                    for (half, acc) in acc.iter_mut().enumerate() {
                        let at = 64 * step + 32 * half;
                        let wv: [__m256i; 2] = std::array::from_fn(|r| unsafe {
                            _mm256_loadu_si256(wq[r].add(at).cast())
                        });
                        for c in 0..2 {
                            let av = unsafe { _mm256_loadu_si256(aq[c].add(at).cast()) };
                            for r in 0..2 {
                                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[r], av), ones);
                                acc[2 * r + c] = _mm256_add_epi32(acc[2 * r + c], dot);
                            }
                        }
                    }
                }
                let mut v = [_mm256_setzero_si256(); 8];
                for r in 0..2 {
                    let at = ((r0 + rr + r) * blocks + b) * GROUPS;
                    let (sc_lo, sc_hi, corr) = unsafe {
                        (
                            _mm256_loadu_si256(w.scales.as_ptr().add(at).cast()),
                            _mm256_loadu_si256(w.scales.as_ptr().add(at + 8).cast()),
                            _mm256_loadu_si256(w.corr.as_ptr().add(at).cast()),
                        )
                    };
                    for c in 0..2 {
                        let p = 2 * r + c;
                        let scaled = _mm256_add_epi32(
                            _mm256_mullo_epi32(acc[0][p], sc_lo),
                            _mm256_mullo_epi32(acc[1][p], sc_hi),
                        );
                        let bsums = unsafe {
                            _mm256_loadu_si256(
                                a.bsums
                                    .as_ptr()
                                    .add(((c0 + cc + c) * blocks + b) * GROUPS)
                                    .cast(),
                            )
                        };
                        let corr = _mm256_madd_epi16(corr, bsums);
                        match kind {
                            Kind::Mins { .. } => (v[2 * p], v[2 * p + 1]) = (scaled, corr),
                            Kind::Offset { .. } => {
                                v[2 * p] = _mm256_sub_epi32(scaled, _mm256_sll_epi32(corr, shift))
                            }
                        }
                    }
                }
                let mut sums = [0i32; 8];
                // SAFETY: 8 × i32 into an 8 × i32 array.
                unsafe { _mm256_storeu_si256(sums.as_mut_ptr().cast(), sum8(&v)) };
                for r in 0..2 {
                    let row = b * w.rows + r0 + rr + r;
                    for c in 0..2 {
                        let p = 2 * r + c;
                        let d_a = a.d[b * a.rows + c0 + cc + c];
                        acc_f[p] = combine(
                            kind,
                            acc_f[p],
                            w.d[row],
                            w.dmin[row],
                            d_a,
                            sums[2 * p],
                            sums[2 * p + 1],
                        );
                    }
                }
            }
            for r in 0..2 {
                for c in 0..2 {
                    out[4 * (rr + r) + cc + c] = acc_f[2 * r + c];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn packing_puts_each_group_in_its_own_lane() {
        let natural: [u16; QK] = std::array::from_fn(|i| i as u16);
        let mut packed = [0u16; QK];
        pack_block(&natural, &mut packed);
        for (p, &i) in packed.iter().enumerate() {
            let i = i as usize;
            let group = i / 16;
            assert_eq!(
                p,
                (i % 16) / 4 * 64 + 4 * lane(group) + i % 4,
                "element {i}"
            );
            // Lane (p % 64) / 4 of a step is element i's group; a sub-block's two groups lie
            // in lanes j and j + 8.
            assert_eq!((p % 64) / 4, group / 2 + 8 * (group % 2));
        }
    }

    /// The direct Q4_K and Q6_K unpacking gives what unpacking through the scalar
    /// reference's `decode` gives, on random blocks.
    #[test]
    fn direct_unpacking_equals_the_decoded_blocks() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
            let offset = match Kind::of(dtype) {
                Kind::Mins { .. } => 0,
                Kind::Offset { shift } => 1 << shift,
            };
            for _ in 0..200 {
                let block: Vec<u8> = (0..dtype.type_size()).map(|_| rng.random()).collect();
                let unpack = |direct: bool| {
                    let (mut q, mut sc, mut corr) = ([0u8; QK], [0i32; GROUPS], [0i16; GROUPS]);
                    let d = match (direct, dtype) {
                        (true, GgmlDType::Q4K) => unpack_q4_k(&block, &mut q, &mut sc, &mut corr),
                        (true, _) => unpack_q6_k(&block, &mut q, &mut sc, &mut corr),
                        (false, _) => {
                            unpack_decoded(dtype, offset, &block, &mut q, &mut sc, &mut corr)
                        }
                    };
                    (q, sc, corr, d.0.to_bits(), d.1.to_bits())
                };
                assert_eq!(unpack(true), unpack(false), "{dtype:?}");
            }
        }
    }
}
