"""Outputs are compared with inputs by file identity, not by name (issue 26, N2).

``score --out`` writing over a hard link of ``--rollouts`` truncated the input and exited 0: the guard
compared resolved paths, and a hard link has a path of its own. Now a hard link, a symbolic link
or another spelling of an input is refused before anything is written, in every guarded command.
"""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from reward.tree import default_taxonomy_path
from rubricstree import app
from rubricstree.guards import file_key, same_file

runner = CliRunner()
ROW = {"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}


def _rows(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    return rows


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_score_refuses_an_out_that_is_a_link_of_the_rollouts(tmp_path, link):
    rows = _rows(tmp_path)
    before = rows.read_bytes()
    other = tmp_path / "sub" / "scores.jsonl"  # what --out sub writes
    other.parent.mkdir()
    (os.link if link == "hard" else os.symlink)(rows, other)
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(other.parent), "--router", "static",
                                 "--judge-url", "http://127.0.0.1:9", "--served-model", "m", "--no-cache"])
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "--rollouts" in result.output
    assert rows.read_bytes() == before


def test_score_refuses_a_report_that_is_a_hard_link_of_the_taxonomy(tmp_path):
    rows = _rows(tmp_path)
    tax = tmp_path / "tax.yaml"
    tax.write_bytes(default_taxonomy_path().read_bytes())
    (tmp_path / "rep").mkdir()
    os.link(tax, tmp_path / "rep" / "report.md")
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                                 "--taxonomy", str(tax), "--report", str(tmp_path / "rep"),
                                 "--judge-url", "http://127.0.0.1:9", "--served-model", "m", "--no-cache"])
    assert result.exit_code == 2 and "--report" in result.output and "--taxonomy" in result.output
    assert tax.read_bytes() == default_taxonomy_path().read_bytes()


def test_tree_apply_refuses_an_out_that_is_a_hard_link_of_the_input_taxonomy(tmp_path):
    from rt_evolution import leaf

    from reward.evolution.proposals import ProposalsFile, save_proposals

    tax = tmp_path / "tax.yaml"
    tax.write_bytes(default_taxonomy_path().read_bytes())
    link = tmp_path / "v2" / "taxonomy.yaml"  # what --out v2 writes
    link.parent.mkdir()
    os.link(tax, link)
    props = tmp_path / "p.yaml"
    save_proposals(ProposalsFile(proposals=[leaf("p1", "ev_ok", ["cm_clarity"])]), props)
    r = runner.invoke(app, ["tree", "apply", str(props), "--taxonomy", str(tax), "--out", str(link.parent)])
    assert r.exit_code == 2 and "is the input taxonomy" in r.output, r.output
    assert tax.read_bytes() == default_taxonomy_path().read_bytes()


def test_file_identity_rules(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    os.link(a, tmp_path / "h")
    os.symlink(a, tmp_path / "s")
    assert same_file(a, tmp_path / "h") and same_file(a, tmp_path / "s") and same_file(a, tmp_path / "." / "a")
    (tmp_path / "b").write_text("x")  # equal content, another file
    assert not same_file(a, tmp_path / "b")
    assert file_key(tmp_path / "new") == file_key(tmp_path / "." / "new")  # not yet written: by path
