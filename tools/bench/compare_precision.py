#!/usr/bin/env python3
"""Judgment flips between two `pstat run` output folders of the same study in two precisions
(e.g. `--precision f32` and `--precision q8`): per stage, how many per-statement judgments
differ. Behavioral: the `answer` of every (statement, condition, draw, format, K) in the
`behavioral/**/*.jsonl` files. Representational: each probe unit's baseline True count,
retractions and expansions (`representational/**/unit.json`).

Usage: compare_precision.py RESULTS_A RESULTS_B
"""
import json
import sys
from pathlib import Path


def behavioral(root):
    out = {}
    for f in sorted(root.glob("*/*/behavioral/**/*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            key = (str(f.relative_to(root)), r["id"], r["condition"], r["draw"], r["format"], r["k"])
            out[key] = r["answer"]
    return out


def representational(root):
    out = {}
    for f in sorted(root.glob("*/*/representational/**/unit.json")):
        for r in json.loads(f.read_text())["record"]["rows"]:
            key = (r["model"], r["domain"], r["probe"], r["layer"], r["condition"], r["resample"])
            out[key] = (r["n_baseline_true"], r["retractions"], r["expansions"])
    return out


def main():
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    ba, bb = behavioral(a), behavioral(b)
    common = ba.keys() & bb.keys()
    flips = sum(ba[k] != bb[k] for k in common)
    print(f"behavioral: {flips} of {len(common)} answers differ")
    ra, rb = representational(a), representational(b)
    common = sorted(ra.keys() & rb.keys(), key=str)
    for k in common:
        if ra[k] != rb[k]:
            print(f"representational {k}: (baseline True, retractions, expansions) {ra[k]} vs {rb[k]}")
    same = sum(ra[k] == rb[k] for k in common)
    print(f"representational: {same} of {len(common)} probe units identical in counts")


if __name__ == "__main__":
    main()
