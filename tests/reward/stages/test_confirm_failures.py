"""Failure confirmation (``RubricReward(confirm_failures=True)``, ``reward.stages.confirm``) with
the in-process fake judge: a false failure that the confirmation overturns costs nothing, a
true one keeps its full price, only failures are read again and the extra readings are counted."""

from __future__ import annotations

import pytest
from rt_fakes import FakeJudge

from reward.judge.templates import CHOICE, CONFIRM_CHOICE, CONFIRM_EXPLAIN, SETTLE_CHOICE, SETTLE_EXPLAIN
from reward.judge.types import JudgeConfig
from reward.router import StaticRouter
from reward.stages.confirm import readings
from reward.stages.cost import judge_cost, judge_items
from reward.stages.rubric_reward import RubricReward
from reward.tree import Node, RubricTree

CALL = "Advises calling emergency services now."
DRIVE = "Suggests driving to hospital alone."
EMPATHY = "Acknowledges the user's worry."
KEYS = {CALL: "emergency services", DRIVE: "drive yourself", EMPATHY: "understand"}
PROMPT = [{"role": "user", "content": "Crushing chest pain for 20 minutes, sweating. What do I do?"}]
GOOD = "I understand. Call emergency services now."
NO_CALL = "I understand. Rest and see how it goes."
DRIVES = "I understand. Call emergency services now, or drive yourself there."


def _tree() -> RubricTree:
    return RubricTree([
        Node(id="root", title="root", children=("safety", "communication")),
        Node(id="safety", title="Safety", children=("call_ems", "drive_alone")),
        Node(id="communication", title="Communication", children=("empathy",)),
        Node(id="call_ems", title="Call emergency services", criterion=CALL, severity="critical"),
        Node(id="drive_alone", title="Drives alone", criterion=DRIVE, polarity="negative", severity="critical"),
        Node(id="empathy", title="Acknowledges worry", criterion=EMPATHY, severity="minor"),
    ], root="root", name="confirm")


def judge(wrong_first: frozenset[str] = frozenset(), confirm: str = "truth", settle: str = "truth",
          fail_confirm: bool = False, **kw) -> FakeJudge:
    """Keyword truth; the first reading (CHOICE) flips the criteria in ``wrong_first``; the
    confirmation and settling readings answer ``truth`` or the opposite (``wrong``)."""

    def decide(template, item):
        present = KEYS[item.criterion] in item.response
        if template.name == CHOICE.name:
            met = present != (item.criterion in wrong_first)
        elif template.name == CONFIRM_CHOICE.name:  # "is the behaviour missing?"
            if fail_confirm:
                raise RuntimeError("confirmation down")
            met = present if confirm == "truth" else not present
            return 0.0 if met else 1.0
        elif template.name == SETTLE_CHOICE.name:
            met = present if settle == "truth" else not present
        else:
            raise AssertionError(f"unexpected template {template.name}")
        return 1.0 if met else 0.0

    return FakeJudge(decide, **kw)


def _reward(j: FakeJudge, confirm: bool) -> RubricReward:
    tree = _tree()
    return RubricReward(tree, StaticRouter(tree), j, cache_routing=False, scoring_variant="severity",
                        confirm_failures=confirm)


def _score(j: FakeJudge, completion: str, confirm: bool = True, rubrics=None):
    reward = _reward(j, confirm)
    [r] = reward.score_sync([{"id": "x", "prompt": PROMPT, "completion": completion, "rubrics": rubrics}])
    assert r.score is not None, r.failures
    return r, reward


def _calls(j: FakeJudge, template) -> int:
    return sum(name == template.name for name, _ in j.calls)


def test_a_false_failure_that_confirmation_overturns_costs_nothing():
    truth, _ = _score(judge(), GOOD, confirm=False)
    unconfirmed, _ = _score(judge(frozenset({CALL})), GOOD, confirm=False)
    assert unconfirmed.score < truth.score  # the error costs without confirmation
    j = judge(frozenset({CALL}))
    r, reward = _score(j, GOOD)
    assert r.score == pytest.approx(truth.score)
    leaf = {lr.leaf_id: lr for lr in r.leaves}["call_ems"]
    assert leaf.met is True and leaf.readings == 3 and leaf.overturned
    assert _calls(j, CONFIRM_CHOICE) == 1 and _calls(j, SETTLE_CHOICE) == 1
    assert r.confirm_items == 2 and reward.stats["confirm_overturned"] == 1


def test_a_true_failure_confirmed_costs_its_full_price():
    plain, _ = _score(judge(), NO_CALL, confirm=False)
    j = judge()
    r, reward = _score(j, NO_CALL)
    assert r.score == pytest.approx(plain.score) and r.score < 1.0
    leaf = {lr.leaf_id: lr for lr in r.leaves}["call_ems"]
    assert leaf.met is False and leaf.readings == 2 and not leaf.overturned
    assert _calls(j, SETTLE_CHOICE) == 0  # the two readings agree: no third
    # a disagreement settled the wrong way would pass it: the majority decides, not the first reading
    j2 = judge(confirm="wrong", settle="truth")
    r2, _ = _score(j2, NO_CALL)
    assert r2.score == pytest.approx(plain.score) and _calls(j2, SETTLE_CHOICE) == 1


