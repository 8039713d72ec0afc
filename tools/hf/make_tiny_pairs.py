"""Tiny random-weight models written twice: as a Hugging Face folder (config.json, safetensors,
tokenizer.json, tokenizer_config.json) and as the GGUF that llama.cpp's convert_hf_to_gguf.py
would make of it (tensor names mapped, Llama's q/k rows permuted, Gemma's norms shifted by 1).
pstat must read both to the same logits and hidden states (crates/pstat-lm/tests/hf_folder.rs).

The vocabularies are real ones cut down: the byte tokens and first merges of llama.cpp's
ggml-vocab-llama-bpe.gguf (Llama 3) and ggml-vocab-qwen2.gguf (Qwen 2.5), plus their special
tokens, so the tokenizer.json files are genuine byte-level BPE tokenizers.

Six models cover the formats pstat reads:
  llama    LlamaForCausalLM, bf16, two shards + model.safetensors.index.json, untied head, chat
  qwen2    Qwen2ForCausalLM, f16, model.safetensors, q/k/v biases, tied head, chat
  gemma3   Gemma3ForCausalLM, f32, model.safetensors, local/global layers, tied head, base
  gemma    GemmaForCausalLM, bf16, model.safetensors, tied head, base
  gemma2   Gemma2ForCausalLM, f16, model.safetensors, soft-capped logits, local/global layers
  gemma3mm Gemma3ForConditionalGeneration, bf16, text model under model.language_model.*,
           settings under text_config, plus vision tensors that the GGUF leaves out

Usage: python make_tiny_pairs.py VOCAB_DIR OUT_DIR
  VOCAB_DIR: llama.cpp's models/ folder (in the llama-cpp-python 0.3.36 sdist:
             vendor/llama.cpp/models). Needs numpy and gguf (pip install numpy gguf).
Deterministic: the same inputs give byte-identical files.
"""

import json
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

N_NORMAL = 1024  # byte tokens + merges kept from the real vocabulary

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def real_vocab(vocab_dir, name, specials):
    """The first N_NORMAL tokens of a llama.cpp vocabulary, the merges among them, then
    `specials` (renumbered to follow them)."""
    fields = GGUFReader(Path(vocab_dir) / f"ggml-vocab-{name}.gguf").fields
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in fields["tokenizer.ggml.tokens"].data]
    merges = [bytes(fields["tokenizer.ggml.merges"].parts[i]).decode() for i in fields["tokenizer.ggml.merges"].data]
    kept = tokens[:N_NORMAL]
    known = set(kept)
    kept_merges = []
    for merge in merges:
        a, b = merge.split(" ")
        if a in known and b in known and a + b in known:
            kept_merges.append(merge)
    for s in specials:
        assert s in tokens, s
    return kept + specials, kept_merges


def tokenizer_json(tokens, merges, n_normal, regex, bos, ignore_merges):
    added = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, t in enumerate(tokens) if i >= n_normal
    ]
    if bos is None:
        post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    else:
        bos_id = tokens.index(bos)
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges,
                  "vocab": {t: i for i, t in enumerate(tokens[:n_normal])}, "merges": merges},
    }


def to_bf16_bits(x):
    """f32 → bf16 bit patterns, round to nearest even (what torch's .to(bfloat16) does)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Stored:
    """One tensor in the folder's stored type: its bytes and its exact f32 values."""

    def __init__(self, values, dtype):
        self.shape = values.shape
        self.dtype = dtype
        if dtype == "BF16":
            self.raw = to_bf16_bits(values)
            self.f32 = bf16_bits_to_f32(self.raw)
        elif dtype == "F16":
            self.raw = values.astype(np.float16)
            self.f32 = self.raw.astype(np.float32)
        else:
            self.raw = values.astype(np.float32)
            self.f32 = self.raw


