"""The statistics of a judge calibration: proportions with 95% intervals, a difference of two
proportions, and the calibration of soft verdicts.

Hand-written rather than taken from scipy/statsmodels: each is a few lines of closed-form
arithmetic (Wilson's score interval, Newcombe's hybrid interval for a difference, the Brier score
and binned expected calibration error), and the core must import without either package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

Z95 = 1.959963984540054


class Rate(BaseModel):
    """``k`` of ``n`` items (errors, or agreements), the rate and its Wilson 95% interval (None when ``n`` is 0)."""

    k: int = Field(ge=0, description="items counted (errors, agreements)")
    n: int = Field(ge=0)
    rate: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        lo, hi = wilson(k, n)
        return cls(k=k, n=n, rate=k / n if n else None, low=lo, high=hi)

    def covers(self, value: float) -> bool:
        """Whether ``value`` lies in the 95% interval."""
        return self.low is not None and self.low <= value <= self.high


def wilson(k: float, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson's score interval for ``k`` successes in ``n`` trials (None, None when n is 0); ``k``
    may be fractional (a mean rate times ``n``)."""
    if n <= 0:
        return None, None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class Difference(BaseModel):
    """p1 - p2 with Newcombe's hybrid score 95% interval (method 10); None when a group is empty."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None

    def covers(self, value: float) -> bool:
        return self.low is not None and self.low <= value <= self.high


def difference(k1: int, n1: int, k2: int, n2: int) -> Difference:
    """The difference of two independent proportions ``k1/n1 - k2/n2`` with its interval."""
    if n1 <= 0 or n2 <= 0:
        return Difference()
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p1 - p2
    return Difference(estimate=d, low=max(-1.0, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)),
                      high=min(1.0, d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)))


def pooled_difference(strata: list[tuple[int, int, int, int]]) -> Difference:
    """The difference ``k1/n1 - k2/n2`` estimated within strata and pooled, weighted by ``n1``
    (each stratum's interval from :func:`difference`, combined as independent normal errors):
    a difference that holds within every stratum is not inflated by strata that mix different
    base rates. ``strata``: (k1, n1, k2, n2) each; strata with an empty group are skipped."""
    parts = [(n1, difference(k1, n1, k2, n2)) for k1, n1, k2, n2 in strata if n1 > 0 and n2 > 0]
    if not parts:
        return Difference()
    total = sum(w for w, _ in parts)
    est = sum(w * d.estimate for w, d in parts) / total
    var = sum((w / total) ** 2 * ((d.high - d.low) / (2 * Z95)) ** 2 for w, d in parts)
    half = Z95 * math.sqrt(var)
    return Difference(estimate=est, low=max(-1.0, est - half), high=min(1.0, est + half))


class Reliability(BaseModel):
    """Calibration of soft verdicts (p of "met" against the label): Brier score, expected
    calibration error over equal-width bins, and the bins (for the reliability plot)."""

    n: int
    brier: float
    ece: float
    bins: list[dict[str, float]] = Field(default_factory=list, description="lo, hi, n, mean_p, frequency")


def reliability(p: Sequence[float], y: Sequence[bool], bins: int = 10) -> Reliability | None:
    """:class:`Reliability` of probabilities ``p`` for outcomes ``y``; None without items."""
    if not p:
        return None
    n = len(p)
    brier = sum((pi - float(yi)) ** 2 for pi, yi in zip(p, y)) / n
    out, ece = [], 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [(pi, yi) for pi, yi in zip(p, y) if lo <= pi < hi or (b == bins - 1 and pi == 1.0)]
        if not sel:
            continue
        mean_p = sum(pi for pi, _ in sel) / len(sel)
        freq = sum(float(yi) for _, yi in sel) / len(sel)
        ece += len(sel) / n * abs(mean_p - freq)
        out.append({"lo": lo, "hi": hi, "n": len(sel), "mean_p": mean_p, "frequency": freq})
    return Reliability(n=n, brier=brier, ece=ece, bins=out)
