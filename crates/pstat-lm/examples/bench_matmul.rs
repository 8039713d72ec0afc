//! Products with one block's weight matrices of a GGUF file, f32 against q8: multiply-adds per
//! second of `model::ops::linear` for each matrix, the kernels alone (no attention, norms or
//! batching), to see how far each precision is from its arithmetic peak.
//!
//! cargo run --release -p pstat-lm --example bench_matmul -- --model PATH [--threads 2]
//!     [--rows 512] [--layer 0] [--reps 3]

use pstat_lm::model::Loader;
use pstat_lm::model::ops::linear;
use pstat_lm::weights::GgufTensors;
use pstat_lm::{GgufFile, Precision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (mut model, mut threads, mut rows, mut layer, mut reps) =
        (None, 2usize, 512usize, 0usize, 3usize);
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse::<usize>().expect("a number");
        match pair[0].as_str() {
            "--model" => model = Some(value.clone()),
            "--threads" => threads = number(),
            "--rows" => rows = number(),
            "--layer" => layer = number(),
            "--reps" => reps = number(),
            other => panic!("unknown argument {other}"),
        }
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon pool");
    let path = pstat_lm::registry::resolve(&model.expect("--model PATH")).expect("model resolves");
    let file = GgufFile::open(&path).unwrap();
    let config = file.config().unwrap();
    let mut tensors = GgufTensors::new(&file).unwrap();
    let mut loader = Loader::new(&mut tensors);
    let (h, f) = (config.hidden, config.ffn);
    let kv = config.n_kv_heads * config.head_dim;
    let shapes = [
        ("attn_q", config.n_heads * config.head_dim, h),
        ("attn_k", kv, h),
        ("attn_v", kv, h),
        ("attn_output", h, config.n_heads * config.head_dim),
        ("ffn_gate", f, h),
        ("ffn_up", f, h),
        ("ffn_down", h, f),
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    println!("{rows} activation rows, {threads} threads, layer {layer}");
    let mut totals = [0.0f64; 2];
    for (name, out, cols) in shapes {
        let m = loader
            .matrix(&format!("blk.{layer}.{name}.weight"), out, cols)
            .unwrap();
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let macs = (rows * out * cols) as f64;
        let mut line = format!("{name:>12} {out:>5}×{cols:<5} {:?}", m.dtypes());
        for (slot, precision) in [Precision::F32, Precision::Q8].into_iter().enumerate() {
            let m = m.clone().with_precision(precision);
            let mut best = f64::MAX;
            for _ in 0..reps {
                let start = Instant::now();
                std::hint::black_box(linear(&x, rows, &m));
                best = best.min(start.elapsed().as_secs_f64());
            }
            totals[slot] += best;
            line += &format!("  {precision}: {:.1} GMAC/s", macs / best / 1e9);
        }
        println!("{line}");
    }
    println!(
        "block total: f32 {:.3} s, q8 {:.3} s, q8 speed-up {:.2}×",
        totals[0],
        totals[1],
        totals[0] / totals[1]
    );
}