def write_safetensors(path, tensors):
    """The safetensors format: u64 header length, JSON header, tensor bytes in header order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name]
        blob = np.ascontiguousarray(t.raw).astype(t.raw.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def permute(weights, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute, verbatim."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def make(out, vocab_dir, spec, seed):
    rng = np.random.default_rng(seed)
    tokens, merges = real_vocab(vocab_dir, spec["vocab"], spec["specials"])
    n_vocab = len(tokens)
    h, ffn, n_layers = 64, 128, spec["layers"]
    n_head, n_kv, hd = 4, spec["kv_heads"], 16
    arch = spec["arch"]
    name = spec.get("name", arch)
    gemma = arch in ("gemma", "gemma2", "gemma3")
    dtype = spec["dtype"]

    def rand(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    hf = {}
    hf["model.embed_tokens.weight"] = rand(n_vocab, h, scale=1.0)
    if not spec["tied"]:
        hf["lm_head.weight"] = rand(n_vocab, h)
    # Gemma stores norm weights as offsets from 1; the others as the multiplier itself.
    norm = (lambda: rand(h, scale=0.1)) if gemma else (lambda: 1.0 + rand(h, scale=0.1))
    hf["model.norm.weight"] = norm()
    for i in range(n_layers):
        p = f"model.layers.{i}."
        hf[p + "self_attn.q_proj.weight"] = rand(n_head * hd, h)
        hf[p + "self_attn.k_proj.weight"] = rand(n_kv * hd, h)
        hf[p + "self_attn.v_proj.weight"] = rand(n_kv * hd, h)
        hf[p + "self_attn.o_proj.weight"] = rand(h, n_head * hd)
        hf[p + "mlp.gate_proj.weight"] = rand(ffn, h)
        hf[p + "mlp.up_proj.weight"] = rand(ffn, h)
        hf[p + "mlp.down_proj.weight"] = rand(h, ffn)
        hf[p + "input_layernorm.weight"] = norm()
        hf[p + "post_attention_layernorm.weight"] = norm()
        if arch == "qwen2":
            for t, rows in (("q", n_head * hd), ("k", n_kv * hd), ("v", n_kv * hd)):
                hf[p + f"self_attn.{t}_proj.bias"] = rand(rows, scale=0.5)
        if arch in ("gemma2", "gemma3"):
            hf[p + "pre_feedforward_layernorm.weight"] = norm()
            hf[p + "post_feedforward_layernorm.weight"] = norm()
        if arch == "gemma3":
            hf[p + "self_attn.q_norm.weight"] = rand(hd, scale=0.1)
            hf[p + "self_attn.k_norm.weight"] = rand(hd, scale=0.1)
    prefix = spec.get("text_prefix")
    if prefix is not None:
        # The multimodal layout: the language model under `prefix`, next to vision tensors
        # that a text-only reader must leave alone.
        hf = {(prefix + k[len("model."):] if k.startswith("model.") else k): v for k, v in hf.items()}
        hf["model.vision_tower.vision_model.embeddings.patch_embedding.weight"] = rand(8, 3, 2, 2)
        hf["model.multi_modal_projector.mm_input_projection_weight"] = rand(8, h)
    stored = {k: Stored(v, dtype) for k, v in hf.items()}

    folder = out / name / "hf"
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(stored)
    if spec["shards"] == 1:
        write_safetensors(folder / "model.safetensors", stored)
    else:
        parts = [names[k::spec["shards"]] for k in range(spec["shards"])]
        weight_map = {}
        for k, part in enumerate(parts):
            file = f"model-{k + 1:05d}-of-{len(parts):05d}.safetensors"
            write_safetensors(folder / file, {n: stored[n] for n in part})
            weight_map.update({n: file for n in part})
        index = {"metadata": {"total_size": sum(s.raw.nbytes for s in stored.values())},
                 "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")

    bos = spec["bos"]
    config = json.loads(json.dumps(spec["config"]))  # a deep copy: text_config is filled in
    text = config.setdefault("text_config", {}) if prefix is not None else config
    text.update({
        "hidden_size": h, "intermediate_size": ffn, "num_hidden_layers": n_layers,
        "num_attention_heads": n_head, "num_key_value_heads": n_kv, "head_dim": hd,
        "vocab_size": n_vocab, "tie_word_embeddings": spec["tied"], "max_position_embeddings": 256,
        "bos_token_id": tokens.index(spec["bos_token"]), "eos_token_id": tokens.index(spec["eos"]),
        "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[dtype],
    })
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tok = tokenizer_json(tokens, merges, N_NORMAL, spec["regex"], bos, spec["ignore_merges"])
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False) + "\n")
    tok_config = {"bos_token": spec["bos_token"], "eos_token": spec["eos"], "model_max_length": 256}
    if spec["template"] is not None:
        tok_config["chat_template"] = spec["template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")

    # The GGUF: what convert_hf_to_gguf.py writes for this folder (F32 norms, stored type else).
    writer = GGUFWriter(out / name / "model.gguf", arch)
    writer.add_name(f"tiny-{name}")
    writer.add_block_count(n_layers)
    writer.add_embedding_length(h)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_key_length(hd)
    writer.add_value_length(hd)
    writer.add_context_length(256)
    writer.add_layer_norm_rms_eps(text["rms_norm_eps"])
    writer.add_rope_freq_base(text["rope_theta"])
    if arch == "gemma3":
        writer.add_sliding_window(text["sliding_window"])
        writer.add_uint32(f"{arch}.attention.sliding_window_pattern", spec["pattern"])
    if arch == "gemma2":
        writer.add_sliding_window(text["sliding_window"])
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            writer.add_float32(f"{arch}.{key}", text[key])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(spec["pre"])
    writer.add_token_list(tokens)
    writer.add_token_types([1] * N_NORMAL + [3] * (n_vocab - N_NORMAL))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index(spec["bos_token"]))
    writer.add_eos_token_id(tokens.index(spec["eos"]))
    if spec["template"] is not None:
        writer.add_chat_template(spec["template"])

    gguf_names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "lm_head.weight": "output.weight",
        "model.norm.weight": "output_norm.weight",
    }
    per_layer = {
        "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias",
        "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight", "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
        "post_attention_layernorm.weight":
            "post_attention_norm.weight" if arch in ("gemma2", "gemma3") else "ffn_norm.weight",
    }
    for i in range(n_layers):
        for k, v in per_layer.items():
            gguf_names[f"model.layers.{i}.{k}"] = f"blk.{i}.{v}"
    if prefix is not None:
        gguf_names = {(prefix + k[len("model."):] if k.startswith("model.") else k): v
                      for k, v in gguf_names.items()}
    for name in names:
        if name not in gguf_names:
            continue  # the vision tower and projector: not part of the language model
        t = stored[name]
        raw, f32 = t.raw, t.f32
        if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
            raw, f32 = permute(raw, n_head, n_head), permute(f32, n_head, n_head)
        if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
            raw, f32 = permute(raw, n_head, n_kv), permute(f32, n_head, n_kv)
        if gemma and name.endswith("norm.weight"):
            writer.add_tensor(gguf_names[name], f32 + np.float32(1.0))
        elif len(t.shape) == 1:
            writer.add_tensor(gguf_names[name], f32)
        elif t.dtype == "BF16":
            writer.add_tensor(gguf_names[name], np.ascontiguousarray(raw), raw_dtype=GGMLQuantizationType.BF16)
        else:
            writer.add_tensor(gguf_names[name], np.ascontiguousarray(raw))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


SPECS = [
    {
        "arch": "llama", "vocab": "llama-bpe", "pre": "llama-bpe", "regex": LLAMA3_REGEX,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        "bos": "<|begin_of_text|>", "bos_token": "<|begin_of_text|>", "eos": "<|eot_id|>", "ignore_merges": True,
        "template": LLAMA3_TEMPLATE, "dtype": "BF16", "shards": 2, "tied": False, "layers": 2, "kv_heads": 2,
        "config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
                   "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "attention_bias": False, "mlp_bias": False},
    },
    {
        "arch": "qwen2", "vocab": "qwen2", "pre": "qwen2", "regex": QWEN2_REGEX,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "bos": None, "bos_token": "<|endoftext|>", "eos": "<|im_end|>", "ignore_merges": False,
        "template": QWEN2_TEMPLATE, "dtype": "F16", "shards": 1, "tied": True, "layers": 2, "kv_heads": 2,
        "config": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
                   "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "use_sliding_window": False,
                   "sliding_window": 256},
    },
    {
        "arch": "gemma3", "vocab": "llama-bpe", "pre": "llama-bpe", "regex": LLAMA3_REGEX,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>"],
        "bos": "<|begin_of_text|>", "bos_token": "<|begin_of_text|>", "eos": "<|end_of_text|>",
        "ignore_merges": True, "template": None, "dtype": "F32", "shards": 1, "tied": True, "layers": 2,
        "kv_heads": 1, "pattern": 2,
        "config": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                   "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                   "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 16, "sliding_window": 8,
                   "layer_types": ["sliding_attention", "full_attention"],
                   "final_logit_softcapping": None, "attn_logit_softcapping": None},
    },
    {
        "arch": "gemma", "vocab": "llama-bpe", "pre": "llama-bpe", "regex": LLAMA3_REGEX,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>"],
        "bos": "<|begin_of_text|>", "bos_token": "<|begin_of_text|>", "eos": "<|end_of_text|>",
        "ignore_merges": True, "template": None, "dtype": "BF16", "shards": 1, "tied": True, "layers": 2,
        "kv_heads": 4,
        # Gemma 1 configs say "gelu"; transformers and llama.cpp run the tanh approximation.
        "config": {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_act": "gelu",
                   "hidden_activation": None, "rms_norm_eps": 1e-6, "rope_theta": 10000.0},
    },
    {
        "arch": "gemma2", "vocab": "llama-bpe", "pre": "llama-bpe", "regex": LLAMA3_REGEX,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>"],
        "bos": "<|begin_of_text|>", "bos_token": "<|begin_of_text|>", "eos": "<|end_of_text|>",
        "ignore_merges": True, "template": None, "dtype": "F16", "shards": 1, "tied": True, "layers": 2,
        "kv_heads": 2,
        # Caps low enough to bend these random logits, so that a missing cap shows.
        "config": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
                   "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                   "query_pre_attn_scalar": 16, "sliding_window": 8,
                   "layer_types": ["sliding_attention", "full_attention"],
                   "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0},
    },
    {
        "arch": "gemma3", "name": "gemma3mm", "text_prefix": "model.language_model.",
        "vocab": "llama-bpe", "pre": "llama-bpe", "regex": LLAMA3_REGEX,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>"],
        "bos": "<|begin_of_text|>", "bos_token": "<|begin_of_text|>", "eos": "<|end_of_text|>",
        "ignore_merges": True, "template": None, "dtype": "BF16", "shards": 1, "tied": True, "layers": 2,
        "kv_heads": 2, "pattern": 2,
        "config": {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                   "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8},
                   "text_config": {"model_type": "gemma3_text", "rms_norm_eps": 1e-6,
                                   "rope_theta": 1000000.0, "query_pre_attn_scalar": 16,
                                   "sliding_window": 8, "sliding_window_pattern": 2}},
    },
]


def main():
    vocab_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    for seed, spec in enumerate(SPECS):
        make(out, vocab_dir, spec, seed)


if __name__ == "__main__":
    main()
