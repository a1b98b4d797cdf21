"""How a judge errs: the error model the stress test draws verdicts from.

A real judge's errors are neither independent nor equally likely everywhere:

- its rates differ by the kind of item: a judge may read a met criterion as failed (a *false
  fail*) far more often than the reverse (a *false pass*), and more on some severities or
  polarities than on others (rates keyed ``"severity/polarity"``, ``"severity"``,
  ``"polarity"`` or ``"*"``, the most specific key that is present wins);
- reading the same item again tends to repeat the mistake: with ``reread_correlation`` R a
  re-reading gives the first reading's answer, otherwise it is a fresh draw. Each reading then
  errs at its own marginal rate and the correlation of two readings' errors is R (the "copy"
  model: it keeps the marginal rate and makes the correlation exactly R);
- some leaves are misread every time (``systematic_leaves``, measured, or a seeded
  ``systematic_fraction`` of the tree's leaves): every reading of them is wrong, re-readings too;
- the applicability step errs on its own: a present situation read as absent
  (``app_false_absent``, critical leaves apart) drops the check, an absent one read as present
  (``app_false_present``) keeps a check the reply passes vacuously.

``ErrorModel.independent(E)`` is the symmetric case of ``--judge-noise E`` (every rate E, no
correlation); :func:`reward.calibration.record.CalibrationRecord.error_model` builds the measured
one from ``rubricstree judge calibrate``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reward.tree.graph import RubricTree

Rates = dict[str, float]


def _rates_ok(v: Mapping[str, float]) -> Mapping[str, float]:
    if "*" not in v:
        raise ValueError("needs a default rate under '*'")
    for key, rate in v.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate {key!r} must be in [0, 1], got {rate!r}")
    return v


class ErrorModel(BaseModel):
    """A judge's errors (see the module docstring). Rates are probabilities in [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    false_fail: Rates = Field(default_factory=lambda: {"*": 0.0},
                              description="P(read as failed | the leaf passes), by severity/polarity")
    false_pass: Rates = Field(default_factory=lambda: {"*": 0.0},
                              description="P(read as passed | the leaf fails), by severity/polarity")
    reread_correlation: float = Field(0.0, ge=0.0, le=1.0, description=(
        "P(a re-reading repeats the first reading's answer); otherwise it is a fresh draw"))
    systematic_fraction: float = Field(0.0, ge=0.0, le=1.0, description=(
        "a seeded share of the tree's leaves misread on every reading"))
    systematic_leaves: tuple[str, ...] = Field((), description="leaf ids misread on every reading (measured)")
    app_false_absent: Rates = Field(default_factory=lambda: {"*": 0.0}, description=(
        "P(a present situation read as absent), '*' and optionally 'critical'"))
    app_false_present: float = Field(0.0, ge=0.0, le=1.0, description="P(an absent situation read as present)")
    source: str = Field("independent", description="what the rates come from (a calibration file, flags)")

    @field_validator("false_fail", "false_pass", "app_false_absent")
    @classmethod
    def _check_rates(cls, v: Rates) -> Rates:
        return dict(_rates_ok(v))

    @classmethod
    def independent(cls, judge_noise: float, applicability_noise: float | None = None, *,
                    reread_correlation: float = 0.0, systematic_fraction: float = 0.0) -> ErrorModel:
        """The symmetric model of ``--judge-noise``: every verdict and (by default) every
        applicability decision is wrong with probability ``judge_noise``."""
        app = judge_noise if applicability_noise is None else applicability_noise
        parts = [f"judge noise {judge_noise:g}"]
        if reread_correlation:
            parts.append(f"re-read correlation {reread_correlation:g}")
        if systematic_fraction:
            parts.append(f"{systematic_fraction:.0%} of leaves always misread")
        return cls(false_fail={"*": judge_noise}, false_pass={"*": judge_noise}, app_false_absent={"*": app},
                   app_false_present=app, reread_correlation=reread_correlation,
                   systematic_fraction=systematic_fraction, source=", ".join(parts))

    @property
    def is_perfect(self) -> bool:
        return not (any(self.false_fail.values()) or any(self.false_pass.values()) or self.systematic_fraction
                    or self.systematic_leaves or any(self.app_false_absent.values()) or self.app_false_present)

    def scaled(self, judge_noise: float) -> ErrorModel:
        """This model's correlation and systematic leaves with every rate replaced by ``judge_noise``
        (the sweep behind the noise tolerance)."""
        return self.model_copy(update={"false_fail": {"*": judge_noise}, "false_pass": {"*": judge_noise},
                                       "app_false_absent": {"*": judge_noise}, "app_false_present": judge_noise})

    @staticmethod
    def _lookup(rates: Mapping[str, float], severity: str, polarity: str) -> float:
        for key in (f"{severity}/{polarity}", severity, polarity, "*"):
            if key in rates:
                return rates[key]
        return 0.0  # unreachable: '*' is required

    def verdict_error(self, fails: bool, severity: str, polarity: str) -> float:
        """P(one reading is wrong) for a leaf whose truth is ``fails``."""
        return self._lookup(self.false_pass if fails else self.false_fail, severity, polarity)

    def absent_error(self, severity: str) -> float:
        """P(a present situation is read as absent) for a leaf of ``severity``."""
        return self.app_false_absent.get(severity, self.app_false_absent["*"])

    def systematic(self, tree: RubricTree, seed: int) -> frozenset[str]:
        """The leaves misread on every reading: the measured ones plus a ``seed``-drawn share of
        the tree's leaves (the same share for every case and repeat of one run)."""
        out = {tree.resolve(x) or x for x in self.systematic_leaves}
        if self.systematic_fraction:
            ids = sorted(leaf.id for leaf in tree.leaves)
            k = round(self.systematic_fraction * len(ids))
            out |= set(random.Random(f"{seed}/systematic").sample(ids, k))
        return frozenset(out)
