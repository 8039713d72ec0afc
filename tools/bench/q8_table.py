#!/usr/bin/env python3
"""Tabulates the runs of tools/bench/q8_table.sh: one JSON line per side and repetition (written
by crates/pstat-lm/examples/bench.rs --json), medians over repetitions, ratios to llama.cpp.

  q8_table.py RESULTS.jsonl                 # prints the markdown table
  q8_table.py --parse-text LOG --side NAME --model PATH
      # one JSON line from the text output of a `bench` binary without --json (for comparing
      # against a build from before the option existed)
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

# (label, tok/s key, tok/CPU-s key); llama.cpp has no early exit, so its full prefill stands
# for the prefill to the middle layer too.
WORKLOADS = [
    ("(a) prefill to the middle layer", "prefill_tok_s", "prefill_tok_cpu_s"),
    ("(a) prefill, all layers", "prefill_full_tok_s", "prefill_full_tok_cpu_s"),
    ("(b) scoring after the context", "scoring_tok_s", "scoring_tok_cpu_s"),
]
LLAMA_KEYS = {
    "prefill_tok_s": "prefill_tok_s",
    "prefill_tok_cpu_s": "prefill_tok_cpu_s",
    "prefill_full_tok_s": "prefill_tok_s",
    "prefill_full_tok_cpu_s": "prefill_tok_cpu_s",
    "scoring_tok_s": "scoring_tok_s",
    "scoring_tok_cpu_s": "scoring_tok_cpu_s",
}
SIDES = ["pstat f32", "pstat q8", "pstat q8 (before)"]


def parse_text(path, side, model):
    text = Path(path).read_text()
    number = r"([0-9.]+)"
    a = re.search(rf"\(a\) prefill .*?: pstat {number} tok/s, {number} tok/CPU-s \(all \d+ layers: {number} tok/s", text)
    b = re.search(rf"\(b\) score .*?: pstat {number} tok/s, {number} tok/CPU-s", text)
    peak = re.search(rf"pstat peak resident memory: {number} MiB", text)
    if not (a and b and peak):
        sys.exit(f"{path}: no (a), (b) and peak memory lines of a bench run")
    return {
        "side": side, "model": model,
        "prefill_tok_s": float(a[1]), "prefill_tok_cpu_s": float(a[2]),
        "prefill_full_tok_s": float(a[3]), "prefill_full_tok_cpu_s": None,
        "scoring_tok_s": float(b[1]), "scoring_tok_cpu_s": float(b[2]),
        "peak_rss_mib": float(peak[1]),
    }


def shape_of(model):
    m = re.search(r"llama-(\w+)-shaped", model)
    return m[1] if m else Path(model).name


def median(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def cell(wall, cpu):
    if wall is None:
        return "–"
    return f"{wall:.0f} ({cpu:.0f})" if cpu is not None else f"{wall:.0f} (–)"


def ratio(ours, theirs):
    if ours is None or theirs is None:
        return "–"
    return f"{ours / theirs:.2f}×"


def table(path):
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    by = {}
    for r in rows:
        by.setdefault((shape_of(r["model"]), r["side"]), []).append(r)
    shapes = sorted({s for s, _ in by}, key=lambda s: (len(s), s))
    sides = [s for s in SIDES if any((shape, s) in by for shape in shapes)]
    out = []
    reps = {k: len(v) for k, v in by.items()}
    out.append(f"repetitions per side: {sorted(set(reps.values()))}; cells: median tok/s (median tok/CPU-s); ratios: wall (per CPU-second) against llama.cpp")
    out.append("")
    head = "| shape | workload | llama.cpp | " + " | ".join(sides) + " | " + " | ".join(f"{s} / llama.cpp" for s in sides) + " |"
    out.append(head)
    out.append("|" + "---|" * (3 + 2 * len(sides)))
    for shape in shapes:
        llama = by.get((shape, "llama.cpp"), [])
        for label, wall_key, cpu_key in WORKLOADS:
            lw, lc = median(llama, LLAMA_KEYS[wall_key]), median(llama, LLAMA_KEYS[cpu_key])
            cells, ratios = [], []
            for side in sides:
                mine = by.get((shape, side), [])
                w, c = median(mine, wall_key), median(mine, cpu_key)
                cells.append(cell(w, c))
                ratios.append(f"{ratio(w, lw)} ({ratio(c, lc)})")
            out.append(f"| {shape} | {label} | {cell(lw, lc)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        lp = median(llama, "peak_rss_mib")
        peaks = [median(by.get((shape, s), []), "peak_rss_mib") for s in sides]
        out.append(
            f"| {shape} | peak resident memory (MiB) | {lp:.0f} | "
            + " | ".join("–" if p is None else f"{p:.0f}" for p in peaks)
            + " | " + " | ".join(ratio(p, lp) for p in peaks) + " |"
        )
    extra = [r for r in rows if r["side"] != "llama.cpp" and "prefill_tokens" in r]
    if extra:
        r = extra[0]
        out.append("")
        out.append(f"workload: (a) {r['prefill_tokens']} tokens, middle layer {r['middle_layer']}/{r['n_layers']} "
                   f"(first shape); (b) {r['scoring_tokens']} tokens after a {r['context_tokens']}-token context")
    kernels = sorted({r["kernels"] for r in rows if "kernels" in r})
    if kernels:
        out.append("kernels: " + "; ".join(kernels))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--parse-text")
    ap.add_argument("--side")
    ap.add_argument("--model")
    args = ap.parse_args()
    if args.parse_text:
        print(json.dumps(parse_text(args.parse_text, args.side, args.model)))
    elif args.results:
        print(table(args.results))
    else:
        ap.error("give RESULTS.jsonl or --parse-text LOG")


if __name__ == "__main__":
    main()
