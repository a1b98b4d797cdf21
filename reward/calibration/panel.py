"""Calibrate a panel of two judges (issue 45, part 3): each judge on the same labelled items, how
often both misread the same item against what independence predicts, and the detection the reward
can expect with the first judge's posterior and the second judge on the panel's leaves.

Data flow::

    cases + routings -> calibrate(judge A), calibrate(judge B): two records (each stored by its
    identity, as a single calibration is) -> the first readings of both on every verdict item (from
    the verdict cache: free) -> joint errors (both wrong, each wrong, the independence expectation)
    -> the stress noise model with A's measured errors, A's posterior and B on the panel's leaves
    -> :class:`PanelRecord`

The posterior takes the two judges as independent given the truth; ``joint.ratio`` above 1 says
they miss together more often than that, and by how much the posterior is then overconfident.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from reward.calibration.record import CalibrationRecord, Prediction
from reward.calibration.stats import Rate


class JointErrors(BaseModel):
    """How two judges' first readings err together on the same verdict items."""

    n: int
    a_wrong: Rate
    b_wrong: Rate
    both_wrong: Rate
    expected_both_if_independent: float = Field(description="P(A wrong) x P(B wrong)")
    ratio: float | None = Field(None, description="both wrong / the independence expectation (1: independent)")
    both_wrong_critical: Rate


class PanelRecord(BaseModel):
    """A panel's calibration: the two judges' identities, their joint errors, and the prediction."""

    judge_a: str
    judge_b: str
    leaves: Literal["critical", "flagged", "all"]
    n_panel_leaves: int | None
    joint: JointErrors
    predicted: Prediction
    predicted_without_panel: Prediction = Field(description="the first judge alone with its posterior")


def joint_errors(labelled: Sequence[Any], reads_a: Sequence[Any], reads_b: Sequence[Any]) -> JointErrors:
    """The joint errors of two judges' verdicts on the same labelled items (failed calls left out)."""
    rows = [(lv, a, b) for lv, a, b in zip(labelled, reads_a, reads_b) if a.ok and b.ok]
    wa = [lv.read_fails(bool(a.met)) != lv.fails for lv, a, _ in rows]
    wb = [lv.read_fails(bool(b.met)) != lv.fails for lv, _, b in rows]
    both = [x and y for x, y in zip(wa, wb)]
    crit = [x and y for (lv, _, _), x, y in zip(rows, wa, wb) if lv.severity == "critical"]
    n = len(rows)
    pa, pb = (sum(wa) / n, sum(wb) / n) if n else (0.0, 0.0)
    expected = pa * pb
    return JointErrors(n=n, a_wrong=Rate.of(sum(wa), n), b_wrong=Rate.of(sum(wb), n), both_wrong=Rate.of(sum(both), n),
                       expected_both_if_independent=expected,
                       ratio=(sum(both) / n) / expected if n and expected > 0 else None,
                       both_wrong_critical=Rate.of(sum(crit), len(crit)))


async def calibrate_panel(judge_a, judge_b, tree, cases, routings, *, leaves: str = "critical",
                          record_a: CalibrationRecord | None = None, record_b: CalibrationRecord | None = None,
                          seeds: Sequence[int] = (0, 1, 2), repeats: int = 10, progress: bool = True,
                          **calibrate_kw) -> tuple[PanelRecord, CalibrationRecord, CalibrationRecord]:
    """Calibrate both judges (or take their records), measure their joint errors and predict the
    panel's detection (see the module docstring). Returns (panel record, record A, record B)."""
    from reward.calibration.items import labelled_items
    from reward.calibration.run import calibrate
    from reward.scoring.posterior import JudgeRates, Posterior
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.stages.panel import flagged_leaves
    from reward.stress.noise import PanelSim, noise_summary

    if record_a is None:
        record_a = await calibrate(judge_a, tree, cases, routings, progress=progress, **calibrate_kw)
    if record_b is None:
        record_b = await calibrate(judge_b, tree, cases, routings, progress=progress, **calibrate_kw)
    verdict_items, _ = labelled_items(tree, cases, routings)
    items = [v.item for v in verdict_items]
    reads_a = await judge_a.grade(items, on_failure="record")  # the calibration's first readings: cached
    reads_b = await judge_b.grade(items, on_failure="record")
    joint = joint_errors(verdict_items, reads_a, reads_b)
    critical = {leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == "critical"}
    chosen = (None if leaves == "all" else frozenset(critical) if leaves == "critical"
              else frozenset(critical | flagged_leaves(record_a, tree)))
    model_a, model_b = record_a.error_model(), record_b.error_model()
    rates = [JudgeRates.from_record(record_a), JudgeRates.from_record(record_b)]

    def predict(posterior, panel) -> Prediction:
        runs = [noise_summary(tree, cases, routings, DEFAULT_SCORING_VARIANT, seed=s, repeats=repeats,
                              confirm_failures=True, errors=model_a, posterior=posterior, panel=panel) for s in seeds]
        return Prediction(detection_rate=statistics.fmean(r["detection_rate"] for r in runs),
                          clean_mean=statistics.fmean(r["clean_mean"] for r in runs),
                          independent_detection_rate=statistics.fmean(r["detection_rate"] for r in runs),
                          cases=len(cases), seeds=list(seeds), repeats=repeats, confirm_failures=True)

    with_panel = predict(Posterior(rates), PanelSim(model_b, frozenset(model_b.systematic_leaves), chosen))
    alone = predict(Posterior(rates[:1]), None)
    rec = PanelRecord(judge_a=record_a.judge_id, judge_b=record_b.judge_id, leaves=leaves,  # type: ignore[arg-type]
                      n_panel_leaves=None if chosen is None else len(chosen), joint=joint, predicted=with_panel,
                      predicted_without_panel=alone)
    return rec, record_a, record_b
