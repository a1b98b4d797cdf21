"""Stability re-scores with the reward's own function: at temperature 0 every stability score
equals what ``RubricReward.score`` gives for the same rows and verdicts, under a routing with
expanded nodes, a multi-parent leaf and a rule-activated (always-on) leaf, with rubric items
combined in, for each scoring variant. The judge is an oracle fake with graded p_yes values (a
fake judge: the component under test is the re-scoring, not the judge)."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from rt_fakes import FakeJudge
from rt_router import _tree

from reward.judge import JudgeConfig
from reward.judge.templates import RELEVANCE, URGENCY
from reward.metaeval.stability import StabilityRun
from reward.router.llm import LLMTreeRouter
from reward.stages.rubric_reward import RubricReward, parse_rollouts


def _p(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def judge(mode="choice", temperature=0.0, use_cache=False) -> FakeJudge:
    def decide(template, item):
        if template.name == URGENCY.name:
            return 0.1
        if template.name == RELEVANCE.name:  # the walk expands A, A2 and B, and b1 stays out
            return 0.2 if "b1" in item.criterion else 0.9
        return _p(item.criterion + item.response)

    return FakeJudge(decide, config=JudgeConfig(mode=mode))


ROLLOUTS = [{"id": f"r{i}", "prompt": [{"role": "user", "content": f"question {i}"}],
             "completion": f"answer number {i} " * (i + 1),
             "rubrics": [{"criterion": f"mentions {i}", "points": 5}, {"criterion": "is rude", "points": -3}]}
            for i in range(8)]


@pytest.mark.parametrize("variant", ["paper", "penalty", "active", "penalty+active"])
@pytest.mark.parametrize("combine", ["tree", "mean"])
def test_stability_at_temperature_zero_equals_score(tmp_path, variant, combine):
    tree = _tree()

    def make_reward(j):
        return RubricReward(tree, LLMTreeRouter(tree, j), j, scoring_variant=variant, combine=combine)

    rollouts = parse_rollouts(ROLLOUTS)
    direct = {s.id: s for s in asyncio.run(make_reward(judge()).score(rollouts))}
    assert all(s.score is not None for s in direct.values())
    assert any(s.routing["expanded"] for s in direct.values())
    assert any(lr.reason == "always_on" for s in direct.values() for lr in s.leaves)
    run = StabilityRun(rollouts, {"fake": judge}, make_reward, tree, out_dir=tmp_path / "stab", temperatures=[0.0],
                       repeats=2, modes=["choice"], baseline=False, progress=False)
    run.run()
    rows = [json.loads(x) for x in (tmp_path / "stab" / "stability.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(ROLLOUTS)
    for row in rows:
        s = direct[row["id"]]
        assert row["score"] == pytest.approx(s.score, abs=1e-12)
        assert row["expanded"] == s.routing["expanded"]
        assert set(row["rule_leaves"]) == {lr.leaf_id for lr in s.leaves if lr.reason == "always_on"}
    assert len({r["score"] for r in rows}) > 1  # the rows differ: a constant would prove nothing
