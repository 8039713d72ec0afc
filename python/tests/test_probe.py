"""The Python probes are pstat's probes: same w, bias and judgments as `pstat sawmil fit`."""

import json
import subprocess

import numpy as np
import pytest

import pstat
from conftest import synthetic_bags, write_safetensors


def cli_fit(pstat_cli, tmp_path, x, offsets, y, c=None):
    bags = tmp_path / "bags.safetensors"
    probe = tmp_path / "probe.safetensors"
    write_safetensors(bags, {"X": x, "bag_offsets": offsets, "y": y})
    args = [pstat_cli, "sawmil", "fit", "--bags", str(bags), "--out", str(probe)]
    if c is not None:
        args += ["--C", str(c)]
    subprocess.run(args, check=True, capture_output=True)
    out = subprocess.run(
        [pstat_cli, "sawmil", "predict", "--probe", str(probe), "--bags", str(bags)],
        check=True, capture_output=True, text=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    scores = np.array([r["score"] for r in lines], dtype=np.float32)
    labels = np.array([r["label"] for r in lines])
    return pstat.SAwMIL.load(probe), scores, labels


@pytest.mark.parametrize("search", [False, True])
def test_sawmil_equals_the_cli(pstat_cli, tmp_path, bags, search):
    x, offsets, y = bags
    c = None if search else 0.1
    cli, cli_scores, cli_labels = cli_fit(pstat_cli, tmp_path, x, offsets, y, c)
    model = pstat.SAwMIL(C=0.1, search=search).fit(x, offsets, y)
    assert model.C_ == cli.C_
    np.testing.assert_array_equal(model.direction_, cli.direction_)
    assert model.bias_ == cli.bias_
    np.testing.assert_array_equal(model.scaler_mean_, cli.scaler_mean_)
    np.testing.assert_array_equal(model.scaler_scale_, cli.scaler_scale_)
    np.testing.assert_array_equal(model.decision_function(x, offsets), cli_scores)
    np.testing.assert_array_equal(model.predict(x, offsets), cli_labels)
    if search:
        assert model.cv_results_["C"] == [0.05, 0.1, 0.5, 1.0, 10.0]
    else:
        assert model.cv_results_ is None


def test_sawmil_learns_the_signal_and_coef_is_the_input_space_rule(bags):
    x, offsets, y = bags
    model = pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, y)
    tx, toff, ty = synthetic_bags(seed=8)
    assert (model.predict(tx, toff) == ty).mean() >= 0.85
    rows = tx.astype(np.float64) @ model.coef_ + model.intercept_
    by_bag = np.array([rows[a:b].max() for a, b in zip(toff[:-1], toff[1:])])
    np.testing.assert_allclose(model.decision_function(tx, toff), by_bag, rtol=1e-5, atol=1e-5)


def test_half_precision_and_strided_inputs_give_the_same_fit(bags):
    x, offsets, y = bags
    x16 = x.astype(np.float16)
    a = pstat.SAwMIL(C=0.1, search=False).fit(x16.astype(np.float32), offsets, y)
    b = pstat.SAwMIL(C=0.1, search=False).fit(x16, offsets, y)
    np.testing.assert_array_equal(a.direction_, b.direction_)
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), dtype=np.float32)
    wide[:, ::2] = x
    c = pstat.SAwMIL(C=0.1, search=False).fit(wide[:, ::2], offsets, y.astype(np.int64))
    d = pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, y)
    np.testing.assert_array_equal(c.direction_, d.direction_)
    np.testing.assert_array_equal(c.decision_function(x16, offsets), c.decision_function(x16.astype(np.float32), offsets))


def test_zero_one_labels_and_explicit_intra_match_the_defaults(bags):
    x, offsets, y = bags
    lengths = np.diff(offsets)
    intra = np.concatenate([[0] * (n - 2) + [1, 1] for n in lengths]).astype(np.uint8)
    a = pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, y)
    b = pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, (y == 1).astype(np.int32), intra=intra)
    np.testing.assert_array_equal(a.direction_, b.direction_)
    assert a.bias_ == b.bias_


def test_save_and_load_round_trip(tmp_path, bags):
    x, offsets, y = bags
    model = pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, y)
    model.save(tmp_path / "p.safetensors")
    again = pstat.SAwMIL.load(tmp_path / "p.safetensors")
    np.testing.assert_array_equal(model.decision_function(x, offsets), again.decision_function(x, offsets))
    with pytest.raises(ValueError, match="not mass_mean"):
        pstat.MassMean.load(tmp_path / "p.safetensors")


def test_mass_mean_scores_last_rows(bags):
    x, offsets, y = bags
    model = pstat.MassMean().fit(x, offsets, y)
    last = x[offsets[1:] - 1].astype(np.float64) @ model.coef_ + model.intercept_
    np.testing.assert_allclose(model.decision_function(x, offsets), last, rtol=1e-5, atol=1e-5)
    assert (model.predict(x, offsets) == y).mean() > 0.9
    assert abs(np.linalg.norm(model.direction_) - 1) < 1e-9


def test_stability_counts_and_intervals():
    baseline = np.array([True] * 30 + [False] * 10)
    perturbed = baseline.copy()
    perturbed[:6] = False  # 6 retractions of 30
    perturbed[30:32] = True  # 2 expansions of 10
    r = pstat.stability(baseline, perturbed, resamples=500, seed=3)
    assert (r["n_baseline_true"], r["n_baseline_not_true"]) == (30, 10)
    assert (r["retractions"], r["expansions"]) == (6, 2)
    assert r["retraction_rate"] == pytest.approx(0.2)
    assert r["expansion_rate"] == pytest.approx(0.2)
    assert r["retraction_rate_lo"] < 0.2 < r["retraction_rate_hi"]
    assert r["flag"] is None
    assert pstat.stability(baseline, perturbed, resamples=500, seed=3) == r
    empty = pstat.stability([True, True], [True, False], resamples=50)
    assert empty["expansion_rate"] is None and empty["flag"] == "small_baseline"


def test_version_carries_the_commit(pstat_cli):
    out = subprocess.run([pstat_cli, "--version"], check=True, capture_output=True, text=True).stdout
    assert "commit " in out and "dirty: " in out
