#!/usr/bin/env python3
"""Benchmark the Python API (`pstat.SAwMIL`, installed from the wheel) against the cvxopt
reference (reference.py: the Trilemma-of-Truth repository's patched sAwMIL) and against the
PyPI `sawmil` 0.2.1 package, on the same bags.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench_python.py --bags 150 300 600 \
        --reference-bags 150 300 --pypi-bags 150 300

Bags as in bench.py (10 instances x 576 dims, signal in the last one or two instances of
positive bags, half positive), C = 1 without search, 600 test bags. Every timing is the fit
call only, in the same process (wall and CPU seconds); then the test accuracy, the test-label
agreement with pstat, cosine(w) and the speed ratios.

`sawmil` 0.2.1 (`pip install "sawmil[osqp]==0.2.1"`) cannot fit as published without
Gurobi, and learns the wrong direction; this script patches it at run time, nothing else:
- stage 1 (sMIL) is built without a `solver` and so always calls Gurobi: its QP is sent to
  OSQP instead, the solver the package offers for stage 2 (`sAwMIL(solver="osqp")`);
- the linear term of the positive bags in the stage-1 QP is 2/|B| - 1 (`sawmil/smil.py`);
  Bunescu & Mooney's sMIL, which the paper's code follows, has 1 - 2/|B|. The sign is
  flipped back (`--pypi-unpatched` keeps the published sign, to show its effect);
- `kernel` must be a kernel object (the default string fails), so `Linear()` is passed.
Its other choices stay as published (sum bag kernel, stage-2 C not divided by N, intercept
from the KKT conditions), so its direction and labels need not equal the paper's.
"""
import argparse
import json
import logging
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


def pypi_sawmil(sign_fix):
    """The PyPI sAwMIL class with the run-time patches of the module docstring."""
    from sawmil import smil
    from sawmil.quadprog import quadprog
    from sawmil.sawmil import sAwMIL

    def stage1_quadprog(H, f, Aeq, beq, lb, ub, **kw):
        # Aeq's one row holds the labels: -1 for negative instances, +1 for positive bags.
        if sign_fix:
            f = np.where(np.asarray(Aeq).ravel() > 0, -np.asarray(f), f)
        kw["solver"] = "osqp"
        return quadprog(H, f, Aeq, beq, lb, ub, **kw)

    smil.quadprog = stage1_quadprog
    return sAwMIL


def pypi_fit(args, train, test):
    from sawmil.bag import Bag
    from sawmil.kernels import Linear

    def bags(x, offsets, y, intra=None):
        return [Bag(X=x[a:b], y=float(label),
                    intra_bag_mask=None if intra is None else intra[a:b].astype(float))
                for a, b, label in zip(offsets[:-1], offsets[1:], y)]

    sAwMIL = pypi_sawmil(sign_fix=not args.pypi_unpatched)
    model = sAwMIL(C=args.c, kernel=Linear(), solver="osqp")
    # The package logs a warning per kernel fit ("Linear kernel has no parameters to fit.").
    logging.getLogger("sparse_mil.kernels").setLevel(logging.ERROR)
    _, wall, cpu = timed(lambda: model.fit(bags(*train)))
    x, offsets = test[0].astype(np.float64), test[1]
    labels = np.where(model.decision_function(bags(x, offsets, test[2])) >= 0, 1, -1)
    w = np.asarray(model.coef_, dtype=np.float64).ravel()
    return wall, cpu, labels, w / np.linalg.norm(w)


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
    if n_bags in args.pypi_bags:
        pypi_s, pypi_cpu, pypi_labels, pypi_w = pypi_fit(args, train, test)
        row.update(pypi_s=round(pypi_s, 3), pypi_cpu_s=round(pypi_cpu, 3),
                   pypi_speedup_wall=round(pypi_s / py_s, 1),
                   pypi_speedup_cpu=round(pypi_cpu / py_cpu, 1),
                   pypi_test_accuracy=float((pypi_labels == test[2]).mean()),
                   pypi_label_agreement=float((pypi_labels == labels).mean()),
                   pypi_cosine_w=float(model.direction_ @ pypi_w))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bags", type=int, nargs="+", default=[150, 300, 600])
    ap.add_argument("--reference-bags", type=int, nargs="*", default=[150, 300, 600])
    ap.add_argument("--pypi-bags", type=int, nargs="*", default=[])
    ap.add_argument("--pypi-unpatched", action="store_true",
                    help="keep sawmil 0.2.1's sign of the positive-bag linear term")
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--dim", type=int, default=576)
    ap.add_argument("--test-bags", type=int, default=600)
    ap.add_argument("--signal", type=float, default=3.0)
    ap.add_argument("--c", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for n in sorted(set(args.bags) | set(args.reference_bags) | set(args.pypi_bags)):
        print(json.dumps(run_size(args, n)), flush=True)


if __name__ == "__main__":
    main()
