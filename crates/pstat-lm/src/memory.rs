//! Whether a model fits in memory, checked from its header before any weight is read: a
//! model that cannot fit is refused with one line saying how much it needs and how much there
//! is, instead of the machine swapping or the process being killed half-way through a load.

use crate::gguf::{GgufFile, ModelConfig};

// The runtime's batch sizes live here, with the estimate of the memory they take.
/// Rows (tokens) per forward pass. Large enough to keep gemm efficient, small enough that a
/// batch's activations stay in the tens of megabytes.
pub(crate) const ROWS_PER_BATCH: usize = 2048;
/// Rows per LM-head product: Gemma 3's head is 262k wide, 1 MiB of logits per row.
pub(crate) const ROWS_PER_HEAD: usize = 64;

/// Bytes a loaded model needs, by what needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Weight matrices in their stored types, vectors (norms, biases) as f32.
    pub weights: u64,
    /// Keys and values of every layer for a shared prefix and a batch of the same length.
    pub kv_cache: u64,
    /// One forward batch's activations, attention scores, logits and dequantized tiles.
    pub activations: u64,
}

impl MemoryEstimate {
    /// Estimates what running `file` (whose config is `config`) takes.
    pub fn of(file: &GgufFile, config: &ModelConfig) -> Self {
        let weights = file
            .content()
            .tensor_infos
            .values()
            .map(|info| {
                let elements = info.shape.elem_count() as u64;
                if info.shape.rank() == 1 {
                    elements * 4
                } else {
                    elements / info.ggml_dtype.block_size() as u64
                        * info.ggml_dtype.type_size() as u64
                }
            })
            .sum();
        let c = config;
        let rows = ROWS_PER_BATCH as u64;
        let positions = (2 * ROWS_PER_BATCH).min(c.context_length.max(1)) as u64;
        let kv_width = (c.n_kv_heads * (c.head_dim + c.value_head_dim)) as u64;
        let kv_cache = c.n_layers as u64 * positions * kv_width * 4;
        let qkv_width =
            ((c.n_heads + c.n_kv_heads) * c.head_dim + c.n_kv_heads * c.value_head_dim) as u64;
        // A block holds the residual, its normed copy, the fused q/k/v product and its split,
        // the heads' output, the fused gate/up product and the gated product at once.
        let per_row = 4 * c.hidden as u64 + 2 * qkv_width + 3 * c.ffn as u64;
        let threads = rayon::current_num_threads() as u64;
        // Each attention task scores up to 256 queries against every visible key.
        let scores = threads * 256 * positions;
        let head = (ROWS_PER_HEAD * c.vocab_size) as u64;
        let tiles = threads * (2 << 20);
        let activations = (rows * per_row + scores + head) * 4 + tiles;
        Self {
            weights,
            kv_cache,
            activations,
        }
    }

    /// Weights, KV cache and activations together, in bytes.
    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.activations
    }

    /// An error naming the parts when the estimate exceeds `available` bytes.
    pub fn check(&self, available: u64) -> Result<(), OutOfMemory> {
        if self.total() <= available {
            return Ok(());
        }
        Err(OutOfMemory(format!(
            "needs about {} (weights {} + KV cache {} + activations {}) but only {} of memory is available (MemAvailable in /proc/meminfo)",
            gib(self.total()),
            gib(self.weights),
            gib(self.kv_cache),
            gib(self.activations),
            gib(available)
        )))
    }
}

/// A model that would not fit in the memory available; the message gives the estimate's parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OutOfMemory(pub String);

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// `MemAvailable` of /proc/meminfo in bytes (memory the kernel can hand out without swapping);
/// `None` where there is no such file (not Linux) or it cannot be read.
pub fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let kib: u64 = fields.next()?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_kib() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn a_model_too_large_is_refused_with_its_needs() {
        let estimate = MemoryEstimate {
            weights: 5 << 30,
            kv_cache: 1 << 29,
            activations: 1 << 28,
        };
        assert!(estimate.check(6 << 30).is_ok());
        let err = estimate.check(4 << 30).unwrap_err().0;
        assert_eq!(
            err,
            "needs about 5.75 GiB (weights 5.00 GiB + KV cache 0.50 GiB + activations 0.25 GiB) but only 4.00 GiB of memory is available (MemAvailable in /proc/meminfo)"
        );
    }
}
