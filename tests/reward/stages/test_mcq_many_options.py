"""``rubricstree mcq score`` takes rows with more than five options (MedXpertQA has A..J), as
``eval mcq`` does (issue 10, smaller list); it refused any key past E."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rubricstree import app


def test_ten_option_row_is_scored(tmp_path):
    options = {chr(ord("A") + i): f"option text {i}" for i in range(10)}
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"question": "Which one?", "options": options, "answer_idx": "J"}) + "\n",
                    encoding="utf-8")
    comps = tmp_path / "c.jsonl"
    comps.write_text(json.dumps({"index": 0, "completion": "The answer is (J)."}) + "\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["mcq", "score", "--data", str(data), "--completions", str(comps), "--json"])
    assert res.exit_code == 0, res.output
    assert '"accuracy": 1.0' in res.output or json.loads(res.output).get("accuracy") == 1.0
