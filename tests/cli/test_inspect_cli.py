"""``rubricstree inspect`` from the command line: the page and its path, and exit 2 with a message
naming the file, line and field for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from rubricstree import app


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_inspect_writes_the_page(tmp_path: Path) -> None:
    leaf = {"leaf_id": "sf_red_flags_missed", "title": "Missed emergency", "polarity": "negative", "met": False,
            "p_yes": 0.1, "passed": 0.9, "weight": 0.5, "reason": "always_on", "failure": None}
    scores = write(tmp_path / "s.jsonl", [
        {"id": "r1", "score": 0.9, "tree_score": 0.9, "combine": "tree", "leaves": [leaf],
         "nodes": {"root": {"score": 0.9, "weight": 0.5}}, "feedback": "fine"},
        {"id": "r2", "score": None, "failures": ["leaf sf_red_flags_missed: timed out"]}])
    rolls = write(tmp_path / "r.jsonl", [
        {"id": "r1", "prompt": [{"role": "user", "content": "Chest pain at rest"}], "completion": "Call 911."},
        {"id": "r2", "prompt": [{"role": "user", "content": "Chest pain at rest"}], "completion": "Rest."}])
    res = CliRunner().invoke(app, ["inspect", str(scores), "--rollouts", str(rolls), "--out", str(tmp_path / "o"),
                                   "--compare", str(scores), "--name", "a", "--compare-name", "b"])
    assert res.exit_code == 0, res.output
    page = tmp_path / "o" / "inspector.html"
    assert res.output.strip() == f"inspector: {page}"
    text = page.read_text(encoding="utf-8")
    assert "Chest pain at rest" in text and "Missed emergency" in text and "timed out" in text


def test_bad_input_exits_2_naming_the_place(tmp_path: Path) -> None:
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"id": "a", "score": 0.5}\n{"id": "b", "score": [1]}\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["inspect", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "s.jsonl: record line 2 (id b): field 'score'" in res.output
    res = CliRunner().invoke(app, ["inspect", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    # typer draws the error in a box that wraps long paths (a worker's tmp path is longer): unwrapped here
    assert res.exit_code == 2 and "missing.jsonl" in re.sub(r"[\s│]+", "", res.output)
    ok = write(tmp_path / "ok.jsonl", [{"id": "a", "score": 0.5}])
    res = CliRunner().invoke(app, ["inspect", str(ok), "--out", str(tmp_path / "o"), "--compare-rollouts", str(ok)])
    assert res.exit_code == 2 and "--compare-rollouts needs --compare" in res.output
    assert not (tmp_path / "o" / "inspector.html").exists()
