#!/usr/bin/env python3
"""Random-weight GGUF models with the real shapes of Llama-3.2-1B and Llama-3.2-3B, for the
speed and memory benchmark (crates/pstat-lm/examples/bench.rs). Speed does not depend on the
weights' values, only on shapes and storage types, so the weights are random (normal, std
0.02; norms 1) and the vocabulary is Llama 3's own, copied from llama.cpp's vocab-only
ggml-vocab-llama-bpe.gguf. The F16 file is written tensor by tensor (never held in memory
whole) and then quantized to Q4_K_M by llama.cpp's own quantizer (llama_model_quantize).

Needs numpy, the gguf package (llama.cpp's gguf-py) and llama_cpp (llama-cpp-python):

  python tools/bench/llama_shaped.py --shape 1b --vocab .../ggml-vocab-llama-bpe.gguf \\
      --out /tmp/llama-1b-shaped   # writes ...-f16.gguf and ...-q4_k_m.gguf
"""
import argparse
import ctypes
import math
from pathlib import Path

import gguf
import numpy as np

# From the models' config.json (meta-llama/Llama-3.2-1B and -3B).
SHAPES = {
    "1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192),
    "3b": dict(hidden=3072, layers=28, heads=24, kv_heads=8, ffn=8192),
}
VOCAB = 128256
CONTEXT = 131072
ROPE_THETA = 500000.0
# rope_scaling of both configs: {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
# "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
ROPE_SCALING = dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_context=8192)
RMS_EPS = 1e-5


def llama3_rope_factors(head_dim):
    """rope_freqs.weight as llama.cpp's converter writes it for llama3 rope scaling."""
    s = ROPE_SCALING
    freqs = 1.0 / ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    low_wavelen = s["original_context"] / s["low_freq_factor"]
    high_wavelen = s["original_context"] / s["high_freq_factor"]
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(s["factor"])
        else:
            smooth = (s["original_context"] / wavelen - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"])
            factors.append(1.0 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def copy_vocab(writer, vocab_path):
    reader = gguf.GGUFReader(vocab_path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]) for i in field.data]

    def scalar(key):
        field = reader.fields[key]
        return field.parts[field.data[0]][0]

    tokens = strings("tokenizer.ggml.tokens")
    assert len(tokens) == VOCAB, f"{vocab_path}: {len(tokens)} tokens, expected {VOCAB}"
    writer.add_tokenizer_model(bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode())
    writer.add_tokenizer_pre(bytes(reader.fields["tokenizer.ggml.pre"].parts[-1]).decode())
    writer.add_token_list(tokens)
    types = reader.fields["tokenizer.ggml.token_type"]
    writer.add_token_types([int(types.parts[i][0]) for i in types.data])
    writer.add_token_merges(strings("tokenizer.ggml.merges"))
    writer.add_bos_token_id(int(scalar("tokenizer.ggml.bos_token_id")))
    writer.add_eos_token_id(int(scalar("tokenizer.ggml.eos_token_id")))


def write_f16(shape, vocab_path, path, seed):
    s = SHAPES[shape]
    h, f, heads, kv = s["hidden"], s["ffn"], s["heads"], s["kv_heads"]
    d = h // heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"random Llama-3.2-{shape.upper()}-shaped")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(h)
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(f)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_rope_dimension_count(d)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(VOCAB)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    copy_vocab(writer, vocab_path)
    # Both models tie the LM head to the embeddings (no output.weight).
    tensors = [("token_embd.weight", (VOCAB, h)), ("output_norm.weight", (h,)),
               ("rope_freqs.weight", (d // 2,))]
    for i in range(s["layers"]):
        tensors += [
            (f"blk.{i}.attn_norm.weight", (h,)),
            (f"blk.{i}.attn_q.weight", (heads * d, h)),
            (f"blk.{i}.attn_k.weight", (kv * d, h)),
            (f"blk.{i}.attn_v.weight", (kv * d, h)),
            (f"blk.{i}.attn_output.weight", (h, heads * d)),
            (f"blk.{i}.ffn_norm.weight", (h,)),
            (f"blk.{i}.ffn_gate.weight", (f, h)),
            (f"blk.{i}.ffn_up.weight", (f, h)),
            (f"blk.{i}.ffn_down.weight", (h, f)),
        ]
    # Vectors stay F32 (as the converter keeps them); matrices are F16.
    dtype = lambda shape: np.float32 if len(shape) == 1 else np.float16
    for name, shape in tensors:
        writer.add_tensor_info(name, shape, np.dtype(dtype(shape)),
                               int(np.prod(shape)) * np.dtype(dtype(shape)).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for name, shape in tensors:
        if name == "rope_freqs.weight":
            data = llama3_rope_factors(d)
        elif len(shape) == 1:
            data = np.ones(shape, dtype=np.float32)
        else:
            data = np.empty(shape, dtype=np.float16)
            for r in range(0, shape[0], 4096):  # bounded f32 temporaries
                block = rng.standard_normal((min(4096, shape[0] - r), shape[1]), dtype=np.float32)
                data[r:r + block.shape[0]] = block * 0.02
        writer.write_tensor_data(data)
    writer.close()


def quantize_q4_k_m(src, dst, threads):
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed ({rc}) on {src}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--vocab", required=True, help="llama.cpp's models/ggml-vocab-llama-bpe.gguf")
    ap.add_argument("--out", required=True, help="path prefix of the two GGUF files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    f16 = Path(f"{args.out}-f16.gguf")
    q4 = Path(f"{args.out}-q4_k_m.gguf")
    if not f16.exists():
        write_f16(args.shape, args.vocab, f16, args.seed)
    quantize_q4_k_m(f16, q4, args.threads)
    print(q4)


if __name__ == "__main__":
    main()
