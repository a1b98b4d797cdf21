"""``rubricstree eval healthbench`` exit status and argument checks (issue 10, defect 13 and the
smaller list): every example unscored exits 3 (it exited 0 with a score over nothing), part
unscored prints the fraction; ``--limit 0`` is a usage error, not a pydantic dump. The evaluation
engine is replaced by one that returns the metrics of a run whose judge failed throughout: only
the command line's handling of them is under test here."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import training.eval.healthbench as hb
from rubricstree import app

runner = CliRunner()
ARGS = ["eval", "healthbench", "--model", "m", "--data", "x.jsonl", "--judge-url", "http://127.0.0.1:9"]


def _metrics(n_scored: int, n_unscored: int) -> dict:
    return {"score": None if not n_scored else 0.5, "n_scored": n_scored, "n_unscored": n_unscored,
            "unscored": [{"prompt_id": f"p{i}"} for i in range(n_unscored)], "n_samples": n_scored,
            "bootstrap_std": 0.0, "tags": {}, "model": "m", "grading": {"mode": "choice", "judge_model": "j"}}


def test_nothing_scored_exits_3(tmp_path, monkeypatch):
    monkeypatch.setattr(hb, "run_healthbench", lambda cfg: _metrics(0, 4))
    res = runner.invoke(app, [*ARGS, "--out", str(tmp_path / "o")])
    assert res.exit_code == 3 and "0 of 4" in res.output, res.output


def test_min_scored_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(hb, "run_healthbench", lambda cfg: _metrics(3, 1))
    assert runner.invoke(app, [*ARGS, "--out", str(tmp_path / "o")]).exit_code == 0
    res = runner.invoke(app, [*ARGS, "--out", str(tmp_path / "o"), "--min-scored", "0.9"])
    assert res.exit_code == 3 and "3 of 4" in res.output


def test_limit_zero_is_a_usage_error(tmp_path):
    res = runner.invoke(app, [*ARGS, "--out", str(tmp_path / "o"), "--limit", "0"])
    assert res.exit_code == 2 and "validation error" not in res.output.lower()


def test_bad_data_leaves_no_output_folder_and_a_file_out_is_refused(tmp_path):
    from reward.errors import InputError
    from training.eval.healthbench import HealthBenchEvalConfig

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    out = tmp_path / "o"
    res = runner.invoke(app, [*ARGS[:4], "--data", str(bad), "--judge-model", "j", "--out", str(out)])
    assert res.exit_code == 2 and not out.exists(), res.output
    as_file = tmp_path / "file"
    as_file.write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="folder"):
        hb.run_healthbench(HealthBenchEvalConfig(model="m", data=str(bad), out=as_file, judge={"model": "j"}))
