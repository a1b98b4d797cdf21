"""``judge calibrate`` recovers a judge whose errors are known: a fake that reads the labels and errs
as told (false fail 0.10, false pass 0.05, re-read correlation 0.5, 5% of leaves always misread,
applicability errors 0.10) comes out with every injected figure inside the reported 95% interval,
its systematic leaves named, and a prediction of what the reward can survive.

The fake draws its errors from a hash of each item, so a run is deterministic; four fakes with
other salts are four independent samples of the same judge. A 95% interval misses the truth one
time in twenty, so each figure must be covered in at least three of the four (a miss in two of
four happens with probability 0.014 for a correct interval) and the mean estimate must sit near
the truth (the estimator is not biased)."""

from __future__ import annotations

import asyncio
import statistics

import pytest
from rt_calibration import erring_judge

from reward.calibration.run import calibrate
from reward.router import StaticRouter
from reward.stress import load_cases
from reward.tree import load_tree

SALTS = ("0", "1", "2", "3")


@pytest.fixture(scope="module")
def measured():
    tree = load_tree()
    cases = load_cases(tree=tree)
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in cases]
    judge, systematic = erring_judge(tree, cases, routings)
    rec = asyncio.run(calibrate(judge, tree, cases, routings, router="static", progress=False))
    others = []
    for salt in SALTS[1:]:
        other, _ = erring_judge(tree, cases, routings, salt=salt)
        others.append(asyncio.run(calibrate(other, tree, cases, routings, router="static", progress=False,
                                            predict=False)))
    return tree, rec, systematic, [rec, *others]


FIGURES = {  # injected value, how the record reports it
    "false fail": (0.10, lambda r: r.false_fail["*"]),
    "false pass": (0.05, lambda r: r.false_pass["*"]),
    "re-read correlation": (0.5, lambda r: r.rereads.correlation),
    "applicability: present read absent": (0.10, lambda r: r.app_false_absent["*"]),
    "applicability: absent read present": (0.10, lambda r: r.app_false_present["*"]),
}


@pytest.mark.parametrize("figure", sorted(FIGURES))
def test_the_injected_figures_lie_in_the_reported_intervals(measured, figure):
    truth, get = FIGURES[figure]
    recs = measured[3]
    covered = [get(r).covers(truth) for r in recs]
    assert sum(covered) >= 3, [get(r) for r in recs]
    estimates = [get(r).rate if hasattr(get(r), "rate") else get(r).estimate for r in recs]
    # unbiased: the mean of four estimates within 3 standard errors of one estimate (about half an interval)
    half = statistics.fmean((get(r).high - get(r).low) / 2 for r in recs)
    assert abs(statistics.fmean(estimates) - truth) < 0.75 * half, estimates


def test_the_intervals_are_informative(measured):
    _, rec, _, _ = measured
    assert rec.false_fail["*"].n > 500 and rec.false_pass["*"].n > 100 and rec.failed_items == 0
    # a wrong figure falls outside them
    assert not rec.false_fail["*"].covers(0.2) and not rec.rereads.correlation.covers(0.0)


def test_systematic_leaves_are_named(measured):
    tree, rec, systematic, _ = measured
    found = {s.leaf_id for s in rec.systematic}
    # an ordinary leaf is named only when chance misread every one of its items: with about 150 leaves
    # graded twice at error rates of 0.05-0.10 that happens to one or two (0.5-1% each)
    assert all(s.errors == s.n for s in rec.systematic) and len(found - systematic) <= 3
    # every systematic leaf the cases grade (two items or more: a clean and a perturbed reply) is named
    from collections import Counter

    from reward.calibration.items import labelled_items

    cases = load_cases(tree=tree)
    router = StaticRouter(tree)
    items, _ = labelled_items(tree, cases, [router.route_sync(c.prompt) for c in cases])
    graded = Counter(lv.leaf_id for lv in items)
    assert found & systematic == {lid for lid in systematic if graded[lid] >= 2} and found & systematic


def test_the_error_model_is_the_measured_one(measured):
    _, rec, systematic, _ = measured
    model = rec.error_model()
    assert model.false_fail["*"] == pytest.approx(rec.false_fail["*"].rate, abs=1e-12)
    assert model.reread_correlation == pytest.approx(rec.rereads.correlation.estimate, abs=1e-12)
    assert set(model.systematic_leaves) == {s.leaf_id for s in rec.systematic}
    # and the prediction is that of the noise model under it: correlated errors predict worse than
    # independent ones at the same rate
    assert rec.predicted.detection_rate < rec.predicted.independent_detection_rate


def test_a_perfect_judge_calibrates_perfect():
    tree = load_tree()
    cases = load_cases(tree=tree)[:12]
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in cases]
    judge, _ = erring_judge(tree, cases, routings, false_fail=0, false_pass=0, correlation=0, systematic_share=0,
                            app_false_absent=0, app_false_present=0)
    rec = asyncio.run(calibrate(judge, tree, cases, routings, router="static", progress=False))
    assert rec.verdict_error.k == 0 and rec.systematic == [] and rec.critical_false_pass.k == 0
    assert rec.predicted.detection_rate == 1.0
    assert rec.soft.brier == 0.0
