"""The judge reward beside other TRL reward functions, unit level (issue 49, part 1): what each
failure mode hands TRL for a rollout whose judge failed, and the synchronous entry point. TRL's own
advantage computation over these: tests/training/test_trl_beside_other_rewards.py."""

from __future__ import annotations

import asyncio

import pytest
from rt_trl import CHEST, GOOD, POOR, _tree, keyword_judge

from reward.integrations.trl import CombinedReward, RubricRewardFunc, fill_group_mean


def _reward(**kw) -> RubricRewardFunc:
    return RubricRewardFunc(judge=keyword_judge(), tree=_tree(), router="static", rubric_source="tree", **kw)


PROMPTS = [CHEST] * 4
COMPLETIONS = [GOOD, POOR, "crash: the judge fails on this one", GOOD]


def test_skip_leaves_none_group_mean_fills_the_groups_mean():
    skipped = asyncio.run(_reward()(PROMPTS, COMPLETIONS))
    assert skipped[2] is None and None not in skipped[:2] + skipped[3:]
    filled = asyncio.run(_reward(on_failure="group_mean")(PROMPTS, COMPLETIONS))
    assert filled[2] == pytest.approx((skipped[0] + skipped[1] + skipped[3]) / 3, abs=1e-12)
    assert filled[:2] == skipped[:2]


def test_group_mean_stays_within_a_group_and_leaves_a_group_without_scores_none():
    assert fill_group_mean([1.0, None, 0.0, None, None], ["a", "a", "b", "b", "c"]) == [1.0, 1.0, 0.0, 0.0, None]


def test_combined_reward_is_none_for_the_whole_rollout_and_weights_the_rest():
    logs = {}
    combined = CombinedReward([_reward(), lambda prompts, completions, **kw: [1.0] * len(completions)],
                              weights=[1.0, 0.5])
    ours = asyncio.run(_reward()(PROMPTS, COMPLETIONS))
    out = asyncio.run(combined(PROMPTS, COMPLETIONS, log_metric=lambda k, v: logs.__setitem__(k, v)))
    assert out[2] is None
    assert out[0] == pytest.approx(ours[0] + 0.5, abs=1e-12) and out[1] == pytest.approx(ours[1] + 0.5, abs=1e-12)
    assert logs["combined/left_out"] == 0.25 and "combined/clinical_rubric" in logs


def test_combined_reward_refuses_what_would_hide_the_failure():
    with pytest.raises(ValueError, match="on_failure='skip'"):
        CombinedReward([_reward(on_failure="group_mean")])
    with pytest.raises(ValueError, match="2 weights for 1"):
        CombinedReward([_reward()], weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="on_failure must be one of"):
        _reward(on_failure="zero")


def test_the_synchronous_entry_point_returns_scores_not_a_coroutine():
    """In a notebook (or any code with a running loop) ``reward(...)`` is a coroutine; ``score_sync``
    gives the scores, the same as awaiting it."""
    reward = _reward()
    got = reward.score_sync(PROMPTS, COMPLETIONS)
    assert isinstance(got, list) and got == asyncio.run(_reward()(PROMPTS, COMPLETIONS))

    async def inside_a_running_loop():  # what a notebook cell is
        return reward.score_sync(PROMPTS[:1], COMPLETIONS[:1])

    assert asyncio.run(inside_a_running_loop())[0] == got[0]
    assert CombinedReward([reward]).score_sync(PROMPTS, COMPLETIONS)[0] == got[0]
