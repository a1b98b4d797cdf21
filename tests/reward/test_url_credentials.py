"""Credentials in a judge URL (``http://user:pw@host``) never reach stderr, the results JSONL,
the report or the judge's stats (issue 10, smaller list)."""

from __future__ import annotations

import json

import httpx
from rt_fakes import _WordTokenizer
from typer.testing import CliRunner

from reward.judge import JudgeItem, Message
from reward.judge.http import HTTPJudge
from reward.serving import redact_url
from rubricstree import app


def test_redact_url():
    assert redact_url("http://user:pw@host:8000/v1") == "http://***@host:8000/v1"
    assert redact_url("http://host:8000") == "http://host:8000"


def test_http_judge_failures_and_stats_hide_credentials():
    judge = HTTPJudge("http://user:s3cret@a:1", "m", tokenizer=_WordTokenizer(), backoff_s=0.001, max_retries=1,
                      transport=httpx.MockTransport(lambda r: httpx.Response(500, text="down")))
    item = JudgeItem(conversation=(Message(role="user", content="hi"),), response="r", criterion="c")
    [v] = judge.grade_sync([item])
    assert v.failure and "s3cret" not in v.failure and "***@a:1" in v.failure
    assert "s3cret" not in repr(judge)


def test_score_cli_hides_credentials(tmp_path, tiny_model_dir):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}) + "\n",
                    encoding="utf-8")
    out, report = tmp_path / "o" / "scores.jsonl", tmp_path / "rep" / "report.md"
    res = CliRunner().invoke(app, ["score", "--rollouts", str(rows), "--out", str(out.parent), "--report", str(report.parent),
                                   "--router", "static", "--no-cache", "--served-model", "m",
                                   "--judge-url", "http://user:s3cret@127.0.0.1:9", "--judge-model", str(tiny_model_dir),
                                   "--max-retries", "0", "--timeout", "2", "--circuit-breaker", "0"])
    assert res.exit_code == 3, res.output
    for text in (res.output, out.read_text(encoding="utf-8"), report.read_text(encoding="utf-8")):
        assert "s3cret" not in text
