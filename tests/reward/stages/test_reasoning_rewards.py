"""Stage 3 grades the final answer after </think> (reward.stages.reasoning): two rollouts with the
same answer and different thinking get identical rewards in the TRL adapter (tree and rows), the
verl adapter and RubricReward (what ``rubricstree score`` runs); an unclosed think is a counted
format failure scored ``format_failure_score`` and never sent to the judge. The control
(``grade: full``) shows the thinking would otherwise change the reward. Keyword fake judge:
verdicts are written down as keyword rules, so the expected scores are known."""

from __future__ import annotations

import json

import pytest
from rt_trl import CHEST, GOOD, RUBRICS, Log, _tree, keyword_judge

from reward.integrations.trl import RubricRewardFunc
from reward.integrations.verl import RewardContext, VerlRewardSettings, compute_score
from reward.stages.reasoning import graded_text, split_reasoning
from reward.stages.rubric_reward import RubricReward

# the thinking mentions the negative items ("nothing", "wait"): graded in full they would fire
THINK_A = "<think>Could it be nothing? Maybe wait and see.</think>\n"
THINK_B = "<think>Chest pain with sweating: treat as cardiac.</think>\n"
UNCLOSED = "<think>Let me consider emergency services and aspirin... still thinking"


def test_graded_text():
    assert graded_text(THINK_A + GOOD).text == GOOD and not graded_text(THINK_A + GOOD).format_failure
    assert graded_text(GOOD) == graded_text(GOOD, "full")  # no think block: the text as is
    bad = graded_text(UNCLOSED)
    assert bad.format_failure and bad.text == ""
    assert graded_text(UNCLOSED, "full").text == UNCLOSED and not graded_text(UNCLOSED, "full").format_failure
    assert split_reasoning(THINK_B + GOOD) == (GOOD, "Chest pain with sweating: treat as cardiac.")
    with pytest.raises(ValueError, match="grade"):
        graded_text(GOOD, "reasoning")  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["rows", "both"])
async def test_trl_same_answer_different_thinking_same_reward(source):
    judge = keyword_judge()
    f = RubricRewardFunc(judge, tree=_tree(), router="static", rubric_source=source, combine="points")
    log = Log()
    out = await f([CHEST] * 3, [THINK_A + GOOD, THINK_B + GOOD, UNCLOSED], rubrics=[RUBRICS] * 3, log_metric=log)
    assert out[0] == out[1] == pytest.approx(1.0)
    assert out[2] < 0.0  # the documented default, floor: below the worst finished answer to the row
    assert log.d["clinical_rubric/format_failures"] == pytest.approx(1 / 3)
    assert log.d["clinical_rubric/unscored"] == 0.0
    assert all("still thinking" not in item.response for _, item in judge.calls)  # never judged
    assert all("<think>" not in item.response for _, item in judge.calls)

    full = RubricRewardFunc(keyword_judge(), tree=_tree(), router="static", rubric_source=source,
                            combine="points", grade="full")
    out_full = await full([CHEST] * 2, [THINK_A + GOOD, THINK_B + GOOD], rubrics=[RUBRICS] * 2)
    assert out_full[0] < out_full[1]  # control: the thinking's "nothing" fires a -5 item


async def test_format_failure_score_is_settable_and_none_leaves_it_unscored():
    f = RubricRewardFunc(keyword_judge(), rubric_source="rows", format_failure_score=-0.5)
    assert await f([CHEST], [UNCLOSED], rubrics=[RUBRICS]) == [-0.5]
    g = RubricRewardFunc(keyword_judge(), rubric_source="rows", format_failure_score=None)
    log = Log()
    assert await g([CHEST], [UNCLOSED], rubrics=[RUBRICS], log_metric=log) == [None]
    assert log.d["clinical_rubric/format_failures"] == 1.0


async def test_rubric_reward_counts_format_failures():
    from reward.router import StaticRouter

    tree = _tree()
    reward = RubricReward(tree, StaticRouter(tree), keyword_judge(), combine="points")
    recs = [{"id": str(i), "prompt": CHEST, "completion": c, "rubrics": RUBRICS}
            for i, c in enumerate([THINK_A + GOOD, THINK_B + GOOD, UNCLOSED])]
    a, b, u = await reward.score(recs)
    assert a.score == b.score and a.tree_score == b.tree_score and a.points_score == b.points_score
    assert u.format_failure and u.score == 0.0 and not u.failures
    assert reward.stats["format_failures"] == 1 and reward.stats["unscored"] == 0


@pytest.mark.parametrize("source", ["rows", "both"])
async def test_verl_same_answer_different_thinking_same_reward(source):
    from reward.router import StaticRouter

    tree = _tree()
    c = RewardContext(VerlRewardSettings(rubric_source=source, combine="points"), judge=keyword_judge(),
                      tree=tree, router=StaticRouter(tree))
    info = {"judge_prompt": CHEST, "prompt_id": "p"}
    a, b, u = [await compute_score("healthbench", t, json.dumps(RUBRICS), info, context=c)
               for t in (THINK_A + GOOD, THINK_B + GOOD, UNCLOSED)]
    assert a["score"] == b["score"] == pytest.approx(1.0)
    # the default floor: 0.1 below the row's worst finished score (-5 of 10 positive points)
    assert u["score"] == pytest.approx(-0.6) and u["format_failure"] is True and not u["unscored"]
    assert a["format_failure"] is False
