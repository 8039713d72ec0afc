use pstat_lm::model::attention::{AttentionShape, LayerKv, Packing, attend};
use std::time::Instant;
fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (n_heads, n_kv, hd, p, nseq, t) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    let window = a.get(6).copied().filter(|&w| w > 0);
    let rows = nseq * t;
    let mut s = 1u32;
    let mut r = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / 16777216.0 - 0.5
            })
            .collect()
    };
    let q = r(rows * n_heads * hd);
    let own = LayerKv {
        k: r(rows * n_kv * hd),
        v: r(rows * n_kv * hd),
    };
    let prefix = LayerKv {
        k: r(p * n_kv * hd),
        v: r(p * n_kv * hd),
    };
    let packing = Packing::from_lengths(std::iter::repeat_n(t, nseq));
    let shape = AttentionShape {
        n_heads,
        n_kv_heads: n_kv,
        head_dim: hd,
        value_dim: hd,
        scale: 0.125,
        window,
        softcap: None,
    };
    let vis = window.map_or(p, |w| w.min(p));
    for _ in 0..2 {
        attend(&q, &own, Some(&prefix), &packing, shape);
    }
    let reps = 5;
    let start = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(attend(&q, &own, Some(&prefix), &packing, shape));
    }
    let secs = start.elapsed().as_secs_f64() / reps as f64;
    let macs = (rows * n_heads * hd * 2) as f64 * (vis as f64 + t as f64 / 2.0);
    let out = attend(&q, &own, Some(&prefix), &packing, shape);
    let h: u64 = out.iter().fold(0u64, |a, v| {
        a.wrapping_mul(31).wrapping_add(v.to_bits() as u64)
    });
    println!(
        "{:.2} ms per call, {:.1} GMAC/s hash {h:x}",
        secs * 1e3,
        macs / secs / 1e9
    );
}
#[allow(dead_code)]
fn _x() {}
