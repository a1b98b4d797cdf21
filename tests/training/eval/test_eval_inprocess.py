"""The whole evaluation on CPU with the tiny Qwen3 in this process, as policy and as judge:
``rubricstree eval healthbench`` on our own rows (crash, resume, identical metrics, nothing
graded twice, the report), and ``rubricstree eval mcq`` on a few MedQA rows when present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_paths import TESTS_DIR
from typer.testing import CliRunner

from rubricstree import app

pytestmark = pytest.mark.slow
pytest.importorskip("torch")
pytest.importorskip("transformers")

FIXTURE = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"
N_ITEMS = 13
runner = CliRunner()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def hb_args(model: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "healthbench", "--model", str(model), "--judge-model", str(model), "--data", str(FIXTURE),
            "--judge-mode", "choice", "--max-new-tokens", "16", "--system-prompt", "ours", "--length-adjust",
            "--out", str(out), *extra]


def test_inprocess_eval_crash_resume_report(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", "verdicts:5")
    res = runner.invoke(app, hb_args(tiny_model_dir, out))
    assert res.exit_code != 0 and "simulated crash" in res.output  # one error line, no traceback
    assert len(lines(out / "verdicts.jsonl")) == 5 and len(lines(out / "generations.jsonl")) == 4
    monkeypatch.delenv("RUBRICSTREE_EVAL_CRASH_AFTER")

    res = runner.invoke(app, hb_args(tiny_model_dir, out, "--json"))
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_scored"] == 4 and metrics["grading"]["judge_backend"] == "inprocess"
    assert metrics["system_prompt"]["mode"] == "ours" and metrics["length_adjusted"]["variant"] == "hard"
    keys = [(v["prompt_id"], v["rubric_index"]) for v in lines(out / "verdicts.jsonl")]
    assert len(keys) == len(set(keys)) == N_ITEMS and len(lines(out / "generations.jsonl")) == 4
    runs = lines(out / "runs.jsonl")
    # the crashed run graded every item in one batch (and cached them); the resume re-graded none
    assert [r.get("judge_stats", {}).get("requests") for r in runs] == [N_ITEMS, 0]
    assert runs[1]["judge_stats"]["cache_hits"] == N_ITEMS - 5 and runs[1]["generated"] == 0

    # an uninterrupted run, without the shared verdict cache, ends with the same metrics
    ref = tmp_path / "ref"
    res = runner.invoke(app, hb_args(tiny_model_dir, ref, "--no-cache"))
    assert res.exit_code == 0, res.output
    assert json.loads((ref / "metrics.json").read_text()) == metrics
    assert lines(ref / "runs.jsonl")[0]["judge_stats"]["requests"] == N_ITEMS

    html = (out / "report.html").read_text()
    assert f"{100 * metrics['score']:.1f}%" in html and "lowest-scoring examples" in html
    for png in ("theme_scores.png", "axis_scores.png", "score_distribution.png"):
        assert (out / png).exists()

    # a third run of the same command does nothing but re-score
    res = runner.invoke(app, hb_args(tiny_model_dir, out))
    assert res.exit_code == 0 and "judge_stats" not in lines(out / "runs.jsonl")[-1]


def test_inprocess_mcq_on_medqa_rows(tiny_model_dir, tmp_path, shared_data):
    data = shared_data / "medqa_usmle_4opt_test.jsonl"
    if not data.exists():
        pytest.skip("medqa_usmle_4opt_test.jsonl is absent")
    out = tmp_path / "mcq"
    res = runner.invoke(app, ["eval", "mcq", "--model", str(tiny_model_dir), "--data", str(data), "--limit", "5",
                              "--max-new-tokens", "16", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_scored"] == 5 and m["data"]["format"] == "medqa" and 0.0 <= m["accuracy"] <= 1.0
    assert sum(v["n"] for v in m["categories"]["meta_info"].values()) == 5
    assert len(lines(out / "generations.jsonl")) == 5 and (out / "report.html").exists()
