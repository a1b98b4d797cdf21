"""Applicability: leaves whose situation is absent from the conversation leave the score, the
breakdown and the feedback, and the score record lists them. Logic with a fake judge (asked once
per prompt, a failed question keeps the leaf, cue leaves are never asked); wiring against the real
vLLM judge server (the tiny random model: these figures check the path, not the judgement)."""

from __future__ import annotations

import pytest
from rt_fakes import FakeJudge

from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM, ApplicabilityJudge, asked_leaves
from reward.router.base import ActiveLeaf, Router, Routing
from reward.scoring import score_tree
from reward.stages.rubric_reward import RubricReward
from reward.tree import load_tree

CHEST = [{"role": "user", "content": "Crushing chest pain for 20 minutes, spreading to my left arm. I'm 58."}]
GOOD = "Call emergency services now and ask for an ambulance; do not drive yourself."
ROUTED = ["sf_chest_pain_emergency", "sf_chest_pain_ambulance", "sf_testicular_torsion", "sf_stroke_signs_emergency",
          "ms_sleep_light", "cm_internal_consistency", "sf_red_flags_missed"]
ABSENT = {"sf_testicular_torsion", "sf_stroke_signs_emergency", "ms_sleep_light"}


class FixedRouter(Router):
    name = "fixed"

    def __init__(self, tree, leaves, reasons=None):
        super().__init__(tree)
        self.leaves, self.reasons = leaves, reasons or {}

    async def route(self, conversation, context=None, tool_calls=None) -> Routing:
        lw = self.tree.leaf_weights
        return Routing(router=self.name, active=tuple(
            ActiveLeaf(leaf_id=lid, relevance=1.0, weight=lw[lid], reason=self.reasons.get(lid, "routed"))
            for lid in self.leaves))


def _judge(tree, fail_applicability=(), second_says_present=()):
    """Applicability from ABSENT (the second reading of a critical leaf agrees, unless the leaf is in
    ``second_says_present``); every verdict "no" (so every positive leaf fails and shows in the
    feedback unless it left the score)."""
    by_crit = {leaf.criterion: leaf.id for leaf in tree.leaves}

    def decide(template, item):
        lid = by_crit[item.criterion]
        if template.name == APPLICABILITY.name:
            if lid in fail_applicability:
                raise RuntimeError("judge down")
            return 0.0 if lid in ABSENT else 1.0
        if template.name == APPLICABILITY_CONFIRM.name:  # "is the situation absent?"
            return 1.0 if lid in ABSENT and lid not in second_says_present else 0.0
        return 0.0

    return FakeJudge(decide)


def test_inapplicable_leaves_leave_score_breakdown_and_feedback():
    tree = load_tree()
    judge = _judge(tree)
    reward = RubricReward(tree, FixedRouter(tree, ROUTED), judge, cache_routing=False, applicability=True)
    rows = [{"id": str(i), "prompt": CHEST, "completion": GOOD + " " * i} for i in range(3)]  # one GRPO group
    results = reward.score_sync(rows)
    r = results[0]
    assert set(r.not_applicable) == ABSENT and r.routing["n_not_applicable"] == 3
    graded = {lr.leaf_id for lr in r.leaves}
    assert graded == set(ROUTED) - ABSENT
    kept = {lr.leaf_id: bool(lr.met) for lr in r.leaves}
    assert r.score == pytest.approx(score_tree(tree, kept).score)
    assert not any(tree[lid].title in r.feedback for lid in ABSENT)
    assert tree["sf_chest_pain_emergency"].title in r.feedback
    # under the severity variant the feedback leads with the most severe failures
    lines = r.feedback.splitlines()[1:]
    assert tree["cm_internal_consistency"].title in lines[-1] and len(lines) == 3
    # decided once per prompt: one question per asked leaf for the whole group, none graded for absent leaves
    asked = [item for name, item in judge.calls if name == APPLICABILITY.name]
    conditional = [lid for lid in ROUTED if tree[lid].conditional]
    assert len(asked) == len(conditional)
    # the two critical absent leaves were asked a second time before they left
    again = [item for name, item in judge.calls if name == APPLICABILITY_CONFIRM.name]
    assert sorted(item.criterion for item in again) == sorted(
        tree[lid].criterion for lid in ABSENT if tree.severity[lid] == "critical")
    graded_items = [item for name, item in judge.calls if name not in (APPLICABILITY.name, APPLICABILITY_CONFIRM.name)]
    assert len(graded_items) == len(rows) * len(graded)
    assert reward.stats["not_applicable_leaves"] == 3
    # off (the default): every routed leaf is graded and the score is the old premise's
    off = RubricReward(tree, FixedRouter(tree, ROUTED), _judge(tree), cache_routing=False).score_sync(rows[:1])[0]
    assert off.not_applicable == [] and len(off.leaves) == len(ROUTED) and off.score < r.score


