"""Judge items per rollout and per prompt (reward.stages.cost)."""

from __future__ import annotations

import pytest

from reward.stages.cost import items_per_prompt, judge_cost, judge_items
from reward.stages.rubric_reward import ItemResult, LeafResult, RolloutScore


def _res(n_leaves: int, n_items: int) -> RolloutScore:
    leaves = [LeafResult(leaf_id=f"l{i}", title="t", polarity="positive", met=True, p_yes=1.0, passed=1.0,
                         relevance=1.0, weight=0.1, reason="routed") for i in range(n_leaves)]
    items = [ItemResult(criterion=f"c{i}", points=1.0, met=True, p_yes=1.0) for i in range(n_items)]
    return RolloutScore(id="x", score=1.0, scoring="hard", combine="mean", leaves=leaves, rubric_items=items)


def test_items_per_rollout_and_per_prompt():
    results = [_res(10, 3), _res(10, 3), _res(4, 0)]
    keys = ["a", "a", "b"]
    assert [judge_items(r) for r in results] == [13, 13, 4]
    cost = judge_cost(results, keys)
    assert cost["judge_items_per_rollout"] == pytest.approx(30 / 3)
    assert cost["judge_items_per_prompt"] == pytest.approx(30 / 2)
    assert cost["leaf_items_per_rollout"] == pytest.approx(8) and cost["rubric_items_per_rollout"] == pytest.approx(2)
    assert items_per_prompt(results, keys) == [26, 26, 4]
    assert judge_cost([], [])["judge_items_per_rollout"] is None


def test_applicability_questions_count_once_per_prompt():
    # a prompt's applicability step (5 questions for "a", 2 for "b") is paid once, not per rollout
    results = [_res(10, 3), _res(10, 3), _res(4, 0)]
    for r, n in zip(results, (5, 5, 2)):
        r.routing["n_applicability_calls"] = n
    keys = ["a", "a", "b"]
    cost = judge_cost(results, keys)
    assert cost["judge_items_per_prompt"] == pytest.approx((26 + 5 + 4 + 2) / 2)
    assert cost["judge_items_per_rollout"] == pytest.approx((26 + 5 + 4 + 2) / 3)
    assert cost["applicability_items_per_prompt"] == pytest.approx(7 / 2)
    assert items_per_prompt(results, keys) == [31, 31, 6]


def test_a_rollout_scored_without_grading_does_not_hide_its_prompts_applicability_cost():
    # an unfinished answer (format failure) records no routing: the prompt's questions still count,
    # whichever rollout comes first
    unfinished = RolloutScore(id="ff", score=0.0, scoring="hard", combine="mean", format_failure=True)
    graded = _res(3, 0)
    graded.routing["n_applicability_calls"] = 5
    for order in ([unfinished, graded], [graded, unfinished]):
        cost = judge_cost(order, ["p", "p"])
        assert cost["applicability_items_per_prompt"] == pytest.approx(5)
        assert cost["judge_items_per_prompt"] == pytest.approx(8)
        assert items_per_prompt(order, ["p", "p"]) == [8, 8]


async def test_a_group_of_unfinished_rollouts_still_counts_its_applicability_questions():
    # every rollout of the prompt has an unclosed <think>: nothing is graded, but the prompt's
    # applicability questions were asked (the floor score needs them) and are counted
    from rt_fakes import FakeJudge

    from reward.router import StaticRouter
    from reward.stages.rubric_reward import Rollout, RubricReward
    from reward.tree import LeafTags, Node, RubricTree

    tree = RubricTree([
        Node(id="root", title="root", children=("a", "b")),
        Node(id="a", title="A", criterion="If the user reports chest pain, advises calling emergency services.",
             tags=LeafTags(axis="accuracy")),
        Node(id="b", title="B", criterion="If the user is pregnant, asks about the due date.",
             tags=LeafTags(axis="accuracy")),
    ], root="root", name="two")
    judge = FakeJudge(lambda t, i: 1.0)
    reward = RubricReward(tree, StaticRouter(tree), judge, applicability=True, format_failure_score="floor")
    prompt = [{"role": "user", "content": "Chest pain. What now?"}]
    rollouts = [Rollout(id=f"r{k}", prompt=prompt, completion="<think>still thinking") for k in range(2)]
    results = await reward.score(rollouts)
    assert all(r.format_failure for r in results)
    cost = judge_cost(results, ["p", "p"])
    assert cost["applicability_items_per_prompt"] == pytest.approx(2)
    assert cost["judge_items_per_prompt"] == pytest.approx(2)
