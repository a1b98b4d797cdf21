"""The stage-3 difficulty filter averages the stage's RAW score (a pass rate in 0..1), not the
shaped training reward: with ``format_failure_score: floor`` a truncated answer trains at 0.1
below the row's worst answer (-0.6 here), and a row answered right once in four would average
below 0 and be dropped, though the policy solves it 25% of the time. In the filter a truncated
answer is a failed attempt (0) and a harmful answer's negative points count as 0. Keyword fake
judge: the verdicts are keyword rules, so every score is known before the run."""

from __future__ import annotations

import json

import pytest
from rt_paths import REPO_ROOT
from rt_trl import CHEST, RUBRICS, keyword_judge

pytest.importorskip("datasets")

RIGHT = "<think>ok</think>\nCall emergency services now and chew an aspirin."  # 10 of 10 points
HARMFUL = "<think>ok</think>\nIt is nothing."                                  # -5 of 10 points
TRUNCATED = "<think>Chest pain could be many things, let me list them all"      # no answer


def _run(tmp_path, monkeypatch, samples):
    import training.difficulty as diff
    import training.trl_launcher as tl
    from reward.integrations.trl import RubricRewardFunc

    for var in ("RUBRICSTREE_JUDGE_URL", "RUBRICSTREE_RUN_ROOT", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", "/some/tiny")
    monkeypatch.chdir(REPO_ROOT)
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt_id": "chest", "prompt": CHEST, "rubrics": RUBRICS}) + "\n")
    cfg = tl.load_config(REPO_ROOT / "configs/smoke/stage3_clinical_rubric.yaml", [
        f"data.paths=[{data}]", "reward.rubric_source=rows", "reward.format_failure_score=floor",
        "reward.clip_below_zero=false", f"difficulty.n={len(samples)}", "judge.url=http://127.0.0.1:9/v1"])
    train_reward = RubricRewardFunc(keyword_judge(), rubric_source="rows", format_failure_score="floor",
                                    clip_below_zero=False, grade="answer")
    monkeypatch.setattr(diff, "sample_prompts", lambda prompts, **kw: [list(samples) for _ in prompts])
    splits, stats = tl.run_difficulty(cfg, "/some/tiny", tmp_path / "out", [train_reward])
    rec = json.loads((tmp_path / "out" / "scores.jsonl").read_text().splitlines()[0])
    return splits, rec, train_reward


async def test_a_truncated_answer_is_a_failed_attempt_not_the_training_floor(tmp_path, monkeypatch):
    splits, rec, train_reward = _run(tmp_path, monkeypatch, [RIGHT, TRUNCATED, TRUNCATED, TRUNCATED])
    assert rec["rewards"] == [pytest.approx(1.0), 0.0, 0.0, 0.0]
    assert rec["mean"] == pytest.approx(0.25) and rec["split"] == "keep" and len(splits["keep"]) == 1
    # the training reward is untouched: the floor still ranks truncation below the worst answer
    shaped = await train_reward([CHEST] * 2, [RIGHT, TRUNCATED], rubrics=[RUBRICS] * 2)
    assert shaped == [pytest.approx(1.0), pytest.approx(-0.6)]  # (1 - 3 x 0.6) / 4 = -0.2: dropped


def test_a_harmful_answer_counts_as_zero_in_the_pass_rate(tmp_path, monkeypatch):
    _, rec, _ = _run(tmp_path, monkeypatch, [RIGHT, HARMFUL, HARMFUL, HARMFUL])
    assert rec["rewards"] == [pytest.approx(1.0), 0.0, 0.0, 0.0]  # -0.5 each in training
    assert rec["mean"] == pytest.approx(0.25) and rec["split"] == "keep"  # (1 - 1.5) / 4 < 0: dropped before
