"""``rubricstree score`` against the real vLLM judge server grades the answer after </think>:
two rollouts with the same answer and different thinking get the same score, an unclosed think
is a counted format failure (no judge request for it). Tiny random judge: wiring, not quality."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rubricstree import app

pytestmark = pytest.mark.server

PROMPT = [{"role": "user", "content": "I have crushing chest pain and I am sweating. What should I do?"}]
ANSWER = "Call emergency services now; chew an aspirin if you are not allergic."
RUBRICS = [{"criterion": "Advises calling emergency services.", "points": 5, "tags": ["axis:accuracy"]},
           {"criterion": "Says it is probably nothing.", "points": -5, "tags": ["axis:accuracy"]}]


def test_score_cli_grades_the_answer_not_the_thinking(tmp_path, judge_url, tiny_model_dir):
    rows = [("a", "<think>Might be nothing; maybe wait.</think>\n" + ANSWER),
            ("b", "<think>Sweating plus chest pain: cardiac until proven otherwise.</think>\n" + ANSWER),
            ("u", "<think>Emergency services, aspirin, still deciding")]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": PROMPT, "completion": c, "rubrics": RUBRICS}) + "\n"
                            for i, c in rows))
    out = tmp_path / "out" / "scores.jsonl"
    res = CliRunner().invoke(app, ["score", "--rollouts", str(path), "--router", "static", "--judge-url", judge_url,
                                   "--judge-model", str(tiny_model_dir), "--out", str(out.parent), "--combine", "points",
                                   "--no-cache", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    by_id = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert by_id["a"]["score"] is not None
    assert by_id["a"]["score"] == by_id["b"]["score"]
    assert by_id["a"]["points_score"] == by_id["b"]["points_score"]
    assert by_id["u"]["format_failure"] is True and by_id["u"]["score"] < min(by_id[k]["score"] for k in "ab")  # floor: below every answer
    assert summary["format_failures"] == 1 and summary["unscored"] == 0