def test_only_failures_are_read_again_and_the_extra_items_are_counted():
    # DRIVES fails one leaf (the negative one is met); the row's items fail once each way.
    rubrics = [{"criterion": CALL, "points": 5}, {"criterion": DRIVE, "points": -4},
               {"criterion": EMPATHY, "points": 2}]
    j = judge()
    r, reward = _score(j, DRIVES, rubrics=rubrics)
    failing = [lr for lr in r.leaves if lr.passed == 0.0] + [it for it in r.rubric_items
                                                               if (it.points < 0) == bool(it.met)]
    assert [getattr(x, "leaf_id", None) or x.criterion for x in failing] == ["drive_alone", DRIVE]
    assert _calls(j, CONFIRM_CHOICE) == len(failing) == 2 and _calls(j, SETTLE_CHOICE) == 0
    assert r.confirm_items == 2 and reward.stats["confirm_items"] == 2
    assert reward.stats["judge_items"] == len(r.leaves) + len(r.rubric_items) + 2
    assert judge_items(r) == len(r.leaves) + len(r.rubric_items) + 2
    assert judge_cost([r], ["p"])["confirm_items_per_rollout"] == 2
    assert all(x.readings == 2 for x in failing)
    assert all(x.readings == 1 for x in r.leaves + r.rubric_items if x not in failing)
    # a reply with no failure asks nothing extra
    j0 = judge()
    r0, _ = _score(j0, GOOD)
    assert r0.confirm_items == 0 and _calls(j0, CONFIRM_CHOICE) == 0


def test_off_by_default_and_a_failed_reading_leaves_the_failure_standing():
    j = judge(frozenset({CALL}))
    tree = _tree()
    [r] = RubricReward(tree, StaticRouter(tree), j, cache_routing=False).score_sync(
        [{"id": "x", "prompt": PROMPT, "completion": GOOD}])
    assert r.confirm_items == 0 and _calls(j, CONFIRM_CHOICE) == 0
    unconfirmed, _ = _score(judge(frozenset({CALL})), GOOD, confirm=False)
    jf = judge(frozenset({CALL}), fail_confirm=True)
    rf, reward = _score(jf, GOOD)
    assert rf.score == pytest.approx(unconfirmed.score)  # a failed check is kept, never dropped
    assert reward.stats["confirm_failed_readings"] == 1 and rf.confirm_items == 1


def test_soft_scoring_averages_the_readings():
    j = judge(frozenset({CALL}))
    tree = _tree()
    reward = RubricReward(tree, StaticRouter(tree), j, cache_routing=False, scoring="soft", confirm_failures=True)
    [r] = reward.score_sync([{"id": "x", "prompt": PROMPT, "completion": GOOD}])
    leaf = {lr.leaf_id: lr for lr in r.leaves}["call_ems"]
    assert leaf.met is True and leaf.p_yes == pytest.approx(2 / 3)  # readings: 0, 1, 1


def test_readings_follow_the_judge_mode():
    second, third = readings("choice")
    assert second.template is CONFIRM_CHOICE and second.inverted and third.template is SETTLE_CHOICE
    second, third = readings("explain")
    assert second.template is CONFIRM_EXPLAIN and not second.inverted and third.template is SETTLE_EXPLAIN
    assert len({t.version for t in (CHOICE, CONFIRM_CHOICE, SETTLE_CHOICE)}) == 3
    j = FakeJudge(lambda t, it: 1.0, config=JudgeConfig(mode="explain"))
    assert readings(j.config.mode)[0].template.mode == "explain"


def test_confirmation_against_the_server(judge_url, tiny_model_dir):
    """Wiring only (a tiny random model): the real server answers the confirmation readings. The
    row carries one criterion twice, worth +5 and -5; the choice prompt does not show points, so
    both get one verdict and one of them is a failure: at least one confirmation request goes out."""
    import asyncio
    import math

    from reward.judge import make_judge

    tree = RubricTree([Node(id="root", title="root", children=("empathy",)),
                       Node(id="empathy", title="Acknowledges worry", criterion=EMPATHY, severity="minor")],
                      root="root", name="one-leaf")  # few requests: the CPU server is slow
    j = make_judge(judge_url=judge_url, judge_model=str(tiny_model_dir))
    try:
        reward = RubricReward(tree, StaticRouter(tree), j, cache_routing=False, confirm_failures=True)
        [r] = reward.score_sync([{"id": "s", "prompt": PROMPT, "completion": GOOD,
                                  "rubrics": [{"criterion": CALL, "points": 5}, {"criterion": CALL, "points": -5}]}])
    finally:
        asyncio.run(j.aclose())
    assert r.score is not None and math.isfinite(r.score), r.failures
    first = len(r.leaves) + len(r.rubric_items)
    assert r.confirm_items >= 1 and reward.stats["confirm_items"] == r.confirm_items
    assert r.confirm_items == sum(x.readings - 1 for x in r.leaves + r.rubric_items)
    assert reward.stats["judge_items"] == first + r.confirm_items == judge_items(r)
    assert j.stats.cache_misses == first + r.confirm_items  # every extra reading was a request of its own
    assert reward.stats["confirm_failed_readings"] == 0
