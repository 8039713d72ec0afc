//! The two sublayers every supported decoder block is made of: grouped-query self-attention
//! with RoPE and a gated MLP. Architecture files wire them (norm placement, options).

use super::attention::{AttentionShape, LayerKv, attend};
use super::ops::{GatedActivation, Matrix, RopeStyle, gated, linear, rms_norm, rows_of};
use super::{BlockContext, Loader, ModelError};
use crate::gguf::ModelConfig;

/// Grouped-query self-attention. q, k and v are one fused projection.
#[derive(Debug)]
pub struct SelfAttention {
    /// `[(n_heads + n_kv_heads)·head_dim + n_kv_heads·value_dim] × hidden`.
    qkv: Matrix,
    /// Biases of the fused projection (Qwen 2).
    qkv_bias: Option<Vec<f32>>,
    /// Per-head RMSNorm weights of q and k, applied before RoPE (Gemma 3).
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    out: Matrix,
    shape: AttentionShape,
    rope: Rope,
    rope_style: RopeStyle,
    eps: f32,
}

/// The rotation of one layer's RoPE: its base and position scale (sliding-window layers of
/// Gemma 2/3 may differ from the global ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    /// Frequency base θ.
    pub base: f32,
    /// Factor applied to positions before rotation (1 for none).
    pub freq_scale: f32,
}

/// What differs between architectures' attention layers.
pub struct AttentionOptions {
    /// Whether the q/k/v projections have biases (Qwen2).
    pub biases: bool,
    /// Whether queries and keys are RMS-normed per head before RoPE (Gemma 3).
    pub qk_norm: bool,
    /// The layer's RoPE.
    pub rope: Rope,
    /// Which dimensions RoPE pairs.
    pub rope_style: RopeStyle,
    /// Sliding window in positions; `None` for full causal attention.
    pub window: Option<usize>,
    /// Soft-cap of the attention logits; `None` for none.
    pub softcap: Option<f32>,
}

impl AttentionOptions {
    /// Full attention with the model's global RoPE, no biases, norms or capping.
    pub fn global(config: &ModelConfig, rope_style: RopeStyle) -> Self {
        Self {
            biases: false,
            qk_norm: false,
            rope: Rope {
                base: config.rope_base,
                freq_scale: config.rope_freq_scale,
            },
            rope_style,
            window: None,
            softcap: None,
        }
    }

    /// Layer `layer` of a model with local (sliding-window) and global layers.
    pub fn local_or_global(config: &ModelConfig, layer: usize, rope_style: RopeStyle) -> Self {
        let mut options = Self::global(config, rope_style);
        if config.is_sliding(layer) {
            options.window = config.sliding_window;
            if let Some(base) = config.rope_base_local {
                options.rope = Rope {
                    base,
                    freq_scale: config.rope_freq_scale_local,
                };
            }
        }
        options
    }
}

impl SelfAttention {
    /// Loads layer `layer`'s attention weights; fails on a missing or misshapen tensor.
    pub fn load(
        loader: &mut Loader,
        layer: usize,
        config: &ModelConfig,
        options: AttentionOptions,
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        let (h, d, dv) = (config.hidden, config.head_dim, config.value_head_dim);
        let q_rows = config.n_heads * d;
        let k_rows = config.n_kv_heads * d;
        let v_rows = config.n_kv_heads * dv;
        let qkv = Matrix::stack(&[
            loader.matrix(&name("attn_q.weight"), q_rows, h)?,
            loader.matrix(&name("attn_k.weight"), k_rows, h)?,
            loader.matrix(&name("attn_v.weight"), v_rows, h)?,
        ]);
        let qkv_bias = if options.biases {
            let mut bias = loader.vector(&name("attn_q.bias"), q_rows)?;
            bias.extend(loader.vector(&name("attn_k.bias"), k_rows)?);
            bias.extend(loader.vector(&name("attn_v.bias"), v_rows)?);
            Some(bias)
        } else {
            None
        };
        let qk_norm = if options.qk_norm {
            Some((
                loader.vector(&name("attn_q_norm.weight"), d)?,
                loader.vector(&name("attn_k_norm.weight"), d)?,
            ))
        } else {
            None
        };
        Ok(Self {
            qkv,
            qkv_bias,
            qk_norm,
            out: loader.matrix(&name("attn_output.weight"), h, config.n_heads * dv)?,
            shape: AttentionShape {
                n_heads: config.n_heads,
                n_kv_heads: config.n_kv_heads,
                head_dim: d,
                value_dim: dv,
                scale: config.attn_scale,
                window: options.window,
                softcap: options.softcap,
            },
            rope: options.rope,
            rope_style: options.rope_style,
            eps: config.rms_eps,
        })
    }

