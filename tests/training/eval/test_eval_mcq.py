"""The MCQ format loader (MedQA, MedBullets, MedXpertQA) on our own tiny fixtures, and the MCQ
evaluation with a fake generator: accuracy, format failures, categories, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_paths import TESTS_DIR

from reward.errors import InputError
from training.eval.mcq import MCQEvalConfig, run_mcq
from training.eval.mcq_formats import load_mcq_eval, mcq_prompt
from training.generation import GenerationSettings, GenOutput

FIXTURES = TESTS_DIR / "fixtures"
MEDQA = FIXTURES / "mcq_own.jsonl"
BULLETS = FIXTURES / "eval_mcq_medbullets.jsonl"
XPERT = FIXTURES / "eval_mcq_medxpertqa.jsonl"


def write(tmp_path: Path, *rows: dict) -> Path:
    p = tmp_path / "rows.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_medqa_rows_normalise_with_meta_info_category():
    rows = load_mcq_eval(MEDQA)
    assert [r.format for r in rows] == ["medqa"] * 3
    assert rows[0].answer == "A" and rows[0].categories == {"meta_info": "invented"} and rows[0].id == "line-1"
    assert rows[1].categories == {}


def test_medbullets_options_from_op_fields_or_a_mapping():
    rows = load_mcq_eval(BULLETS)
    assert rows[0].format == "medbullets" and list(rows[0].options) == ["A", "B", "C", "D", "E"]
    assert list(rows[1].options) == ["A", "B", "C", "D"] and rows[1].answer == "B"  # empty ope dropped, key upper-cased
    assert rows[2].options["D"] == "Vitamin K" and rows[2].answer == "D"


def test_medxpertqa_ten_options_label_and_categories():
    rows = load_mcq_eval(XPERT)
    assert rows[0].format == "medxpertqa" and rows[0].id == "own-x-1" and len(rows[0].options) == 10
    assert rows[1].answer == "C"
    assert rows[0].categories == {"medical_task": "Diagnosis", "body_system": "Nervous", "question_type": "Reasoning"}
    prompt = mcq_prompt(rows[0])
    assert prompt.count("Central retinal artery occlusion") == 1  # the options are listed once
    assert "Answer: X" in prompt


def test_medqa_prompt_lists_the_options():
    prompt = mcq_prompt(load_mcq_eval(MEDQA)[1])
    assert "C. Vitamin C" in prompt and "E. Vitamin K" in prompt


@pytest.mark.parametrize("row, fmt, match", [
    ({"question": "q", "options": {"A": "x", "B": "y"}}, None, "answer_idx"),
    ({"question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "C"}, None, "not one of the option letters"),
    ({"question": "q", "options": {"A": "x", "K": "y"}, "answer_idx": "A"}, None, "A..J"),
    ({"question": "q", "answer_idx": "A", "opa": None}, "medbullets", "no options"),
    ({"question": "q", "options": {"A": "x", "B": "y"}, "label": 3}, None, "label"),
    ({"question": "q", "options": {"A": "x", "B": " "}, "answer_idx": "A"}, None, "empty"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, row, fmt, match):
    p = write(tmp_path, {"question": "ok", "options": {"A": "x", "B": "y"}, "answer_idx": "A", "label": "A"}
              if fmt is None and "label" in row else
              {"question": "ok", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}, row)
    with pytest.raises(InputError, match=match) as err:
        load_mcq_eval(p, fmt)
    assert "rows.jsonl" in str(err.value) and "line 2" in str(err.value)


def test_unknown_format_and_duplicate_ids(tmp_path):
    with pytest.raises(InputError, match="unknown format"):
        load_mcq_eval(MEDQA, "pubmedqa")
    row = {"id": 7, "question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}
    with pytest.raises(InputError, match="duplicate id '7'"):
        load_mcq_eval(write(tmp_path, row, row))


class ScriptedGenerator:
    backend = "fake"

    def __init__(self, replies: dict[str, str], fail: set[str] = frozenset()) -> None:
        self.replies, self.fail, self.calls = replies, fail, []

    def generate(self, requests, on_done, desc="generate"):
        for r in requests:
            self.calls.append(r)
            if r.key in self.fail:
                on_done(r.key, GenOutput(None, error="boom"))
            else:
                on_done(r.key, GenOutput(self.replies[r.key], "stop", 5))


def test_mcq_eval_accuracy_format_failures_categories_and_resume(tmp_path, monkeypatch):
    out = tmp_path / "mcq"
    cfg = MCQEvalConfig(model="m", data=XPERT, out=out, generation=GenerationSettings(max_new_tokens=8))
    replies = {"own-x-1": "It is an embolus.\nAnswer: A", "own-x-2": "Answer: B", "own-x-3": "I am not sure."}
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", "generations:2")
    with pytest.raises(RuntimeError):
        run_mcq(cfg, generator=ScriptedGenerator(replies))
    monkeypatch.delenv("RUBRICSTREE_EVAL_CRASH_AFTER")
    gen = ScriptedGenerator(replies)
    m = run_mcq(cfg, generator=gen)
    assert [r.key for r in gen.calls] == ["own-x-3"]  # only the missing one is generated
    assert m["accuracy"] == pytest.approx(1 / 3) and m["correct"] == 1 and m["format_failures"] == 1
    assert m["categories"]["medical_task"]["Treatment"]["n"] == 2
    assert m["categories"]["medical_task"]["Diagnosis"]["accuracy"] == 1.0
    assert (out / "report.html").exists() and "33.3%" in (out / "report.html").read_text()
    scores = [json.loads(x) for x in (out / "example_scores.jsonl").read_text().splitlines()]
    assert [s["choice"] for s in scores] == ["A", "B", None]


def test_mcq_generation_failure_is_unscored(tmp_path):
    cfg = MCQEvalConfig(model="m", data=MEDQA, out=tmp_path / "mcq")
    m = run_mcq(cfg, generator=ScriptedGenerator({"line-1": "Answer: A", "line-3": "Answer: C"}, fail={"line-2"}))
    assert m["n_unscored"] == 1 and m["n_scored"] == 2 and m["accuracy"] == pytest.approx(0.5)
