#!/usr/bin/env python3
"""Reference implementations for validating crates/pstat-probe (not used at runtime).

sAwMIL exactly as the Trilemma-of-Truth notes §4.2-4.7 describe, solved with cvxopt's
interior-point QP (misvm's formulation: G = [-I; I], h = [-lb; ub], A = y^T, b = 0,
default tolerances), and the Mass-Mean probe of notes §5 with OAS written out in numpy.

    python reference.py fixtures OUT_DIR   # writes sawmil_reference.json, massmean_reference.json

Bags in the fixtures have at most 10 instances, so capping (whose sampler differs between
numpy and the Rust port) never applies.
"""
import json
import sys

import numpy as np
from cvxopt import matrix, solvers, spmatrix

solvers.options["show_progress"] = False
SV_CUTOFF = 1e-7


def standardize_fit(rows):
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale == 0] = 1.0
    return mean, scale


def qp(z, y, rho, upper):
    """min 1/2 a^T (yy^T * ZZ^T) a - rho^T a, 0 <= a <= upper, y^T a = 0."""
    n = len(y)
    h_mat = np.outer(y, y) * (z @ z.T)
    # G = [-I; I] as a sparse matrix (same constraints as misvm's dense G, much cheaper).
    g = spmatrix([-1.0] * n + [1.0] * n, list(range(2 * n)), list(range(n)) * 2)
    h = np.concatenate([np.zeros(n), upper])
    sol = solvers.qp(matrix(h_mat), matrix(-rho.astype(float)), g, matrix(h),
                     matrix(y.astype(float)[None, :]), matrix(0.0))
    return np.array(sol["x"]).ravel()


def sawmil_fit(x, offsets, y, intra, c):
    """Returns dict(w, b, eta, selected, mean, scale). x is standardized inside."""
    mean, scale = standardize_fit(x)
    xs = (x - mean) / scale
    bags = [xs[offsets[i]:offsets[i + 1]] for i in range(len(y))]
    known = [intra[offsets[i]:offsets[i + 1]] for i in range(len(y))]
    assert all(len(b) <= 10 for b in bags), "capping not reproduced here"
    eta = sum(int(k.sum()) for k in known) / sum(len(b) for b in bags)
    neg = [b for b, l in zip(bags, y) if l == -1]
    pos = [b for b, l in zip(bags, y) if l == 1]
    pos_known = np.concatenate([k for k, l in zip(known, y) if l == 1]).astype(bool)
    neg_rows = np.vstack(neg)
    l_n, x_p = len(neg_rows), len(pos)
    # Stage 1: sMIL, positive bags as instance means, margin target 2/|B| - 1.
    z = np.vstack([neg_rows, np.vstack([b.mean(axis=0) for b in pos])])
    yy = np.concatenate([-np.ones(l_n), np.ones(x_p)])
    rho = np.concatenate([np.ones(l_n), [2.0 / len(b) - 1.0 for b in pos]])
    upper = np.concatenate([np.full(l_n, c / l_n), np.full(x_p, c / x_p)])
    a1 = qp(z, yy, rho, upper)
    w1 = (a1 * yy) @ z
    # Selection.
    pos_rows = np.vstack(pos)
    s = pos_rows @ w1
    l_p = len(s)
    n = min(l_p, int(round(l_p * eta)))
    n = max(x_p, n)
    cutoff = np.sort(s)[::-1][n - 1]
    sel = (s >= cutoff) & pos_known
    if sel.sum() < 0.05 * l_p:
        sel = s >= cutoff
    # Stage 2: single-instance SVM, bound C/N.
    rows = np.vstack([neg_rows, pos_rows])
    y2 = np.concatenate([-np.ones(l_n), np.where(sel, 1.0, -1.0)])
    nn = len(rows)
    a2 = qp(rows, y2, np.ones(nn), np.full(nn, c / nn))
    w = (a2 * y2) @ rows
    mass = (a2 * np.linalg.norm(rows, axis=1)).sum()
    assert np.linalg.norm(w) > 1e-6 * mass, "degenerate stage 2 (w = 0 optimal)"
    w = w / np.linalg.norm(w)
    sv = (a2 > SV_CUTOFF) & (a2 < c - SV_CUTOFF)
    proj = rows @ w
    b = -0.5 * (proj[sv & (y2 > 0)].mean() + proj[sv & (y2 < 0)].mean())
    return dict(w=w, b=float(b), eta=eta, selected=sel, mean=mean, scale=scale)


