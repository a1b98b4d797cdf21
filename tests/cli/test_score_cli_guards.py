"""``rubricstree score`` guards (issue 10, defects 7, 10, 13): an output that would destroy an
input is refused before anything is written; a run in which nothing was scored exits non-zero
(it exited 0 with ``mean_score`` over nothing); the judge's timeout, retries and deadline are
settable on the command line."""

from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from rubricstree import app

runner = CliRunner()
ROW = {"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}


def _rows(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    return rows


def test_out_equal_to_rollouts_is_refused_and_the_input_kept(tmp_path, monkeypatch):
    rows = _rows(tmp_path).rename(tmp_path / "scores.jsonl")  # what --out . writes
    before = rows.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", ".",
                                 "--judge-url", "http://127.0.0.1:9", "--served-model", "m"])
    assert result.exit_code == 2 and "--out" in result.output and "--rollouts" in result.output
    assert rows.read_bytes() == before


def test_a_report_over_the_rollouts_is_refused(tmp_path):
    rows = _rows(tmp_path).rename(tmp_path / "report.md")  # what --report tmp_path writes
    before = rows.read_bytes()
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"), "--report",
                                 str(tmp_path), "--judge-url", "http://127.0.0.1:9", "--served-model", "m"])
    assert result.exit_code == 2 and "--report" in result.output and "--rollouts" in result.output
    assert rows.read_bytes() == before and not (tmp_path / "o").exists()


def test_nothing_scored_exits_3_and_cli_bounds_the_judge(tmp_path, tiny_model_dir):
    """A dead judge: every rollout is unscored; the run ends fast (timeout/retries from the CLI)
    and exits 3 with the scored fraction, not 0."""
    rows = _rows(tmp_path)
    t0 = time.monotonic()
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                                 "--router", "static", "--no-cache", "--json",
                                 "--judge-url", "http://127.0.0.1:9", "--served-model", "m",
                                 "--judge-model", str(tiny_model_dir),
                                 "--item-timeout", "1", "--max-retries", "1", "--deadline", "600",
                                 "--circuit-breaker", "0"])
    assert result.exit_code == 3, result.output
    assert "0 of 1" in result.output
    # the summary says why, not only "see failures"
    assert "because:" in result.output and "127.0.0.1:9" in result.output
    assert time.monotonic() - t0 < 600  # a hang bound only: a dead judge refuses at once
