"""Bad arrays raise ValueError with a message naming the problem; they never crash."""

import numpy as np
import pytest

import pstat


@pytest.fixture()
def fitted(bags):
    x, offsets, y = bags
    return pstat.SAwMIL(C=0.1, search=False).fit(x, offsets, y)


def test_wrong_dtype(bags):
    x, offsets, y = bags
    with pytest.raises(ValueError, match="X must be float32, float16 or float64"):
        pstat.SAwMIL(search=False).fit(x.astype(np.int32), offsets, y)
    with pytest.raises(ValueError, match="X must be a numpy array"):
        pstat.SAwMIL(search=False).fit(x.tolist(), offsets, y)
    with pytest.raises(ValueError, match="bag_offsets must be a 1-D integer array"):
        pstat.SAwMIL(search=False).fit(x, offsets.astype(np.float64), y)
    with pytest.raises(ValueError, match="y must be a 1-D integer array"):
        pstat.MassMean().fit(x, offsets, y.astype(np.float32))


def test_wrong_shapes(bags):
    x, offsets, y = bags
    with pytest.raises(ValueError, match="X must be 2-D"):
        pstat.SAwMIL(search=False).fit(x.ravel(), offsets, y)
    with pytest.raises(ValueError, match="labels for"):
        pstat.SAwMIL(search=False).fit(x, offsets, y[:-1])
    with pytest.raises(ValueError, match="labels must be -1/1 or 0/1"):
        pstat.SAwMIL(search=False).fit(x, offsets, y * 2)


def test_ragged_offsets(bags, fitted):
    x, offsets, y = bags
    short = offsets.copy()
    short[-1] -= 1
    with pytest.raises(ValueError, match="offsets must run from 0 to the"):
        pstat.SAwMIL(search=False).fit(x, short, y)
    decreasing = offsets.copy()
    decreasing[3] = decreasing[2]
    with pytest.raises(ValueError, match="bag 2 is empty or has decreasing offsets"):
        fitted.decision_function(x, decreasing)
    beyond = offsets.copy()
    beyond[5] = x.shape[0] + 10
    with pytest.raises(ValueError, match=r"bag_offsets\[5\] = .* is outside"):
        fitted.predict(x, beyond)
    negative = offsets.copy()
    negative[1] = -1
    with pytest.raises(ValueError, match=r"bag_offsets\[1\] = -1"):
        pstat.MassMean().fit(x, negative, y)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_values(bags, fitted, bad):
    x, offsets, y = bags
    x = x.copy()
    x[4, 2] = bad
    with pytest.raises(ValueError, match="instance 4 feature 2 is"):
        pstat.SAwMIL(search=False).fit(x, offsets, y)
    with pytest.raises(ValueError, match="instance 4 feature 2 is"):
        fitted.decision_function(x, offsets)


def test_feature_count_and_unfitted(bags, fitted):
    x, offsets, y = bags
    with pytest.raises(ValueError, match="features but the probe was fitted on"):
        fitted.predict(x[:, :-1], offsets)
    with pytest.raises(AttributeError, match="not fitted"):
        pstat.SAwMIL().coef_
    with pytest.raises(AttributeError, match="not fitted"):
        pstat.MassMean().predict(x, offsets)


def test_single_class_and_bad_intra(bags):
    x, offsets, y = bags
    with pytest.raises(ValueError, match="needs positive and negative bags"):
        pstat.SAwMIL(search=False).fit(x, offsets, np.ones_like(y))
    with pytest.raises(ValueError, match=r"intra\[0\] = 2"):
        pstat.SAwMIL(search=False).fit(x, offsets, y, intra=np.full(x.shape[0], 2, dtype=np.uint8))


def test_stability_bad_input():
    with pytest.raises(ValueError, match="has 2 statements but perturbed_true has 1"):
        pstat.stability([True, False], [True])
    with pytest.raises(ValueError, match="no held-out True statements"):
        pstat.stability(np.array([], dtype=bool), np.array([], dtype=bool))
    with pytest.raises(ValueError, match=r"baseline_true\[0\] = 3"):
        pstat.stability([3, 1], [1, 1])
