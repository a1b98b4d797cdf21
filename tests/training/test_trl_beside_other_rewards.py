"""Our reward beside a user's other TRL reward functions (issue 49, part 1), through TRL's own
advantage code: ``GRPOTrainer._generate_and_score_completions`` on the tiny random Qwen3 (real
generation, real grouping and normalisation).

TRL leaves a rollout out of its group only when EVERY reward function returns None; otherwise it
sums with nansum, so our None beside a format reward became 0 and the rollout whose judge failed got
a negative advantage. ``CombinedReward`` (one function: None for the whole rollout) and
``on_failure="group_mean"`` (our part of it is its group's mean) keep a failed judge call out of the
advantage. The format reward here pays every rollout 1.0, so any advantage of the failed rollout
comes from how our reward's failure was read."""

from __future__ import annotations

import pytest
from rt_fakes import FakeJudge

pytest.importorskip("trl")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow

GROUP = 4


def format_reward(prompts, completions, **kwargs):
    """A user's reward: every completion is well formed."""
    return [1.0] * len(completions)


def flaky_judge():
    """Judges by length (a spread of scores); its calls fail for the first completion it sees."""
    failing: dict = {}

    def decide(template, item):
        failing.setdefault("response", item.response)
        if item.response == failing["response"]:
            raise RuntimeError("judge timed out")
        return 1.0 if len(item.response) % 2 else 0.0

    return FakeJudge.consistent(decide), failing


def _advantages(tiny_model_dir, tmp_path, reward_funcs):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "My chest hurts. What should I do?"}]}] * GROUP)
    config = GRPOConfig(output_dir=str(tmp_path / "run"), loss_type="grpo", importance_sampling_level="sequence",
                        num_generations=GROUP, per_device_train_batch_size=GROUP, max_completion_length=8,
                        max_steps=1, use_cpu=True, report_to="none", logging_steps=1, seed=0)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=reward_funcs, args=config, train_dataset=data)
    batch = [data[i] for i in range(GROUP)]
    out = trainer._generate_and_score_completions(batch)
    texts = trainer.processing_class.batch_decode(out["completion_ids"], skip_special_tokens=True)
    return out["advantages"].tolist(), texts


def _rubric(judge, **kw):
    from reward.integrations.trl import RubricRewardFunc

    return RubricRewardFunc(judge=judge, router="static", router_options={"axes": ["instruction_following"]},
                            rubric_source="tree", **kw)  # prompts alone: no rubrics column


def _failed_index(failing, texts):
    assert "response" in failing
    return next(i for i, t in enumerate(texts) if t.strip() == failing["response"].strip() or
                failing["response"].strip().startswith(t.strip()[:20]))


def test_a_plain_list_penalises_the_rollout_whose_judge_failed(tiny_model_dir, tmp_path):
    """The defect as it was: None beside another function is summed as 0."""
    judge, failing = flaky_judge()
    adv, texts = _advantages(tiny_model_dir, tmp_path, [_rubric(judge), format_reward])
    i = _failed_index(failing, texts)
    assert adv[i] < 0, (adv, i)


def test_combined_reward_leaves_the_rollout_out_whole(tiny_model_dir, tmp_path):
    from reward.integrations.trl import CombinedReward

    judge, failing = flaky_judge()
    adv, texts = _advantages(tiny_model_dir, tmp_path, [CombinedReward([_rubric(judge), format_reward],
                                                                      weights=[1.0, 0.2])])
    i = _failed_index(failing, texts)
    assert adv[i] == 0.0, (adv, i)


def test_group_mean_adds_nothing_to_the_failed_rollouts_advantage(tiny_model_dir, tmp_path):
    judge, failing = flaky_judge()
    adv, texts = _advantages(tiny_model_dir, tmp_path, [_rubric(judge, on_failure="group_mean"), format_reward])
    i = _failed_index(failing, texts)
    assert adv[i] == pytest.approx(0.0, abs=1e-5), (adv, i)  # its total is its group's mean (float32 arithmetic)
