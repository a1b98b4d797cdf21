"""``stress --cases blind`` and ``route eval --labels blind`` (issue 44, part 3): both run the blind
set's dev and test parts side by side, each part's figures its own, the report in a folder per
part, and a part the set does not have is a named error. A few conversations of each part stand in
for the set (the whole set's figures are a benchmark: benchmarks/results/blind_stress_oracle.json)."""

from __future__ import annotations

import json

import pytest
import yaml
from rt_blind_calibration import calibrate_on_blind
from typer.testing import CliRunner

from reward.stress.sets import blind_dir
from rubricstree import app

runner = CliRunner()


@pytest.fixture()
def small_blind(tmp_path, monkeypatch):
    """Two conversations of each part of the blind set (one writer's file), put where
    ``--cases blind`` looks."""
    root = tmp_path / "blind"
    for part in ("dev", "test"):
        raw = yaml.safe_load((blind_dir() / part / "w1.yaml").read_text(encoding="utf-8"))
        keep = sorted({c["conversation"] for c in raw})[:2]
        (root / part).mkdir(parents=True)
        (root / part / "w1.yaml").write_text(yaml.safe_dump([c for c in raw if c["conversation"] in keep],
                                                            allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr("reward.stress.sets.blind_dir", lambda: root)
    return root


def test_stress_runs_the_blind_parts_side_by_side(small_blind, tmp_path):
    rep = tmp_path / "rep"
    res = runner.invoke(app, ["stress", "--cases", "blind", "--router", "static", "--json", "--quiet",
                              "--report", str(rep), "--no-cache"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["parts"]) == {"blind:dev", "blind:test"} and out["mode"] == "oracle"
    for label, part in out["parts"].items():
        assert part["cases"] > 0 and 0.0 <= part["detection_rate"] <= 1.0, (label, part)
    assert (rep / "blind-dev").is_dir() and (rep / "blind-test").is_dir()
    table = runner.invoke(app, ["stress", "--cases", "blind", "--router", "static", "--quiet", "--no-cache"])
    assert table.exit_code == 0 and "blind:dev" in table.output and "blind:test" in table.output
    assert "gap" in table.output


def test_route_eval_runs_the_blind_parts_side_by_side(small_blind):
    res = runner.invoke(app, ["route", "eval", "--labels", "blind", "--router", "static", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["parts"]) == {"blind:dev", "blind:test"}
    assert all(p["n_cases"] > 0 for p in out["parts"].values()), out["parts"]


def test_a_part_the_blind_set_does_not_have_is_named():
    res = runner.invoke(app, ["stress", "--cases", "blind:train", "--router", "static", "--quiet"])
    assert res.exit_code == 2 and "no part 'train'" in res.output and "dev, test" in res.output


def test_judge_calibrate_runs_on_the_blind_set_against_the_tiny_server(judge_url, tmp_path):
    """Issue 44, part 3: a real vLLM judge calibrated on ``blind:dev``, with a per-leaf coverage
    table (a tiny model: the rates are wiring, the counts are the labels')."""
    rec = calibrate_on_blind(["--judge-url", judge_url], tmp_path / "report")
    assert rec["judge_id"].startswith("http:") and rec["verdict_items"] > 40


def test_the_gap_column_reads_numbers_and_the_first_of_two():
    from rubricstree.parts_table import gap

    assert gap(0.88, 0.901) == "+0.021" and gap("0.5 / 0.7", "0.6 / 0.1") == "+0.100"
    assert gap("—", 0.9) == "" and gap(True, False) == "" and gap(None, 1) == ""
