#!/usr/bin/env python3
"""llama.cpp side of pstat-lm's runtime benchmark (crates/pstat-lm/examples/bench.rs runs it).

Reads a workload of token ids (JSON: {"statements": [[ids]...], "prefix": [ids],
"suffixes": [[ids]...]}) written by the Rust benchmark, so both sides process exactly the same
tokens, and prints one JSON line with tokens/s of:
  (a) prefill: every statement evaluated on its own (llama.cpp has no hidden-state API, so this
      is the full model; one llama_decode per statement, logits of the last token only);
  (b) scoring: the shared prefix evaluated once, then each suffix decoded after it, the KV
      cache trimmed back to the prefix between suffixes (llama-cpp-python's own prefix reuse).
Model: the original GGUF with llama.cpp's defaults (its quantized kernels, f16 KV cache).
Also reported: tokens per CPU-second of this process (steadier than wall time on a shared
machine) and its peak resident memory (VmHWM: ru_maxrss would also count the memory the
Rust benchmark held when it started this process, which Linux carries across exec).
"""
import argparse
import json
import resource
import time


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def vm_hwm_kib():
    """Peak resident memory of this address space (reset at exec, unlike ru_maxrss)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with open(args.workload) as f:
        work = json.load(f)
    longest = max(len(work["prefix"]) + max(map(len, work["suffixes"])), max(map(len, work["statements"])))
    llm = llama_cpp.Llama(
        model_path=args.model, n_ctx=longest + 16, n_batch=2048, n_ubatch=512,
        n_threads=args.threads, n_threads_batch=args.threads, logits_all=False, verbose=False,
    )
    cpu = cpu_seconds()
    start = time.perf_counter()
    tokens = 0
    for ids in work["statements"]:
        llm.reset()
        llm.eval(ids)
        tokens += len(ids)
    prefill = tokens / (time.perf_counter() - start)
    prefill_cpu = tokens / (cpu_seconds() - cpu)

    cpu = cpu_seconds()
    start = time.perf_counter()
    llm.reset()
    llm.eval(work["prefix"])
    p = len(work["prefix"])
    tokens = 0
    for ids in work["suffixes"]:
        # eval() trims the KV cache to n_tokens before decoding: back to the prefix.
        llm.n_tokens = p
        llm.eval(ids)
        tokens += len(ids)
    scoring = tokens / (time.perf_counter() - start)
    scoring_cpu = tokens / (cpu_seconds() - cpu)
    peak_mib = vm_hwm_kib() / 1024
    print(json.dumps({"prefill_tok_s": prefill, "scoring_tok_s": scoring,
                      "prefill_tok_cpu_s": prefill_cpu, "scoring_tok_cpu_s": scoring_cpu,
                      "peak_rss_mib": peak_mib, "version": llama_cpp.__version__}))


if __name__ == "__main__":
    main()
