"""Failures say why at once: the summary lists the most common failure reasons, and a judge URL
where nothing answers is called unreachable (not a hint about served model names)."""

from __future__ import annotations

from typer.testing import CliRunner

from rubricstree import app
from rubricstree.guards import failure_reasons


def test_failure_reasons_count_one_cause_across_items():
    failures = ["leaf a: ConnectError at http://j/v1: refused", "leaf b: ConnectError at http://j/v1: refused",
                "rubric item 3: timeout after 1s at http://j/v1", "routing: 2 judge call(s) failed", ""]
    assert failure_reasons(failures) == [("ConnectError at http://j/v1: refused", 2),
                                         ("timeout after 1s at http://j/v1", 1),
                                         ("routing: 2 judge call(s) failed", 1)]
    assert failure_reasons(failures, top=1) == [("ConnectError at http://j/v1: refused", 2)]


def test_judge_check_on_a_dead_url_says_nothing_answers():
    res = CliRunner().invoke(app, ["judge", "check", "--judge-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2, res.output
    assert "no server answers at http://127.0.0.1:9" in res.output and "is it running" in res.output
    assert "served" not in res.output


def test_an_unknown_host_is_unreachable_too():
    res = CliRunner().invoke(app, ["judge", "check", "--judge-url", "http://no-such-host.invalid:8000"])
    assert res.exit_code == 2, res.output
    assert "no server answers at" in res.output and "served" not in res.output