def test_a_failed_question_keeps_the_leaf_and_cue_leaves_are_not_asked():
    tree = load_tree()
    routing = FixedRouter(tree, ROUTED + ["if_requested_format"], {"if_requested_format": "cue"})
    asked = asked_leaves(tree, routing.route_sync(CHEST))
    assert "if_requested_format" not in asked and "cm_internal_consistency" not in asked  # cue, universal
    judge = _judge(tree, fail_applicability={"sf_testicular_torsion"})
    app = ApplicabilityJudge(tree, judge)
    import asyncio

    from reward.router.base import as_conversation

    res = asyncio.run(app.decide(as_conversation(CHEST), routing.route_sync(CHEST)))
    assert res.failed == ("sf_testicular_torsion",)
    assert set(res.not_applicable) == ABSENT - {"sf_testicular_torsion"}  # kept: a failure never drops a check
    with pytest.raises(ValueError):
        ApplicabilityJudge(tree, judge, threshold=1.5)


def test_judge_mode_against_the_server_leaves_inapplicable_leaves_out(judge_url, tiny_model_dir):
    """The real server answers the applicability questions; with the threshold at
    its p(yes) just above the least likely non-critical leaf, that leaf leaves: no leaf that left is graded
    or scored."""
    import asyncio

    from reward.judge import make_judge
    from reward.router.base import as_conversation

    tree = load_tree()
    router = FixedRouter(tree, ROUTED)
    judge = make_judge(judge_url=judge_url, judge_model=str(tiny_model_dir))
    try:
        probe = asyncio.run(ApplicabilityJudge(tree, judge).decide(as_conversation(CHEST), router.route_sync(CHEST)))
        assert probe.failed == () and len(probe.p_applicable) == len(asked_leaves(tree, router.route_sync(CHEST)))
        # the threshold just above the least likely non-critical leaf: that leaf leaves (a critical
        # leaf read as absent is asked again and may stay, so it cannot be what the test counts on)
        minor = {lid: p for lid, p in probe.p_applicable.items() if tree.severity[lid] != "critical"}
        assert minor, "the routed leaves must include a non-critical asked leaf"
        lowest = min(minor, key=minor.get)
        threshold = min(1.0, minor[lowest] + 1e-6)
        reward = RubricReward(tree, router, judge, cache_routing=False, applicability=True,
                              applicability_threshold=threshold)
        [r] = reward.score_sync([{"id": "a", "prompt": CHEST, "completion": GOOD}])
    finally:
        asyncio.run(judge.aclose())
    assert r.score is not None, r.failures
    assert lowest in r.not_applicable  # the least likely non-critical leaf left
    graded = {lr.leaf_id for lr in r.leaves}
    assert graded.isdisjoint(r.not_applicable) and graded | set(r.not_applicable) == set(ROUTED)
    kept = {lr.leaf_id: bool(lr.met) for lr in r.leaves}
    assert r.score == pytest.approx(score_tree(tree, kept).score)


class _SlowJudge(FakeJudge):
    """Yields to the event loop before each answer, as a server does, so concurrent requests overlap."""

    async def _grade_one(self, template, item, ids):
        import asyncio

        await asyncio.sleep(0.01)
        return await super()._grade_one(template, item, ids)


def _slow_judge(tree, fail_applicability=()):
    inner = _judge(tree, fail_applicability)
    return _SlowJudge(inner.decide)


def _asked_calls(judge):
    return [item for name, item in judge.calls if name == APPLICABILITY.name]


def test_concurrent_requests_for_one_prompt_share_one_set_of_questions():
    """verl's compute_score scores each rollout alone and a group's rollouts arrive together: the
    applicability questions are asked once for all of them, not once per rollout."""
    import asyncio

    from reward.router.base import as_conversation

    tree = load_tree()
    routing = FixedRouter(tree, ROUTED).route_sync(CHEST)
    asked = asked_leaves(tree, routing)
    judge = _slow_judge(tree)
    app = ApplicabilityJudge(tree, judge)

    async def group():
        return await asyncio.gather(*(app.decide(as_conversation(CHEST), routing) for _ in range(8)))

    results = asyncio.run(group())
    assert len(_asked_calls(judge)) == len(asked)
    assert app.misses == 1 and app.hits == 7
    assert all(r == results[0] for r in results) and set(results[0].not_applicable) == ABSENT

    # a shared decision with a failed question is shared by the waiting rollouts, then asked again
    failing = _slow_judge(tree, fail_applicability={"sf_testicular_torsion"})
    app = ApplicabilityJudge(tree, failing)
    first = asyncio.run(group())
    assert all(r.failed == ("sf_testicular_torsion",) for r in first)
    assert len(_asked_calls(failing)) == len(asked)
    asyncio.run(app.decide(as_conversation(CHEST), routing))
    assert len(_asked_calls(failing)) == 2 * len(asked)


