"""The judge cost benchmark against the real vLLM server: it runs end to end, prints one JSON
object with every figure, and reference-style grading computes more than our choice mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

REPO = REPO_ROOT

pytestmark = pytest.mark.server

MODE_KEYS = {"items", "requests", "prompt_tokens", "cached_tokens", "completion_tokens", "computed_tokens",
             "wall_s", "failures", "reset_prefix_cache"}


def test_judge_cost_benchmark_small(judge_url):
    cmd = [sys.executable, str(REPO / "benchmarks" / "judge_cost.py"), "--judge-url", judge_url,
           "--rollouts", "4", "--criteria", "3", "--json"]
    tiny = os.environ.get("RUBRICSTREE_TINY_MODEL")
    if tiny:
        cmd += ["--judge-tokenizer", tiny]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert {"choice", "reference", "rubric_batch", "ratios", "ratios_rubric_batch", "lower_bound"} <= set(res)
    c, r, b, rb = res["choice"], res["reference"], res["lower_bound"], res["rubric_batch"]
    for mode in (c, r, rb):
        assert 0 <= mode["verdicts_lost_share"] <= 1
        assert mode["verdicts_lost_share"] == pytest.approx(mode["failures"] / 12, abs=1e-3)
        assert MODE_KEYS <= set(mode)
        assert mode["items"] == 12
        assert mode["computed_tokens"] == mode["prompt_tokens"] - mode["cached_tokens"] + mode["completion_tokens"]
    assert c["requests"] >= 12 and r["requests"] >= 12
    assert c["failures"] == 0 and c["completion_tokens"] == 12  # one decoded token per item
    # the peers' layout: one request per rollout (4), every verdict decoded as JSON
    assert rb["requests"] == 4 and rb["completion_tokens"] > c["completion_tokens"]
    assert rb["prompt_tokens"] < c["prompt_tokens"]
    assert res["ratios_rubric_batch"]["requests"] == pytest.approx(4 / c["requests"], abs=1e-3)
    # block-aligned prompts: choice mode computes about the prefill-only bound, not 1.13x of it
    assert b["choice_over_unpadded_bound"] <= 1.08
    assert r["completion_tokens"] > c["completion_tokens"]
    assert r["computed_tokens"] > c["computed_tokens"]
    assert res["ratios"]["computed_tokens"] > 1 and res["ratios"]["wall_s"] is not None
    assert b["items"] == 12 and b["decode_tokens"] == 12
    assert b["tokens"] <= b["segments_tokens"]
    assert 0 < b["tokens"] <= c["computed_tokens"] + c["cached_tokens"]
    assert b["choice_over_bound"] == pytest.approx(c["computed_tokens"] / b["tokens"], abs=1e-3)
