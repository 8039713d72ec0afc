#!/usr/bin/env python3
"""Benchmark `pstat sawmil fit` against the cvxopt reference (reference.py) on synthetic bags.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench.py --pstat target/release/pstat \
        --bags 1800 --python-bags 150 300 --dim 576

For each size: writes train/test MIL files, times the Rust fit (wall time of the CLI process,
file I/O included) and, for sizes listed in --python-bags, the reference fit (the fit call
only); wall and CPU seconds (the machine may be shared: CPU time is the steadier measure);
reports the agreement of test-bag labels, cosine(w), and the speed ratio. Both use
C = 1 (no search). Sizes without a Python run print the Rust time only.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def write_mil(path, x, offsets, y, intra):
    save_file({"X": x.astype(np.float32), "bag_offsets": offsets.astype(np.int64),
               "y": y.astype(np.int8), "intra": intra.astype(np.uint8)}, path)


def run_size(args, n_bags, with_python, workdir):
    rng = np.random.default_rng(args.seed + n_bags)
    direction = reference.random_direction(rng, args.dim)
    make = lambda n: reference.synthetic_bags(rng, n, args.dim, args.instances, args.instances,
                                              direction, signal=args.signal)
    # f32 round trip so both implementations see identical inputs.
    train, test = make(n_bags), make(args.test_bags)
    train = (train[0].astype(np.float32).astype(np.float64),) + train[1:]
    test = (test[0].astype(np.float32).astype(np.float64),) + test[1:]
    train_path, test_path = f"{workdir}/train_{n_bags}.safetensors", f"{workdir}/test_{n_bags}.safetensors"
    probe_path = f"{workdir}/probe_{n_bags}.safetensors"
    write_mil(train_path, *train)
    write_mil(test_path, *test)

    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([args.pstat, "sawmil", "fit", "--bags", train_path, "--C", str(args.c),
                    "--out", probe_path], check=True, capture_output=True)
    rust_s = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rust_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    out = subprocess.run([args.pstat, "sawmil", "predict", "--probe", probe_path, "--bags", test_path],
                         check=True, capture_output=True, text=True).stdout
    rust_labels = np.array([json.loads(line)["label"] for line in out.splitlines()])
    row = dict(bags=n_bags, instances=n_bags * args.instances, dim=args.dim, rust_s=round(rust_s, 3), rust_cpu_s=round(rust_cpu, 3),
               rust_test_accuracy=float((rust_labels == test[2]).mean()))
    if with_python:
        t0, p0 = time.perf_counter(), time.process_time()
        fit = reference.sawmil_fit(*train, args.c)
        py_s, py_cpu = time.perf_counter() - t0, time.process_time() - p0
        py_labels = np.where(reference.sawmil_scores(fit, test[0], test[1]) > 0, 1, -1)
        w_rust = load_file(probe_path)["w"]
        row.update(python_s=round(py_s, 3), python_cpu_s=round(py_cpu, 3),
                   speedup_wall=round(py_s / rust_s, 1), speedup_cpu=round(py_cpu / rust_cpu, 1),
                   label_agreement=float((py_labels == rust_labels).mean()),
                   cosine_w=float(w_rust @ fit["w"]))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pstat", required=True)
    ap.add_argument("--bags", type=int, nargs="+", default=[1800])
    ap.add_argument("--python-bags", type=int, nargs="*", default=[150, 300])
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--dim", type=int, default=576)
    ap.add_argument("--test-bags", type=int, default=600)
    ap.add_argument("--signal", type=float, default=3.0)
    ap.add_argument("--c", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    sizes = sorted(set(args.bags) | set(args.python_bags))
    with tempfile.TemporaryDirectory() as workdir:
        for n in sizes:
            print(json.dumps(run_size(args, n, n in args.python_bags, workdir)), flush=True)


if __name__ == "__main__":
    main()
