"""``rubricstree healthbench score`` on our own fixture rows, plus a smoke run on real rows
(read from ../shared/data, never copied into the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_paths import TESTS_DIR, shared_file
from typer.testing import CliRunner

from reward.healthbench.schema import load_healthbench
from rubricstree import app

FIXTURE = TESTS_DIR / "fixtures" / "healthbench_own.jsonl"
runner = CliRunner()

# Verdicts per prompt (rubric order) and each example's score by hand:
#   own-001 [8, 5, -7, 4]  met T F T T -> (8 - 7 + 4) / 17 = 5/17
#   own-002 [6, 4, -5]     met F T T   -> (4 - 5) / 10    = -0.1  (kept unclipped)
#   own-003 [10, -3, 2]    met T F T   -> 12 / 12         = 1.0
#   own-004 [5, -4]        met T T     -> (5 - 4) / 5     = 0.2
#   own-005 [7, 3, -6]     met T T F   -> 10 / 10         = 1.0
VERDICTS = {
    "own-001": [True, False, True, True],
    "own-002": [False, True, True],
    "own-003": [True, False, True],
    "own-004": [True, True],
    "own-005": [True, True, False],
}
EXAMPLE = {"own-001": 5 / 17, "own-002": -0.1, "own-003": 1.0, "own-004": 0.2, "own-005": 1.0}
OVERALL = sum(EXAMPLE.values()) / 5


def _write_verdicts(path: Path, verdicts: dict[str, list[bool]], skip: tuple[str, int] | None = None) -> Path:
    with path.open("w") as fh:
        for pid, met in verdicts.items():
            for i, m in enumerate(met):
                if (pid, i) != skip:
                    fh.write(json.dumps({"prompt_id": pid, "rubric_index": i, "criteria_met": m,
                                         "explanation": "fake judge"}) + "\n")
    return path


def _write_responses(path: Path, lengths: dict[str, int]) -> Path:
    with path.open("w") as fh:
        for pid, n in lengths.items():
            fh.write(json.dumps({"prompt_id": pid, "response": "a" * n}) + "\n")
    return path


def _score(*args: str):
    return runner.invoke(app, ["healthbench", "score", *args])


def test_fixture_has_no_canary():
    for line in FIXTURE.read_text().splitlines():
        assert "canary" not in json.loads(line)


def test_score_json_matches_hand_computation(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"score", "bootstrap_std", "n_samples", "tags"}
    # scores are arithmetic on fixed verdicts, no model: equal up to float rounding (abs 1e-9)
    assert out["score"] == pytest.approx(OVERALL, abs=1e-9)  # 0.4788...
    assert out["n_samples"] == 5
    assert out["bootstrap_std"] > 0
    tags = out["tags"]
    assert set(tags["theme:context_seeking"]) == {"score", "bootstrap_std", "n_samples"}
    assert tags["theme:context_seeking"]["score"] == 0.0  # -0.1, clipped after the mean
    assert tags["theme:hedging"]["score"] == pytest.approx(0.2, abs=1e-9)
    assert tags["physician_agreed_category:emergent"]["score"] == pytest.approx(5 / 17, abs=1e-9)
    # axis:accuracy per example: 1/8, -1/4, 1, 1, 1
    assert tags["axis:accuracy"]["score"] == pytest.approx((1 / 8 - 1 / 4 + 3) / 5, abs=1e-9)
    assert tags["axis:accuracy"]["n_samples"] == 5
    # own-004's communication item is negative only, so only own-001 counts
    assert tags["axis:communication_quality"] == {"score": 1.0, "bootstrap_std": 0.0, "n_samples": 1}
    assert tags["axis:context_awareness"]["score"] == pytest.approx(0.5, abs=1e-9)
    assert tags["axis:completeness"]["score"] == 0.0
    assert tags["level:example"]["score"] == pytest.approx((1 / 13 - 0.1 + 1 + 0.2 + 1) / 5, abs=1e-9)
    assert tags["level:cluster"]["n_samples"] == 2
    assert tags["cluster:emergency_referrals_emergent_emergency_behavior"]["score"] == 1.0


def test_bootstrap_is_reproducible(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    a = json.loads(_score("--data", str(FIXTURE), "--verdicts", str(v), "--json").stdout)
    b = json.loads(_score("--data", str(FIXTURE), "--verdicts", str(v), "--json").stdout)
    assert a == b


def test_table_output(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    res = _score("--data", str(FIXTURE), "--verdicts", str(v))
    assert res.exit_code == 0, res.output
    assert "overall" in res.stdout and f"{OVERALL:.4f}" in res.stdout and "theme:hedging" in res.stdout


def test_missing_verdict_exits_2_naming_it(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS, skip=("own-003", 2))
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--json")
    assert res.exit_code == 2
    assert "own-003" in res.stderr and "rubric_index 2" in res.stderr
    assert res.stdout == ""


def test_bad_verdict_line_names_file_line_and_field(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    with v.open("a") as fh:
        fh.write(json.dumps({"prompt_id": "own-001", "rubric_index": 0, "criteria_met": "yes"}) + "\n")
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--json")
    assert res.exit_code == 2
    assert "v.jsonl" in res.stderr and "line 16" in res.stderr and "criteria_met" in res.stderr
    v.write_text(json.dumps({"prompt_id": "own-001", "rubric_index": 9, "criteria_met": True}) + "\n")
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--json")
    assert res.exit_code == 2 and "rubric_index" in res.stderr and "out of range" in res.stderr


def test_length_adjust(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    r = _write_responses(tmp_path / "r.jsonl", dict.fromkeys(VERDICTS, 2500))
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--responses", str(r),
                 "--length-coefficient", "0.05", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # every response is 2500 chars: each example loses 0.05 * (500 / 500)
    assert out["score"] == pytest.approx(OVERALL - 0.05, abs=1e-9)
    assert out["tags"]["theme:hedging"]["score"] == pytest.approx(0.15, abs=1e-9)
    assert out["tags"]["axis:accuracy"]["score"] == pytest.approx((1 / 8 - 1 / 4 + 3) / 5, abs=1e-9)
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--responses", str(r),
                 "--length-coefficient", "hard", "--json")
    assert json.loads(res.stdout)["score"] == pytest.approx(OVERALL - 0.0392, abs=1e-9)


def test_length_adjust_needs_responses(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--length-coefficient", "0.05", "--json")
    assert res.exit_code == 2 and "--responses" in res.stderr


def test_missing_response_is_an_error(tmp_path):
    v = _write_verdicts(tmp_path / "v.jsonl", VERDICTS)
    r = _write_responses(tmp_path / "r.jsonl", {"own-001": 100})
    res = _score("--data", str(FIXTURE), "--verdicts", str(v), "--responses", str(r),
                 "--length-coefficient", "0.05", "--json")
    assert res.exit_code == 2 and "r.jsonl" in res.stderr and "own-002" in res.stderr


def test_bad_data_file_exits_2(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt_id": "x", "prompt": [], "rubrics": []}\n')
    v = _write_verdicts(tmp_path / "v.jsonl", {})
    res = _score("--data", str(data), "--verdicts", str(v), "--json")
    assert res.exit_code == 2 and "rows.jsonl" in res.stderr and "line 1" in res.stderr
    res = _score("--data", str(tmp_path / "absent.jsonl"), "--verdicts", str(v), "--json")
    assert res.exit_code == 2 and "file not found" in res.stderr


def _shared_sample() -> Path:
    return shared_file("healthbench_hard_sample50.jsonl")


def test_real_rows_with_synthetic_verdicts(tmp_path):
    path = _shared_sample()
    rows = load_healthbench(path)
    assert len(rows) == 50
    ideal = {r.prompt_id: [item.points > 0 for item in r.rubrics] for r in rows}
    none = {r.prompt_id: [False] * len(r.rubrics) for r in rows}

    v_ideal = _write_verdicts(tmp_path / "ideal.jsonl", ideal)
    res = _score("--data", str(path), "--verdicts", str(v_ideal), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["score"] == pytest.approx(1.0, abs=1e-9) and out["n_samples"] == 50
    assert out["bootstrap_std"] == pytest.approx(0.0, abs=1e-9)
    assert any(t.startswith("theme:") for t in out["tags"])
    assert any(t.startswith("axis:") for t in out["tags"])
    assert all(m["score"] == pytest.approx(1.0, abs=1e-9) for m in out["tags"].values())

    v_none = _write_verdicts(tmp_path / "none.jsonl", none)
    res = _score("--data", str(path), "--verdicts", str(v_none), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["score"] == 0.0