    /// The layer's RoPE.
    pub fn rope(&self) -> Rope {
        self.rope
    }

    /// Attention output `[rows × hidden]` for the normed input `x`, and the keys/values of
    /// these rows (for a prefix cache). With `keep`, the output is only that of the rows
    /// listed: every row is still a query, so the kept rows attend exactly as in the whole
    /// batch, and only the output projection is skipped for the others.
    pub fn forward(
        &self,
        x: &[f32],
        ctx: &BlockContext,
        prefix: Option<&LayerKv>,
        keep: Option<&[usize]>,
    ) -> (Vec<f32>, LayerKv) {
        let n = ctx.positions.len();
        let mut qkv = linear(x, n, &self.qkv);
        if let Some(bias) = &self.qkv_bias {
            for row in qkv.chunks_exact_mut(bias.len()) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
        let s = self.shape;
        let widths = [
            s.n_heads * s.head_dim,
            s.n_kv_heads * s.head_dim,
            s.n_kv_heads * s.value_dim,
        ];
        let [mut q, mut k, v] = split_columns(&qkv, widths);
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            rms_norm(&mut q, q_norm, self.eps);
            rms_norm(&mut k, k_norm, self.eps);
        }
        let rope = ctx.rope(self.rope);
        rope.apply(&mut q, s.head_dim, &ctx.positions, self.rope_style);
        rope.apply(&mut k, s.head_dim, &ctx.positions, self.rope_style);
        let own = LayerKv { k, v };
        let heads = attend(&q, &own, prefix, &ctx.packing, s);
        let out = match keep {
            Some(rows) => linear(
                &rows_of(&heads, s.n_heads * s.value_dim, rows),
                rows.len(),
                &self.out,
            ),
            None => linear(&heads, n, &self.out),
        };
        (out, own)
    }
}

/// Splits rows of concatenated column blocks into one contiguous matrix per block.
fn split_columns<const N: usize>(x: &[f32], widths: [usize; N]) -> [Vec<f32>; N] {
    let total: usize = widths.iter().sum();
    let rows = x.len() / total;
    let mut parts: [Vec<f32>; N] = std::array::from_fn(|i| Vec::with_capacity(rows * widths[i]));
    for row in x.chunks_exact(total) {
        let mut at = 0;
        for (part, &w) in parts.iter_mut().zip(&widths) {
            part.extend_from_slice(&row[at..at + w]);
            at += w;
        }
    }
    parts
}

/// `down(act(gate(x)) · up(x))`, gate and up fused into one projection.
#[derive(Debug)]
pub struct GatedMlp {
    gate_up: Matrix,
    down: Matrix,
    act: GatedActivation,
    ffn: usize,
}

impl GatedMlp {
    /// Loads layer `layer`'s feed-forward weights; fails on a missing or misshapen tensor.
    pub fn load(
        loader: &mut Loader,
        layer: usize,
        config: &ModelConfig,
        act: GatedActivation,
    ) -> Result<Self, ModelError> {
        let name = |t: &str| format!("blk.{layer}.{t}");
        let (h, f) = (config.hidden, config.ffn);
        Ok(Self {
            gate_up: Matrix::stack(&[
                loader.matrix(&name("ffn_gate.weight"), f, h)?,
                loader.matrix(&name("ffn_up.weight"), f, h)?,
            ]),
            down: loader.matrix(&name("ffn_down.weight"), h, f)?,
            act,
            ffn: f,
        })
    }

    /// The output `[n × hidden]` for `n` rows `x` `[n × hidden]`.
    pub fn forward(&self, x: &[f32], n: usize) -> Vec<f32> {
        let gate_up = linear(x, n, &self.gate_up);
        linear(&gated(&gate_up, self.ffn, self.act), n, &self.down)
    }
}
