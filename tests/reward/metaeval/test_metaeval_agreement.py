"""Agreement statistics against the reference libraries (pingouin, scikit-learn) to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reward.metaeval import agreement as ag

pg = pytest.importorskip("pingouin")
skm = pytest.importorskip("sklearn.metrics")
pd = pytest.importorskip("pandas")


def _pingouin_icc3(x: np.ndarray) -> tuple[float, float, list[float]]:
    n, k = x.shape
    df = pd.DataFrame({"item": np.repeat(np.arange(n), k), "rater": np.tile(np.arange(k), n),
                       "score": x.ravel()})
    # pingouin 0.7 labels ICC3 as "ICC(C,1)" (consistency, single rater) and ICC3k as "ICC(C,k)"
    t = pg.intraclass_corr(df, targets="item", raters="rater", ratings="score").set_index("Type")
    return float(t.loc["ICC(C,1)", "ICC"]), float(t.loc["ICC(C,k)", "ICC"]), list(t.loc["ICC(C,1)", "CI95"])


@pytest.mark.parametrize("seed", range(12))
def test_icc3_equals_pingouin(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(3, 40)), int(rng.integers(2, 5))
    truth = rng.normal(size=(n, 1))
    x = truth + rng.normal(scale=rng.uniform(0.1, 2), size=(n, k)) + rng.normal(size=(1, k))
    if seed % 3 == 0:  # ties: scores on a 5-point grid
        x = np.round(x * 2) / 2
    if seed % 4 == 1:  # one constant rater among the others
        x[:, 0] = 0.5
    ours = ag.icc3(x)
    icc, icck, ci = _pingouin_icc3(x)
    assert ours.icc3 == pytest.approx(icc, abs=1e-9)
    assert ours.icc3k == pytest.approx(icck, abs=1e-9)
    # pingouin rounds its interval to 2 decimals; the unrounded one is checked below
    assert ours.ci95[0] == pytest.approx(ci[0], abs=0.005 + 1e-9)
    assert ours.ci95[1] == pytest.approx(ci[1], abs=0.005 + 1e-9)
    assert ours.ci95[0] <= ours.icc3 <= ours.ci95[1]


def test_icc3_interval_matches_the_f_formula_exactly():
    from scipy.stats import f

    x = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    r = ag.icc3(x)
    n, k = x.shape
    fl = r.f / f.ppf(0.975, n - 1, (n - 1) * (k - 1))
    fu = r.f * f.ppf(0.975, (n - 1) * (k - 1), n - 1)
    assert r.ci95[0] == pytest.approx((fl - 1) / (fl + k - 1), abs=1e-12)
    assert r.ci95[1] == pytest.approx((fu - 1) / (fu + k - 1), abs=1e-12)
    # Shrout & Fleiss (1979) table 4 reports ICC(3,1) = 0.71 on these data
    assert r.icc3 == pytest.approx(0.7148, abs=1e-4)


def test_f_quantile_fallback_matches_scipy():
    from scipy.stats import f

    for q, d1, d2 in [(0.975, 5, 15), (0.975, 15, 5), (0.5, 1, 1), (0.975, 39, 117), (0.9, 2.5, 7.5)]:
        assert ag._f_ppf_fallback(q, d1, d2) == pytest.approx(f.ppf(q, d1, d2), rel=1e-9)


def test_icc3_constant_and_degenerate_inputs_give_nan_with_reason():
    same = ag.icc3(np.full((6, 3), 0.4))
    assert math.isnan(same.icc3) and "same score" in same.reason
    shifted = ag.icc3(np.array([[0.1, 0.2], [0.5, 0.6], [0.9, 1.0]]))
    assert shifted.icc3 == 1.0 and "constant" in shifted.reason
    one = ag.icc3(np.array([[0.1, 0.2]]))
    assert math.isnan(one.icc3) and "fewer than 2" in one.reason
    # one constant rater is defined (pingouin gives the same number)
    x = np.column_stack([np.linspace(0, 1, 8), np.full(8, 0.5)])
    assert ag.icc3(x).icc3 == pytest.approx(_pingouin_icc3(x)[0], abs=1e-9)
    with pytest.raises(ValueError, match="at least 2 raters"):
        ag.icc3(np.ones((4, 1)))


@pytest.mark.parametrize("seed", range(15))
def test_kappa_equals_sklearn(seed):
    rng = np.random.default_rng(100 + seed)
    n, bins = int(rng.integers(2, 60)), int(rng.integers(2, 8))
    a = rng.uniform(size=n)
    b = np.clip(a + rng.normal(scale=0.3, size=n), 0, 1)
    if seed % 4 == 0:
        a[: n // 2] = 1.0  # ties at the top edge: 1.0 falls in the last bin
    ours = ag.kappa_binned(a, b, bins=bins)
    ba, bb = ag.bin_scores(a, bins), ag.bin_scores(b, bins)
    for w, sk in [("unweighted", None), ("linear", "linear"), ("quadratic", "quadratic")]:
        ref = skm.cohen_kappa_score(ba, bb, labels=list(range(bins)), weights=sk)
        if math.isnan(ref):
            assert math.isnan(getattr(ours, w)) and w in ours.reasons
        else:
            assert getattr(ours, w) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_bool_kappa_and_macro_f1_equal_sklearn(seed):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(2, 50))
    a = list(rng.uniform(size=n) < rng.uniform(0.1, 0.9))
    b = [x if rng.uniform() < 0.8 else not x for x in a]
    ref = skm.cohen_kappa_score(a, b, labels=[False, True])
    k = ag.kappa_bool(a, b)
    if math.isnan(ref):
        assert math.isnan(k.unweighted)
    else:
        assert k.unweighted == pytest.approx(ref, abs=1e-9)
        assert k.linear == pytest.approx(ref, abs=1e-9) and k.quadratic == pytest.approx(ref, abs=1e-9)
    assert ag.macro_f1(b, a) == pytest.approx(skm.f1_score(a, b, average="macro", labels=[False, True],
                                                           zero_division=0), abs=1e-9)


def test_kappa_constant_raters():
    k = ag.kappa_binned([0.3] * 5, [0.3] * 5)
    assert math.isnan(k.unweighted) and "single" in k.reasons["unweighted"]
    # one constant rater, the other not: kappa is 0, as sklearn says
    k = ag.kappa_binned([0.3] * 4, [0.1, 0.3, 0.5, 0.9])
    assert k.unweighted == pytest.approx(skm.cohen_kappa_score([1] * 4, [0, 1, 2, 4], labels=list(range(5))))


def test_bin_scores_edges_and_errors():
    assert ag.bin_scores([0.0, 0.19999, 0.2, 0.99, 1.0]) == [0, 0, 1, 4, 4]
    with pytest.raises(ValueError, match="outside"):
        ag.bin_scores([1.2])


def test_bootstrap_is_seeded_and_covers_the_estimate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 1)) + rng.normal(scale=0.5, size=(30, 2))
    def stat(idx):
        return ag.icc3(x[idx]).icc3

    a = ag.bootstrap_ci(stat, 30, resamples=200, seed=3)
    assert a == ag.bootstrap_ci(stat, 30, resamples=200, seed=3)
    assert a[0] < ag.icc3(x).icc3 < a[1]
