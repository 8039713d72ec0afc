#!/usr/bin/env python3
"""Validate pstat-cluster's PCA -> UMAP -> HDBSCAN against scikit-learn PCA + umap-learn + hdbscan.

Generates a seeded Gaussian mixture, runs the same configuration in Python and in Rust (the
`validate` example of pstat-cluster), and prints each adjusted Rand index with the true labels and
the Rust/Python wall-time ratio. Benchmark, not a test: needs a venv with umap-learn, hdbscan,
scikit-learn and safetensors (see docs/BENCHMARKS.md, section "Clustering").

usage: validate.py [--points 2400] [--dims 512] [--clusters 6] [--separation 0.2] [--seed 7]
                   [--rust-bin PATH]  (default: cargo run --release -p pstat-cluster --example validate)
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import hdbscan
import numpy as np
import umap
from safetensors.numpy import save_file
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

CONFIG = dict(pca_dims=10, n_neighbors=15, min_dist=0.0, n_components=2, min_cluster_size=20, min_samples=10)


def mixture(points, dims, clusters, separation, seed):
    rng = np.random.default_rng(seed)
    per = points // clusters
    centres = separation * rng.standard_normal((clusters, dims))
    x = np.concatenate([c + rng.standard_normal((per, dims)) for c in centres]).astype(np.float32)
    return x, np.repeat(np.arange(clusters), per).astype(np.int32)


def run_python(x, seed):
    """Returns labels, wall seconds and CPU seconds (all threads) of the Python pipeline."""
    start, cpu = time.perf_counter(), time.process_time()
    reduced = PCA(n_components=CONFIG["pca_dims"], random_state=seed).fit_transform(x)
    emb = umap.UMAP(n_neighbors=CONFIG["n_neighbors"], min_dist=CONFIG["min_dist"],
                    n_components=CONFIG["n_components"], init="pca", random_state=seed).fit_transform(reduced)
    labels = hdbscan.HDBSCAN(min_cluster_size=CONFIG["min_cluster_size"],
                             min_samples=CONFIG["min_samples"]).fit_predict(emb)
    return labels, time.perf_counter() - start, time.process_time() - cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2400)
    ap.add_argument("--dims", type=int, default=512)
    ap.add_argument("--clusters", type=int, default=6)
    ap.add_argument("--separation", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rust-bin")
    a = ap.parse_args()
    x, truth = mixture(a.points, a.dims, a.clusters, a.separation, a.seed)
    # Warm-up on a slice so numba's one-off JIT compilation is not timed.
    run_python(x[: 300], a.seed)
    py_labels, py_seconds, py_cpu = run_python(x, a.seed)
    py_ari = adjusted_rand_score(truth, py_labels)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mixture.safetensors")
        save_file({"X": x, "labels": truth}, path)
        cmd = [a.rust_bin] if a.rust_bin else ["cargo", "run", "-q", "--release", "-p", "pstat-cluster",
                                               "--example", "validate", "--"]
        params = [CONFIG[k] for k in ("pca_dims", "n_neighbors", "min_dist", "n_components",
                                       "min_cluster_size", "min_samples")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(cmd + [path] + [str(p) for p in params] + [str(a.seed)],
                             check=True, capture_output=True, text=True).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Includes reading the file; the machine may be shared, so CPU time is the steadier measure.
    rust_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    rust = json.loads(out.strip().splitlines()[-1])
    print(f"data: {len(truth)} points x {a.dims} dims, {a.clusters} clusters, separation {a.separation}, seed {a.seed}")
    print(f"config: {CONFIG}")
    print(f"python (sklearn PCA + umap-learn {umap.__version__} init=pca + hdbscan): ARI {py_ari:.4f}, "
          f"{len(set(py_labels) - {-1})} clusters, {int((py_labels < 0).sum())} noise, {py_seconds:.2f} s wall, "
          f"{py_cpu:.2f} s CPU")
    print(f"rust (pstat-cluster): ARI {rust['ari']:.4f}, {rust['n_clusters']} clusters, {rust['noise']} noise, "
          f"{rust['seconds']:.2f} s wall, {rust_cpu:.2f} s CPU")
    print(f"ARI difference (rust - python): {rust['ari'] - py_ari:+.4f}; time ratio rust/python: "
          f"{rust['seconds'] / py_seconds:.2f} wall, {rust_cpu / py_cpu:.2f} CPU")
    return 0 if abs(rust["ari"] - py_ari) <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
