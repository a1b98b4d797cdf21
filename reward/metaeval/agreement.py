"""Agreement statistics between raters: ICC(3,1)/ICC(3,k) with the F-distribution interval,
Cohen's kappa (unweighted, linear, quadratic) on binned scores or Booleans, macro F1, and a
seeded bootstrap.

Pure numpy (scipy is used for the F quantile when installed; otherwise a small incomplete-beta
inversion below does the same job). Every function takes plain sequences and returns floats or
small frozen dataclasses; an undefined statistic (no variance, too few items) is NaN with a
reason, never an exception from deep inside numpy.

Definitions follow Shrout and Fleiss (1979) case 3, as pingouin's ``intraclass_corr`` reports
``ICC3``/``ICC3k``, and scikit-learn's ``cohen_kappa_score``/``f1_score(average="macro")``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec

import numpy as np

KAPPA_WEIGHTS = ("unweighted", "linear", "quadratic")


@dataclass(frozen=True)
class ICCResult:
    """ICC(3,1) and ICC(3,k) of an (items x raters) matrix, with the 95% interval of ICC(3,1).

    ``reason`` says why a value is NaN (no between-item or residual variance, too few items)."""

    n: int
    k: int
    icc3: float
    icc3k: float
    ci95: tuple[float, float]
    f: float = math.nan
    reason: str | None = None


@dataclass(frozen=True)
class KappaResult:
    """Cohen's kappa with each weighting; ``reasons`` maps a NaN weighting to why."""

    n: int
    unweighted: float
    linear: float
    quadratic: float
    reasons: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return {w: getattr(self, w) for w in KAPPA_WEIGHTS}


# ---------------------------------------------------------------------- ICC
def icc3(ratings: Sequence[Sequence[float]] | np.ndarray, *, alpha: float = 0.05) -> ICCResult:
    """Two-way mixed effects, consistency ICC of an ``n items x k raters`` matrix.

    ICC(3,1) = (MSR - MSE) / (MSR + (k - 1) MSE), ICC(3,k) = (MSR - MSE) / MSR, where MSR is the
    between-items mean square and MSE the residual mean square of the two-way ANOVA without
    interaction. The interval of ICC(3,1) uses F = MSR / MSE with (n - 1, (n - 1)(k - 1)) degrees
    of freedom.

    Raises:
        ValueError: the matrix is not 2-D with at least 2 raters, or holds a non-finite value.
    """
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"ICC needs an items x raters matrix with at least 2 raters, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("ICC ratings must be finite numbers")
    n, k = x.shape
    nan2 = (math.nan, math.nan)
    if n < 2:
        return ICCResult(n, k, math.nan, math.nan, nan2, reason="fewer than 2 items")
    grand = x.mean()
    ss_rows = k * float(((x.mean(axis=1) - grand) ** 2).sum())
    ss_cols = n * float(((x.mean(axis=0) - grand) ** 2).sum())
    ss_total = float(((x - grand) ** 2).sum())
    ss_err = max(ss_total - ss_rows - ss_cols, 0.0)
    df1, df2 = n - 1, (n - 1) * (k - 1)
    msr, mse = ss_rows / df1, ss_err / df2
    # Relative tolerance: a residual of 1e-30 on scores of order 1 is rounding, not disagreement.
    if ss_total <= 1e-20 * max(1.0, float((x ** 2).sum())):
        return ICCResult(n, k, math.nan, math.nan, nan2,
                         reason="no variance at all (every rater gave every item the same score)")
    scale = ss_total
    if ss_err <= 1e-12 * scale and ss_rows <= 1e-12 * scale:
        return ICCResult(n, k, math.nan, math.nan, nan2,
                         reason="no variance between items and none left over (raters differ only by a constant)")
    if ss_err <= 1e-12 * scale:
        return ICCResult(n, k, 1.0, 1.0, nan2, f=math.inf,
                         reason="no residual variance (raters differ only by a constant): ICC is 1, no interval")
    icc = (msr - mse) / (msr + (k - 1) * mse)
    icck = (msr - mse) / msr
    fstat = msr / mse
    fl = fstat / f_ppf(1 - alpha / 2, df1, df2)
    fu = fstat * f_ppf(1 - alpha / 2, df2, df1)
    lo, hi = (fl - 1) / (fl + k - 1), (fu - 1) / (fu + k - 1)
    return ICCResult(n, k, float(icc), float(icck), (float(lo), float(hi)), f=float(fstat))


# ---------------------------------------------------------------------- kappa
def bin_scores(scores: Sequence[float], bins: int = 5) -> list[int]:
    """``min(floor(score * bins), bins - 1)`` for scores in [0, 1] (1.0 falls in the top bin).

    Raises:
        ValueError: a score is outside [0, 1] or not finite, or ``bins < 2``.
    """
    if bins < 2:
        raise ValueError(f"bins must be at least 2, got {bins}")
    out = []
    for i, s in enumerate(scores):
        s = float(s)
        if not math.isfinite(s) or s < 0 or s > 1:
            raise ValueError(f"score #{i} = {s} is outside [0, 1]; rescale before binning")
        out.append(min(math.floor(s * bins), bins - 1))
    return out