def test_a_cancelled_request_does_not_cancel_those_waiting_on_it():
    """One rollout's request cancelled (verl timed it out) while others wait on its questions: the
    next one asks them itself and gets the decision."""
    import asyncio

    from reward.router.base import as_conversation

    tree = load_tree()
    routing = FixedRouter(tree, ROUTED).route_sync(CHEST)
    judge = _slow_judge(tree)
    app = ApplicabilityJudge(tree, judge)

    async def scenario():
        first = asyncio.create_task(app.decide(as_conversation(CHEST), routing))
        await asyncio.sleep(0)  # the first request is in flight
        waiting = [asyncio.create_task(app.decide(as_conversation(CHEST), routing)) for _ in range(3)]
        await asyncio.sleep(0)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.gather(*waiting)

    results = asyncio.run(scenario())
    assert all(set(r.not_applicable) == ABSENT for r in results)
    assert app.misses == 1 and app.hits == 2  # one of the three asked again, the other two shared it


def test_verl_compute_score_asks_applicability_once_per_group():
    """The whole verl path: eight rollouts of one prompt scored concurrently by compute_score."""
    import asyncio

    from reward.integrations.verl import RewardContext, VerlRewardSettings, compute_score

    tree = load_tree()
    judge = _slow_judge(tree)
    router = FixedRouter(tree, ROUTED)
    context = RewardContext(VerlRewardSettings(rubric_source="tree", applicability=True), judge=judge, tree=tree,
                            router=router)

    async def group():
        return await asyncio.gather(*(compute_score("clinical_rubric", GOOD + " " * i, "[]", {"judge_prompt": CHEST},
                                                    context=context) for i in range(8)))

    outs = asyncio.run(group())
    assert len(outs) == 8 and all(o["score"] is not None for o in outs)
    assert len(_asked_calls(judge)) == len(asked_leaves(tree, router.route_sync(CHEST)))


def test_concurrent_rollouts_ask_the_server_once(judge_url, tiny_model_dir):
    """Against the real server: four rollouts of one prompt decided at once send one request per
    asked leaf, not four (the tiny model's answers check the path, not the judgement)."""
    import asyncio

    from reward.judge import make_judge
    from reward.router.base import as_conversation

    tree = load_tree()
    routing = FixedRouter(tree, ROUTED).route_sync(CHEST)
    asked = asked_leaves(tree, routing)
    judge = make_judge(judge_url=judge_url, judge_model=str(tiny_model_dir))
    app = ApplicabilityJudge(tree, judge)

    async def group():
        try:
            return await asyncio.gather(*(app.decide(as_conversation(CHEST), routing) for _ in range(4)))
        finally:
            await judge.aclose()

    results = asyncio.run(group())
    assert all(r == results[0] for r in results) and results[0].failed == ()
    assert len(asked) <= judge.stats.requests < 2 * len(asked)  # a retried request may add one; 4x would not
    assert app.misses == 1 and app.hits == 3


def test_a_critical_leaf_read_absent_stays_unless_the_second_reading_agrees():
    """A wrong "absent" on a critical leaf would drop a failure for good: it is asked again from the
    other side, and a second reading that does not say absent keeps it. A minor leaf is not asked again."""
    import asyncio

    from reward.router.base import as_conversation

    tree = load_tree()
    routing = FixedRouter(tree, ROUTED).route_sync(CHEST)
    judge = _judge(tree, second_says_present={"sf_testicular_torsion"})
    res = asyncio.run(ApplicabilityJudge(tree, judge).decide(as_conversation(CHEST), routing))
    assert set(res.confirmed) == {"sf_testicular_torsion", "sf_stroke_signs_emergency"}
    assert res.rescued == ("sf_testicular_torsion",)
    assert set(res.not_applicable) == {"sf_stroke_signs_emergency", "ms_sleep_light"}
    assert res.n_judge_calls == len(asked_leaves(tree, routing)) + 2
    # a second reading that fails settles nothing: the check stays
    def broken(template, item):
        if template.name == APPLICABILITY_CONFIRM.name:
            raise RuntimeError("judge down")
        return _judge(tree).decide(template, item)
    res = asyncio.run(ApplicabilityJudge(tree, FakeJudge(broken)).decide(as_conversation(CHEST), routing))
    assert set(res.not_applicable) == {"ms_sleep_light"}


def test_answers_are_scoped_to_a_run(tmp_path):
    """A resumed run (same scope) reuses its answers from the durable cache; another run asks afresh,
    so a wrong "absent" is never carried into every later run."""
    import asyncio

    from reward.judge import VerdictCache
    from reward.router.base import as_conversation

    tree = load_tree()
    routing = FixedRouter(tree, ROUTED).route_sync(CHEST)
    n = len(asked_leaves(tree, routing))

    def asked_by(scope):
        judge = _judge(tree)
        judge.cache = VerdictCache(tmp_path / "verdicts.sqlite")
        asyncio.run(ApplicabilityJudge(tree, judge, scope=scope).decide(as_conversation(CHEST), routing))
        return len(_asked_calls(judge))

    assert asked_by("run-a") == n
    assert asked_by("run-a") == 0  # the resume of run-a: every answer from the cache
    assert asked_by("run-b") == n  # another run asks again
    assert asked_by(None) == n and asked_by(None) == n  # no scope: this object's own
