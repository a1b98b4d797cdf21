"""One judge settings model against the real vLLM judge server: the same keys from TRL YAML and
from verl's reward_kwargs build the same HTTP judge, and both trainer adapters score through it."""

from __future__ import annotations

import asyncio

import pytest
from rt_paths import REPO_ROOT

from reward.settings import JudgeSettings

pytestmark = pytest.mark.server

REPO = REPO_ROOT
CONV = [{"role": "user", "content": "I have had crushing chest pain for an hour and I am sweating. What do I do?"}]
RUBRICS = [{"criterion": "Tells the user to call emergency services now.", "points": 5, "tags": ["axis:accuracy"]},
           {"criterion": "Suggests waiting to see if the pain passes.", "points": -4, "tags": ["axis:accuracy"]}]
REPLY = "Call emergency services now and do not drive yourself."


def test_trl_yaml_and_verl_kwargs_build_the_same_live_judge(judge_url, tiny_model_dir, monkeypatch):
    from reward.integrations.verl import RewardContext, compute_score, load_settings
    from training.trl_launcher import build_reward_funcs, load_config

    monkeypatch.delenv("RUBRICSTREE_JUDGE_SERVED", raising=False)
    keys = {"url": judge_url, "tokenizer": str(tiny_model_dir), "max_retries": 1, "timeout_s": 60.0,
            "concurrency": 4, "cache": False, "deadline_s": 1500.0}
    cfg = load_config(REPO / "configs" / "trl" / "stage3_clinical_rubric.yaml",
                      [f"judge.{k}={v}" for k, v in keys.items()] + ["reward.rubric_source=rows"])
    verl = load_settings(judge=keys, rubric_source="rows", on_failure="raise")
    assert cfg.judge.resolved() == verl.judge_settings().resolved() == JudgeSettings(**keys).resolved()

    [trl_fn] = build_reward_funcs(cfg)
    trl_judge = trl_fn.judge
    verl_ctx = RewardContext(verl)
    for judge in (trl_judge, verl_ctx.judge):
        assert judge.max_retries == 1 and judge.timeout_s == 60.0 and judge.model == "tiny"

    async def both():
        trl = await trl_fn([CONV], [REPLY], rubrics=[RUBRICS])
        out = await compute_score("healthbench", REPLY, RUBRICS, {"judge_prompt": CONV}, context=verl_ctx)
        return trl, out

    [trl_score], verl_out = asyncio.run(both())
    # a random-weight judge: the scores are wiring, not quality; both are scored and equal
    # (same items, same greedy verdicts, no cache between them)
    assert trl_score is not None and 0.0 <= trl_score <= 1.0
    # hard scoring: the score is a function of the yes/no verdicts, so the same verdicts give the
    # same score up to float summation order (abs 1e-9); a different verdict moves it by >= 0.01
    assert verl_out["score"] == pytest.approx(trl_score, abs=1e-9) and not verl_out["unscored"]
    assert trl_judge.stats.requests >= 2 and verl_ctx.judge.stats.requests >= 2
