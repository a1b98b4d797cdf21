"""The headline as published figures are written: a percentage with a 95% bootstrap interval,
the difference to a baseline folder with its paired interval, the published figures beside."""

from __future__ import annotations

import numpy as np
import pytest

from training.eval.headline import baseline_delta, score_interval


def test_interval_brackets_the_clipped_mean_and_is_reproducible():
    rng = np.random.default_rng(3)
    x = rng.normal(0.4, 0.3, size=300)
    lo, hi = score_interval(x, n_bootstrap=500, seed=1)
    assert lo < float(np.clip(x.mean(), 0, 1)) < hi and hi - lo < 0.1
    assert score_interval(x, n_bootstrap=500, seed=1) == [lo, hi]
    # clipping happens after the mean of each resample: a mean below 0 gives an interval at 0
    assert score_interval([-0.5, -0.4, -0.6], n_bootstrap=100) == [0.0, 0.0]
    assert score_interval([0.3]) is None


def test_paired_delta_on_the_common_examples():
    ours = {f"p{i}": 0.1 * (i % 7) + 0.2 for i in range(50)}
    base = {f"p{i}": 0.1 * (i % 7) for i in range(60)}
    d = baseline_delta(ours, base, n_bootstrap=300)
    assert d["n_common"] == 50 and d["delta"] == pytest.approx(0.2)
    assert d["delta_ci95"] == [pytest.approx(0.2), pytest.approx(0.2)]  # a constant shift: no spread
    assert baseline_delta(ours, {"other": 1.0})["delta"] is None
