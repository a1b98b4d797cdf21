"""The gaming monitors on real TRL trainer steps (issue 46, part 4): GSPO with the tiny random Qwen3
on CPU, our rubric reward beside an extra reward that pays for length (the gaming a monitor must
see). The total the trainer sees rises with length inside every group: the combined reward's
monitor warns in the run's log, and the figures are in the trainer's log history."""

from __future__ import annotations

import logging

import pytest
from rt_fakes import FakeJudge

pytest.importorskip("trl")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow


def pays_for_length(prompts, completions, **kwargs):
    """A reward a user might add without seeing what it teaches: longer is better."""
    from reward.stages.rollout_text import completion_text

    return [len(completion_text(c)) / 10.0 for c in completions]


def test_a_reward_that_pays_for_length_is_flagged_in_the_trainers_log(tiny_model_dir, tmp_path, caplog):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from reward.integrations.trl import CombinedReward, RubricRewardFunc

    judge = FakeJudge.consistent(lambda template, item: 1.0)  # every leaf passes: our reward is flat
    rubric = RubricRewardFunc(judge=judge, router="static", router_options={"axes": ["instruction_following"]},
                              rubric_source="tree", records_dir=tmp_path / "records")  # prompts alone: no rubrics column
    combined = CombinedReward([rubric, pays_for_length], weights=[1.0, 1.0])
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"My knee hurts ({k}). What helps?"}]}
                              for k in range(2)])
    config = GRPOConfig(output_dir=str(tmp_path / "run"), loss_type="grpo", importance_sampling_level="sequence",
                        num_generations=4, per_device_train_batch_size=4, max_completion_length=24,
                        max_steps=2, learning_rate=1e-6, use_cpu=True, report_to="none", logging_steps=1, seed=0)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=[combined], args=config, train_dataset=data)
    with caplog.at_level(logging.WARNING, logger="rubricstree.monitor"):
        trainer.train()
    assert "combined: monitor length_correlation" in caplog.text and "crossed its threshold" in caplog.text
    steps = [h for h in trainer.state.log_history if "combined/monitor/length_correlation" in h]
    assert steps and max(h["combined/monitor/length_correlation"] for h in steps) > 0.5
    # our own reward's monitors are logged too, and written beside its records for the inspector
    assert any("clinical_rubric/monitor/judge_failure_share" in h for h in trainer.state.log_history)
    assert (tmp_path / "records" / "monitors.jsonl").is_file()
