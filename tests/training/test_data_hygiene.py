"""Training-data hygiene (training/data_hygiene.py, ``rubricstree train data``, ``data.exclude``):
training rows whose prompt matches HealthBench-Hard (read from the shared data folder, never copied
into the repository) are dropped and counted, also after case and whitespace changes; HealthBench-Easy is
full minus Hard by prompt_id; MedMCQA rows convert to our MCQ rows."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app
from training.data_hygiene import (
    drop_overlap,
    exclusion_hashes,
    healthbench_easy,
    medmcqa_row,
    prompt_hash,
)

REPO = REPO_ROOT
OWN = REPO / "tests/fixtures/healthbench_own.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _mixed_training_file(tmp_path: Path, hard: Path) -> Path:
    """Our 5 rows plus 3 Hard rows, one of them re-cased and re-spaced (written to tmp only)."""
    hard_rows = _rows(hard)[:3]
    changed = json.loads(json.dumps(hard_rows[2]))
    msg = changed["prompt"][-1]
    msg["content"] = "  " + msg["content"].upper().replace(" ", "   ") + "\n"
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*_rows(OWN), *hard_rows[:2], changed]))
    return path


def test_prompt_hash_normalises_case_and_whitespace():
    assert prompt_hash("Chest  pain\n now") == prompt_hash("chest pain now") != prompt_hash("chest pain")


def test_hard_prompts_are_dropped_and_counted(shared_data, tmp_path):
    hard = shared_data / "healthbench_hard_sample50.jsonl"
    train = _mixed_training_file(tmp_path, hard)
    kept, dropped = drop_overlap(_rows(train), exclusion_hashes([hard]))
    assert dropped == 3 and [r["prompt_id"] for r in kept] == [r["prompt_id"] for r in _rows(OWN)]


def test_the_launcher_drops_them_before_training(shared_data, tmp_path, caplog, tiny_model_dir, monkeypatch):
    from training.trl_config import load_config
    from training.trl_launcher import _all_rows, build_train_dataset

    hard = shared_data / "healthbench_hard_sample50.jsonl"
    train = _mixed_training_file(tmp_path, hard)
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    cfg = load_config(REPO / "configs/smoke/stage3_clinical_rubric.yaml",
                      [f"data.paths=[{train}]", f"data.exclude=[{hard}]", "judge.url=http://x"])
    with caplog.at_level(logging.INFO, logger="training"):
        assert len(_all_rows(cfg)) == 5
        assert len(build_train_dataset(cfg)) == 5
    assert "dropped 3 training row(s)" in caplog.text


def test_healthbench_easy_is_full_minus_hard(shared_data, tmp_path):
    hard = shared_data / "healthbench_hard_sample50.jsonl"
    full = tmp_path / "full.jsonl"
    full.write_text(OWN.read_text() + hard.read_text())
    assert [r["prompt_id"] for r in healthbench_easy(_rows(full), _rows(hard))] == [r["prompt_id"] for r in _rows(OWN)]
    out = tmp_path / "easy.jsonl"
    res = CliRunner().invoke(app, ["train", "data", "healthbench-easy", str(full), str(hard), str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["easy"] == 5 and len(_rows(out)) == 5


def test_medmcqa_converter(tmp_path):
    row = {"id": "m1", "question": "Which vitamin deficiency causes scurvy?", "opa": "Vitamin A",
           "opb": "Vitamin B12", "opc": "Vitamin C", "opd": "Vitamin D", "cop": 2}
    assert medmcqa_row(row) == {"question": row["question"], "answer_idx": "C", "id": "m1",
                                "options": {"A": "Vitamin A", "B": "Vitamin B12", "C": "Vitamin C", "D": "Vitamin D"}}
    assert medmcqa_row({**row, "cop": 3}, cop_base=1)["answer_idx"] == "C"
    src, out = tmp_path / "medmcqa.jsonl", tmp_path / "mcq.jsonl"
    src.write_text(json.dumps(row) + "\n" + json.dumps({**row, "cop": 7}) + "\n")
    res = CliRunner().invoke(app, ["train", "data", "medmcqa", str(src), str(out)])
    assert res.exit_code == 2 and "line 2" in res.stderr and "cop" in res.stderr
    src.write_text(json.dumps(row) + "\n")
    assert CliRunner().invoke(app, ["train", "data", "medmcqa", str(src), str(out)]).exit_code == 0
    from reward.stages.mcq import load_mcq

    [mcq] = load_mcq(out)  # our MCQ loader reads it
    assert mcq.answer_idx == "C"


def test_exclude_cli(shared_data, tmp_path):
    hard = shared_data / "healthbench_hard_sample50.jsonl"
    train, out = _mixed_training_file(tmp_path, hard), tmp_path / "clean.jsonl"
    res = CliRunner().invoke(app, ["train", "data", "exclude", str(train), str(out), "--against", str(hard)])
    assert res.exit_code == 0 and json.loads(res.stdout) == {"kept": 5, "dropped": 3, "out": str(out)}
