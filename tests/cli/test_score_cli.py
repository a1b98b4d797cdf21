"""``rubricstree score`` input checks that need no judge: bad rows and settings exit 2 and say
where the problem is."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rubricstree import app

runner = CliRunner()


def test_bad_rollouts_exit_2_naming_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "prompt": [], "completion": "c"}) + "\n")
    result = runner.invoke(app, ["score", "--rollouts", str(bad), "--judge-url", "http://127.0.0.1:9",
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert str(bad) in result.output and "line 1 (id x)" in result.output and "'prompt'" in result.output


def test_bad_settings_exit_2(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}) + "\n")
    base = ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o")]
    assert runner.invoke(app, base + ["--scoring", "fuzzy", "--judge-url", "http://127.0.0.1:9"]).exit_code == 2
    result = runner.invoke(app, base)  # no judge at all
    assert result.exit_code == 2 and "--judge-url" in result.output


def test_judge_model_not_found_exits_2(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}) + "\n")
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                                 "--judge-url", "http://127.0.0.1:9", "--served-model", "m",
                                 "--judge-model", str(tmp_path / "no-such-model")])
    assert result.exit_code == 2 and "error:" in result.output and "no-such-model" in result.output


def test_missing_package_found_while_running_exits_2_with_the_hint(tmp_path, monkeypatch, tiny_model_dir):
    """The embedding model loads on the first routing, inside the run: its install hint must
    reach the user as an error line, not a traceback."""
    from reward.errors import MissingDependencyError
    from reward.router import embedding

    def missing():
        raise MissingDependencyError("the embedding router needs the 'sentence_transformers' package: "
                                     "pip install 'rubricstree[train]'")

    monkeypatch.setattr(embedding, "load_default_model", missing)
    monkeypatch.setattr(embedding, "_node_cache", {})
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}) + "\n")
    result = runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                                 "--router", "embedding", "--judge-url", "http://127.0.0.1:9",
                                 "--served-model", "m", "--judge-model", str(tiny_model_dir),
                                 # no server answers: its identity is named, so the run reaches the routing
                                 "--judge-revision", "test"])
    assert result.exit_code == 2, result.output
    assert "pip install 'rubricstree[train]'" in result.output
