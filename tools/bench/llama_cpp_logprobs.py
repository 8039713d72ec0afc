#!/usr/bin/env python3
"""llama.cpp's next-token distributions for pstat-lm's q8 accuracy check
(crates/pstat-lm/examples/q8_accuracy.rs runs it).

Reads JSON {"prompts": [[ids]...]} and prints one JSON line: for each prompt, the five most
probable next tokens after its last token and their log p. The model is the GGUF as stored,
run with llama.cpp's own quantized kernels (activations quantized to q8_0 / q8_K, integer dot
products), the natural reference for pstat's `q8` precision; the KV cache is f32 so that only
the products differ from an exact computation.
"""
import argparse
import json

import llama_cpp
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with open(args.prompts) as f:
        prompts = json.load(f)["prompts"]
    llm = llama_cpp.Llama(
        model_path=args.model, n_ctx=max(map(len, prompts)) + 8, n_batch=512,
        n_threads=args.threads, n_threads_batch=args.threads,
        type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
        logits_all=False, verbose=False,
    )
    out = []
    for ids in prompts:
        llm.reset()
        llm.eval(ids)
        # The last token's logits, straight from the context (as tools/fixtures/logprobs.py).
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        logits = logits.astype(np.float64)
        logp = logits - logits.max()
        logp -= np.log(np.exp(logp).sum())
        top = np.argsort(-logp)[:5]
        out.append({"ids": [int(i) for i in top], "logprobs": [float(logp[i]) for i in top]})
    print(json.dumps({"records": out, "version": llama_cpp.__version__}))


if __name__ == "__main__":
    main()