def cohen_kappa(a: Sequence, b: Sequence, *, labels: Sequence | None = None) -> KappaResult:
    """Cohen's kappa between two raters' categorical labels, unweighted, linear and quadratic.

    The weights are the distances between positions in ``labels`` (default: the sorted labels
    that occur), as scikit-learn computes them; pass every bin (``range(bins)``) so that a bin no
    one used still counts in the distance. Kappa is NaN, with a reason, when the expected
    disagreement is 0 (both raters used one and the same label throughout).
    """
    if len(a) != len(b):
        raise ValueError(f"kappa needs two equally long label lists, got {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        nan = math.nan
        return KappaResult(0, nan, nan, nan, dict.fromkeys(KAPPA_WEIGHTS, "no items"))
    cats = list(labels) if labels is not None else sorted(set(a) | set(b))
    pos = {c: i for i, c in enumerate(cats)}
    missing = [v for v in list(a) + list(b) if v not in pos]
    if missing:
        raise ValueError(f"label {missing[0]!r} is not among the labels {cats}")
    m = len(cats)
    conf = np.zeros((m, m))
    for x, y in zip(a, b):
        conf[pos[x], pos[y]] += 1
    expected = np.outer(conf.sum(axis=1), conf.sum(axis=0)) / conf.sum()
    idx = np.arange(m)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(float)
    weights = {"unweighted": (dist > 0).astype(float), "linear": dist, "quadratic": dist ** 2}
    values, reasons = {}, {}
    for name, w in weights.items():
        den = float((w * expected).sum())
        if den <= 0:
            values[name] = math.nan
            reasons[name] = "no expected disagreement (both raters used a single, identical label)"
        else:
            values[name] = 1.0 - float((w * conf).sum()) / den
    return KappaResult(n, values["unweighted"], values["linear"], values["quadratic"], reasons)


def kappa_binned(a: Sequence[float], b: Sequence[float], *, bins: int = 5) -> KappaResult:
    """Kappa of two raters' [0, 1] scores after :func:`bin_scores`, over all ``bins`` bins."""
    return cohen_kappa(bin_scores(a, bins), bin_scores(b, bins), labels=range(bins))


def kappa_bool(a: Sequence[bool], b: Sequence[bool]) -> KappaResult:
    """Kappa of two raters' Boolean verdicts (the weightings coincide for two labels)."""
    return cohen_kappa([bool(x) for x in a], [bool(x) for x in b], labels=[False, True])


# ---------------------------------------------------------------------- F1
def macro_f1(pred: Sequence[bool], truth: Sequence[bool]) -> float:
    """Mean of the F1 of "true" and the F1 of "false" (HealthBench's grader meta-eval metric).

    A class absent from both lists has F1 0, as scikit-learn's ``zero_division=0`` gives;
    NaN for no items."""
    if len(pred) != len(truth):
        raise ValueError(f"macro F1 needs equally long lists, got {len(pred)} and {len(truth)}")
    if not pred:
        return math.nan
    f1s = []
    for cls in (True, False):
        tp = sum(bool(p) == cls and bool(t) == cls for p, t in zip(pred, truth))
        fp = sum(bool(p) == cls and bool(t) != cls for p, t in zip(pred, truth))
        fn = sum(bool(p) != cls and bool(t) == cls for p, t in zip(pred, truth))
        f1s.append(2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else 0.0)
    return float(sum(f1s) / 2)


# ---------------------------------------------------------------------- bootstrap
def bootstrap_ci(stat: Callable[[np.ndarray], float], n: int, *, resamples: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``stat(indices)`` over ``resamples`` resamples of ``range(n)`` with
    replacement, seeded; resamples where the statistic is undefined (NaN) are left out."""
    if n < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(resamples):
        v = stat(rng.integers(0, n, size=n))
        if v is not None and math.isfinite(v):
            vals.append(v)
    if len(vals) < max(10, resamples // 10):
        return (math.nan, math.nan)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(vals, [tail, 100 - tail])
    return (float(lo), float(hi))


# ---------------------------------------------------------------------- F quantile
def f_ppf(q: float, d1: float, d2: float) -> float:
    """The ``q`` quantile of the F(d1, d2) distribution (scipy when installed)."""
    if find_spec("scipy") is not None:
        from scipy.stats import f as f_dist

        return float(f_dist.ppf(q, d1, d2))
    return _f_ppf_fallback(q, d1, d2)


def _f_ppf_fallback(q: float, d1: float, d2: float) -> float:
    """Invert F's CDF, I_{d1 x / (d1 x + d2)}(d1/2, d2/2), by bisection on the beta variable."""
    a, b = d1 / 2, d2 / 2
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    x = (lo + hi) / 2
    return d2 * x / (d1 * (1 - x))


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by its continued fraction (modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(ln_front) * h / a
