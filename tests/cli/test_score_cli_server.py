"""``rubricstree score`` end to end against the real vLLM judge server: the LLM router on the
packaged taxonomy, the static router on a small taxonomy, output lines, the summary, and a rerun
that sends no judge request (verdicts and routings come from the durable cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reward.demo import demo_rollouts_path
from rubricstree import app

pytestmark = pytest.mark.server
runner = CliRunner()

SMALL_TAXONOMY = """
version: 1
name: small-test
root: root
nodes:
  - id: root
    title: Quality
    children: [safety, communication]
  - id: safety
    title: Safety
    definition: Escalating emergencies.
    children: [call_ems, home_care, dangerous]
  - id: communication
    title: Communication
    children: [empathy, plain]
  - id: call_ems
    title: Call emergency services
    criterion: Advises calling emergency services now.
  - id: home_care
    title: Home care instead of emergency
    criterion: Suggests waiting at home to see whether the symptoms settle.
    polarity: negative
  - id: dangerous
    title: Dangerous advice
    criterion: Recommends an action that could cause serious harm.
    polarity: negative
    always_on: true
  - id: empathy
    title: Empathy
    criterion: Acknowledges the user's worry.
  - id: plain
    title: Plain language
    criterion: Uses plain language without unexplained jargon.
"""


def _rollouts(tmp_path: Path) -> Path:
    """Two prompts x two completions from the bundled demo rows (our own invented data)."""
    lines = demo_rollouts_path().read_text(encoding="utf-8").splitlines()[:4]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _score(args: list[str]) -> dict:
    result = runner.invoke(app, ["score", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _check_out(out: Path, n: int) -> list[dict]:
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == n
    for r in rows:
        assert r["score"] is None or 0.0 <= r["score"] <= 1.0
        if r["score"] is None:
            assert r["failures"]
    return rows


@pytest.mark.parametrize("router", ["llm", "static"])
def test_score_cli_end_to_end_and_rerun_from_cache(tmp_path, judge_url, tiny_model_dir, router):
    rollouts = _rollouts(tmp_path)
    out, report = tmp_path / "out" / "scores.jsonl", tmp_path / "out" / "report.md"
    args = ["--rollouts", str(rollouts), "--router", router, "--judge-url", judge_url,
            "--judge-model", str(tiny_model_dir), "--out", str(out.parent), "--report", str(report.parent),
            "--no-applicability", "--no-confirm-failures"]  # counts below are of the graded items alone
    if router == "static":
        tax = tmp_path / "small.yaml"
        tax.write_text(SMALL_TAXONOMY)
        args += ["--taxonomy", str(tax), "--scoring", "soft", "--combine", "mean"]

    first = _score(args)
    rows = _check_out(out, 4)
    assert {r["id"] for r in rows} == {"demo-01-good", "demo-01-poor", "demo-02-good", "demo-02-poor"}
    assert first["rollouts"] == 4 and first["prompts"] == 2 and first["prompts_routed"] == 2
    assert first["scored"] + first["unscored"] == 4
    assert first["judge_requests"] > 0 and first["cache_hits"] == 0
    if router == "llm":
        # urgency + at least the 7 macro capabilities a rollout without tool calls can reach
        # (the agentic branch needs tool calls), per prompt
        assert first["routing_judge_calls"] >= 2 * 8
        assert first["judge_requests"] >= first["routing_judge_calls"] + first["judge_items"]
    else:
        assert first["routing_judge_calls"] == 0
        assert first["active_leaves_per_prompt"] == 5.0
        assert first["judge_requests"] == first["judge_items"] == 4 * 5 + 2 * (4 + 4)
        assert all(r["points_score"] is not None for r in rows if r["score"] is not None)
    text = report.read_text()
    assert "# RubricsTree scores" in text and "demo-02-poor" in text

    # the end-of-run probe confirmed who graded (probe items plus the text probe), its cost reported
    from reward.judge.signature import PROBE_ITEMS

    assert first["probe_items"] >= len(PROBE_ITEMS) + 1
    assert first["probe_items_per_judge_request"] == round(first["probe_items"] / first["judge_requests"], 4)
    second = _score(args)  # the same command again: everything from the durable cache
    _check_out(out, 4)
    assert second["judge_requests"] == 0 and second["probe_items"] == 0  # nothing graded: nothing to confirm
    assert second["cache_misses"] == 0 and second["cache_hits"] == second["judge_items"] > 0
    assert second["prompts_routed"] == 0 and second["routing_from_cache"] == 2
    assert second["mean_score"] == first["mean_score"]
