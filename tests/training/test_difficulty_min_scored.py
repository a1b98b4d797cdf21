"""The difficulty filter's mean must rest on enough scored samples (issue 10, defect 8): a row
with 1 of 8 samples scored was routed on that one sample. By default every sample must be
scored; ``min_scored`` lowers that; rows that fall short are counted as ``too_few_scored``."""

from __future__ import annotations

import pytest

from training.difficulty import DifficultyConfig, filter_rows

pytest.importorskip("datasets")


def _run(rewards_per_row, cfg, tmp_path):
    from datasets import Dataset

    rows = [{"row_id": f"r{i}"} for i in range(len(rewards_per_row))]
    ds = Dataset.from_list(rows)
    flat = iter([r for rs in rewards_per_row for r in rs])

    def reward(prompts, completions, completion_ids=None, **kw):
        return [next(flat) for _ in completions]

    samples = [["x"] * len(rs) for rs in rewards_per_row]
    ds = ds.add_column("prompt", [[{"role": "user", "content": "q"}]] * len(rows))
    return filter_rows(rows, ds, samples, reward, cfg, tmp_path / "out")


def test_one_scored_sample_of_eight_does_not_decide(tmp_path):
    rewards = [[0.25] + [None] * 7, [0.25] * 8]
    splits, stats = _run(rewards, DifficultyConfig(n=8), tmp_path)
    assert stats.counts["too_few_scored"] == 1 and [r["row_id"] for r in splits["rubric"]] == ["r1"]


def test_min_scored_can_be_lowered(tmp_path):
    rewards = [[0.25] * 6 + [None] * 2]
    splits, stats = _run(rewards, DifficultyConfig(n=8, min_scored=6), tmp_path)
    assert stats.counts["too_few_scored"] == 0 and len(splits["rubric"]) == 1
