#!/usr/bin/env python3
"""Benchmark the Python API (`pstat.SAwMIL`, installed from the wheel) against the cvxopt
reference (reference.py: the Trilemma-of-Truth repository's patched sAwMIL) on the same bags.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench_python.py --bags 150 300 600

Bags as in bench.py (10 instances x 576 dims, signal in the last one or two instances of
positive bags, half positive), C = 1 without search, 600 test bags. Both timings are the fit
call only, in the same process (wall and CPU seconds); then the test-label agreement, cosine(w)
and the speed ratio.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import pstat

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def timed(fn):
    t0, p0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - p0


def run_size(args, n_bags):
    rng = np.random.default_rng(args.seed + n_bags)
    direction = reference.random_direction(rng, args.dim)
    make = lambda n: reference.synthetic_bags(rng, n, args.dim, args.instances, args.instances,
                                              direction, signal=args.signal)
    train, test = make(n_bags), make(args.test_bags)
    # f32 inputs for pstat; the reference sees the same values in f64.
    x32, tx32 = train[0].astype(np.float32), test[0].astype(np.float32)
    train = (x32.astype(np.float64),) + train[1:]
    x, offsets, y, intra = train
    model, py_s, py_cpu = timed(lambda: pstat.SAwMIL(C=args.c, search=False).fit(x32, offsets, y, intra))
    labels = model.predict(tx32, test[1])
    row = dict(bags=n_bags, instances=len(x), dim=args.dim,
               pstat_s=round(py_s, 3), pstat_cpu_s=round(py_cpu, 3),
               pstat_test_accuracy=float((labels == test[2]).mean()))
    if n_bags in args.reference_bags:
        fit, ref_s, ref_cpu = timed(lambda: reference.sawmil_fit(*train, args.c))
        ref_labels = np.where(reference.sawmil_scores(fit, tx32.astype(np.float64), test[1]) > 0, 1, -1)
        row.update(reference_s=round(ref_s, 3), reference_cpu_s=round(ref_cpu, 3),
                   speedup_wall=round(ref_s / py_s, 1), speedup_cpu=round(ref_cpu / py_cpu, 1),
                   label_agreement=float((ref_labels == labels).mean()),
                   cosine_w=float(model.direction_ @ fit["w"]))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bags", type=int, nargs="+", default=[150, 300, 600])
    ap.add_argument("--reference-bags", type=int, nargs="*", default=[150, 300, 600])
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--dim", type=int, default=576)
    ap.add_argument("--test-bags", type=int, default=600)
    ap.add_argument("--signal", type=float, default=3.0)
    ap.add_argument("--c", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for n in sorted(set(args.bags) | set(args.reference_bags)):
        print(json.dumps(run_size(args, n)), flush=True)


if __name__ == "__main__":
    main()
