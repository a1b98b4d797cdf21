"""The reference grader template: extracted from a harness source with ast, pinned by SHA-256,
cached, recognised in a user file, and a clear error when it cannot be fetched. The template
text in these tests is our own wording with the reference placeholders (no copy is shipped)."""

from __future__ import annotations

import httpx
import pytest
from rt_paths import TESTS_DIR

import reward.judge.official as official
from reward.errors import InputError
from reward.judge.templates import load_template

OURS = """Judge the last assistant turn of this conversation against one rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

Return a json object with "explanation" and "criteria_met"."""
SOURCE = f'import json\n\nGRADER_TEMPLATE = """\n{OURS}\n""".strip()\n\ndef f():\n    raise SystemExit\n'


def test_extract_reads_the_string_without_running_the_file():
    assert official.extract_grader_template(SOURCE) == OURS
    with pytest.raises(InputError, match="GRADER_TEMPLATE"):
        official.extract_grader_template("X = 1\n")


def test_offline_fetch_names_the_url_and_the_way_out(monkeypatch, tmp_path):
    def refuse(url, **kw):
        raise httpx.ConnectError("network unreachable")

    monkeypatch.setattr(httpx, "get", refuse)
    with pytest.raises(InputError) as err:
        official.official_template_file(tmp_path)
    msg = str(err.value)
    assert official.SOURCE_URLS[0] in msg and "--judge-template FILE" in msg


def test_fetch_checks_the_pin_caches_and_is_recognised(monkeypatch, tmp_path):
    calls = []

    def serve(url, **kw):
        calls.append(url)
        return httpx.Response(200, text=SOURCE, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", serve)
    with pytest.raises(InputError, match="not the pinned"):  # our text is not the reference one
        official.official_template_file(tmp_path)
    monkeypatch.setattr(official, "OFFICIAL_TEMPLATE_SHA256", official.text_sha256(OURS))
    path = official.official_template_file(tmp_path)
    assert path.read_text() == OURS and path.is_relative_to(tmp_path)
    n = len(calls)
    assert official.official_template_file(tmp_path) == path and len(calls) == n  # from the cache
    t = load_template(path, "explain")
    assert t.name == official.OFFICIAL_NAME and t.system == official.GRADER_SYSTEM_MESSAGE


def test_an_official_style_file_that_is_not_the_reference_keeps_its_own_name(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text(OURS)
    t = load_template(f, "explain")
    assert t.name == "file:mine.txt" and t.system == ""


def test_eval_with_grader_official_offline_exits_with_the_message(monkeypatch, tmp_path):

    from typer.testing import CliRunner

    from rubricstree import app

    monkeypatch.setattr(httpx, "get", lambda url, **kw: (_ for _ in ()).throw(httpx.ConnectError("offline")))
    data = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"
    res = CliRunner().invoke(app, ["eval", "healthbench", "--model", "m", "--data", str(data), "--out",
                                   str(tmp_path / "o"), "--judge-url", "http://127.0.0.1:9", "--grader", "official"])
    assert res.exit_code == 2
    assert "--judge-template FILE" in res.output and official.SOURCE_URLS[0] in res.output
