"""A routing with failed judge calls (issue 10, defect 2): it used to change the active leaf set
silently (a failed relevance call counts as relevant, a failed urgency call lowers the
threshold), report ``failures == []``, escape ``on_failure="raise"`` and stay memoised."""

from __future__ import annotations

import re

import pytest
from rt_fakes import FakeJudge
from rt_router import CONV, _tree

from reward.errors import JudgeError
from reward.judge.templates import RELEVANCE
from reward.router import CachedRouter, LLMTreeRouter
from reward.stages.rubric_reward import RubricReward

REL = {"A": 0.9, "A2": 0.6, "a1": 0.8, "a21": 0.9, "shared": 1.0, "B": 0.1, "b1": 0.9, "b_safe": 0.0}


def _flaky(bad_calls: int) -> FakeJudge:
    """Relevance of node B fails on its first ``bad_calls`` asks; graded leaves are always met."""
    seen = {"B": 0}

    def decide(template, item):
        if template.name == RELEVANCE.name:
            node = re.search(r"^Candidate: ([^:\n]+)", item.criterion, re.MULTILINE).group(1)
            if node == "B":
                seen["B"] += 1
                if seen["B"] <= bad_calls:
                    raise RuntimeError("B down")
            return REL[node]
        if template.name.startswith("urgency"):
            return 0.1
        return 1.0

    return FakeJudge(decide)


ROLLOUTS = [{"id": f"r{k}", "prompt": [{"role": "user", "content": "my chest hurts"}], "completion": "see a doctor"}
            for k in range(3)]


async def test_a_routing_failure_is_retried_once_and_then_scores_normally():
    judge = _flaky(bad_calls=1)
    reward = RubricReward(_tree(), LLMTreeRouter(_tree(), judge), judge)
    out = await reward.score(ROLLOUTS)
    assert all(r.scored and not r.failures for r in out)
    assert out[0].routing["n_failures"] == 0


async def test_a_persistent_routing_failure_unscores_with_the_reason_and_is_not_memoised():
    judge = _flaky(bad_calls=100)
    reward = RubricReward(_tree(), LLMTreeRouter(_tree(), judge), judge)
    out = await reward.score(ROLLOUTS)
    assert all(r.score is None for r in out)
    assert all(r.failures and r.failures[0].startswith("routing:") and "B" in r.failures[0] for r in out)
    n = len(judge.calls)
    await reward.score(ROLLOUTS[:1])  # routed again, not served from the memo
    assert any(c[0] == RELEVANCE.name for c in judge.calls[n:])
    with pytest.raises(JudgeError, match="routing"):
        await RubricReward(_tree(), LLMTreeRouter(_tree(), judge), judge, on_failure="raise").score(ROLLOUTS)


async def test_routing_memo_is_bounded():
    judge = _flaky(bad_calls=0)
    router = CachedRouter(LLMTreeRouter(_tree(), judge), memo_size=2)
    for k in range(5):
        await router.route(({"role": "user", "content": f"q{k}"},))
    assert len(router._memory) == 2
    await router.route(CONV)
    assert len(router._memory) == 2
