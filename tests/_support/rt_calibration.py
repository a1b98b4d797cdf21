"""A judge with known, injected errors for calibration tests: it reads the truth from the stress
cases' labels and errs as told (false fail, false pass, re-read correlation, systematic leaves,
applicability errors), deterministically per item (a hash, not a random stream: the same item is
read the same way in every run and in any order)."""

from __future__ import annotations

import hashlib

from rt_fakes import FakeJudge

from reward.calibration.items import labelled_items
from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM
from reward.stages.confirm import readings


def _u(*parts: str) -> float:
    h = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def erring_judge(tree, cases, routings, *, false_fail=0.10, false_pass=0.05, correlation=0.5,
                 systematic_share=0.05, app_false_absent=0.10, app_false_present=0.10, salt="0"):
    """A FakeJudge erring as told; returns (judge, the systematic leaf ids)."""
    verdicts, apps = labelled_items(tree, cases, routings)
    truth = {(lv.item.response, lv.item.criterion): lv for lv in verdicts}
    present = {(la.item.conversation[-1].content, la.item.criterion): la.present for la in apps}
    ids = sorted(leaf.id for leaf in tree.leaves)
    systematic = {lid for lid in ids if _u(salt, "systematic", lid) < systematic_share}
    second, third = readings("choice")
    reread = {second.template.name: second, third.template.name: third}

    def first_fails(lv, key) -> bool:
        if lv.leaf_id in systematic:
            return not lv.fails
        rate = false_pass if lv.fails else false_fail
        return lv.fails ^ (_u(salt, "first", *key) < rate)

    def decide(template, item) -> float:
        if template.name in (APPLICABILITY.name, APPLICABILITY_CONFIRM.name):
            is_present = present.get((item.conversation[-1].content, item.criterion), True)
            rate = app_false_absent if is_present else app_false_present
            says_present = is_present ^ (_u(salt, template.name, item.conversation[-1].content, item.criterion) < rate)
            return float(says_present if template.name == APPLICABILITY.name else not says_present)
        key = (item.response, item.criterion)
        lv = truth[key]
        fails = first_fails(lv, key)
        if template.name in reread:  # a re-reading: the first answer with p = correlation, else a fresh draw
            if lv.leaf_id in systematic:
                fails = not lv.fails
            elif _u(salt, "copy", template.name, *key) >= correlation:
                rate = false_pass if lv.fails else false_fail
                fails = lv.fails ^ (_u(salt, "fresh", template.name, *key) < rate)
            met = fails if lv.polarity == "negative" else not fails
            return float(not met) if reread[template.name].inverted else float(met)
        return float(fails if lv.polarity == "negative" else not fails)

    return FakeJudge(decide), systematic


def record_with(judge_id, *, detection, critical_false_pass, independent=None, taxonomy_fingerprint=None,
                cases=60, judge=None):
    """A calibration record of ``judge_id`` with the given predicted detection and critical
    false-pass counts (the gate's two figures), for gate tests that need no calibration run; made
    on the packaged taxonomy unless ``taxonomy_fingerprint`` says otherwise."""
    from reward.calibration.record import CalibrationRecord, Prediction
    from reward.calibration.stats import Rate
    from reward.router.base import tree_fingerprint
    from reward.tree import load_tree

    r = Rate.of
    k, n = critical_false_pass
    taxonomy_fingerprint = taxonomy_fingerprint or tree_fingerprint(load_tree())[:16]
    return CalibrationRecord(
        judge_id=judge_id, judge=judge or {"mode": "choice"}, cases="test", cases_fingerprint="f",
        taxonomy_fingerprint=taxonomy_fingerprint, router="static",
        created="now", verdict_items=100, applicability_items=0, failed_items=0, verdict_error=r(5, 100),
        false_fail={"*": r(5, 70)}, false_pass={"*": r(k, n), "critical_all": r(k, n)}, false_fail_all=r(5, 70),
        false_pass_all=r(k, n), app_false_absent={"*": r(0, 0)}, app_false_present={"*": r(0, 0)},
        predicted=Prediction(detection_rate=detection, clean_mean=0.9, independent_detection_rate=independent or detection,
                             cases=cases, seeds=[0], repeats=1, confirm_failures=True))