def sawmil_scores(fit, x, offsets):
    xs = (x - fit["mean"]) / fit["scale"]
    proj = xs @ fit["w"] + fit["b"]
    return np.array([proj[offsets[i]:offsets[i + 1]].max() for i in range(len(offsets) - 1)])


def random_direction(rng, dim):
    direction = rng.normal(size=dim)
    return direction / np.linalg.norm(direction)


def synthetic_bags(rng, n_bags, dim, min_len, max_len, direction, signal=3.0):
    """Bags of Gaussian rows; positive bags carry `signal` along `direction` in one or both
    of their last two rows (the known positives)."""
    rows, offsets, y, intra = [], [0], [], []
    for i in range(n_bags):
        length = int(rng.integers(min_len, max_len + 1))
        label = 1 if i % 2 == 0 else -1
        bag = rng.normal(size=(length, dim)) + 0.3
        if label == 1:
            bag[-1] += signal * direction
            if rng.random() < 0.5:
                bag[-2] += signal * direction
        rows.append(bag)
        offsets.append(offsets[-1] + length)
        y.append(label)
        intra.extend([0] * (length - 2) + [1, 1])
    return np.vstack(rows), np.array(offsets), np.array(y), np.array(intra)


def oas_centered(x):
    n, p = x.shape
    s = x.T @ x / n
    mu = np.trace(s) / p
    alpha = np.mean(s ** 2)
    num = alpha + mu ** 2
    den = (n + 1) * (alpha - mu ** 2 / p)
    shrink = 1.0 if den == 0 else min(num / den, 1.0)
    return (1 - shrink) * s + shrink * mu * np.eye(p)


def massmean_fit(last, labels):
    mean, scale = standardize_fit(last)
    xs = (last - mean) / scale
    xp, xn = xs[labels == 1], xs[labels == -1]
    mp, mn = xp.mean(axis=0), xn.mean(axis=0)
    pooled = ((len(xp) - 1) * oas_centered(xp) + (len(xn) - 1) * oas_centered(xn)) / (len(xp) + len(xn) - 2)
    pooled += 1e-6 * np.eye(xs.shape[1])
    d = np.linalg.inv(pooled) @ (mp - mn)
    d /= np.linalg.norm(d)
    b = -0.5 * (xp @ d).mean() - 0.5 * (xn @ d).mean()
    return d, float(b)


def write_fixtures(out_dir):
    rng = np.random.default_rng(20240611)
    problems = []
    for n_bags, dim, c in [(30, 5, 1.0), (48, 10, 5.0), (60, 20, 10.0)]:
        x, offsets, y, intra = synthetic_bags(rng, n_bags, dim, 4, 10, random_direction(rng, dim))
        fit = sawmil_fit(x, offsets, y, intra, c)
        problems.append(dict(
            dim=dim, c=c, x=x.ravel().tolist(), offsets=offsets.tolist(), y=y.tolist(),
            intra=intra.tolist(), eta=fit["eta"], w=fit["w"].tolist(), b=fit["b"],
            selected=fit["selected"].astype(int).tolist(),
            scores=sawmil_scores(fit, x, offsets).tolist()))
    with open(f"{out_dir}/sawmil_reference.json", "w") as f:
        json.dump(dict(source="tools/sawmil/reference.py (cvxopt interior point)", problems=problems), f)

    cases = []
    for n, dim in [(40, 6), (25, 12)]:
        labels = np.where(np.arange(n) % 3 == 0, 1, -1)
        last = rng.normal(size=(n, dim)) @ rng.normal(size=(dim, dim)) * 0.5 + 2.0
        last[labels == 1] += rng.normal(size=dim)
        d, b = massmean_fit(last, labels)
        cases.append(dict(dim=dim, x=last.ravel().tolist(), y=labels.tolist(), w=d.tolist(), b=b,
                          oas_pos=oas_centered(((last - last.mean(0)) / last.std(0))[labels == 1]).ravel().tolist()))
    with open(f"{out_dir}/massmean_reference.json", "w") as f:
        json.dump(dict(source="tools/sawmil/reference.py (numpy)", cases=cases), f)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fixtures":
        write_fixtures(sys.argv[2])
    else:
        sys.exit(__doc__)
