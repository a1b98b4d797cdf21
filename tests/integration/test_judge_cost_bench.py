"""The judge cost benchmark against the real vLLM server: it runs end to end, prints one JSON
object with every figure, and reference-style grading computes more than our choice mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.server

MODE_KEYS = {"items", "requests", "prompt_tokens", "cached_tokens", "completion_tokens", "computed_tokens",
             "wall_s", "failures", "reset_prefix_cache"}


def test_judge_cost_benchmark_small(judge_url):
    cmd = [sys.executable, str(REPO / "benchmarks" / "judge_cost.py"), "--judge-url", judge_url,
           "--rollouts", "4", "--criteria", "3", "--json"]
    tiny = os.environ.get("RUBRICSTREE_TINY_MODEL")
    if tiny:
        cmd += ["--tokenizer", tiny]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert {"choice", "reference", "ratios", "lower_bound"} <= set(res)
    c, r, b = res["choice"], res["reference"], res["lower_bound"]
    for mode in (c, r):
        assert MODE_KEYS <= set(mode)
        assert mode["items"] == 12 and mode["requests"] >= 12
        assert mode["computed_tokens"] == mode["prompt_tokens"] - mode["cached_tokens"] + mode["completion_tokens"]
    assert c["failures"] == 0 and c["completion_tokens"] == 12  # one decoded token per item
    assert r["completion_tokens"] > c["completion_tokens"]
    assert r["computed_tokens"] > c["computed_tokens"]
    assert res["ratios"]["computed_tokens"] > 1 and res["ratios"]["wall_s"] is not None
    assert b["items"] == 12 and b["decode_tokens"] == 12
    assert b["tokens"] <= b["segments_tokens"]
    assert 0 < b["tokens"] <= c["computed_tokens"] + c["cached_tokens"]
    assert b["choice_over_bound"] == pytest.approx(c["computed_tokens"] / b["tokens"], abs=1e-3)
