"""Typed evaluation records round-trip through their files, and verdicts.jsonl has one reader:
lenient for the pipeline's own resumable file, exact for a user's file given to the CLI."""

from __future__ import annotations

import json

import pytest

from reward.errors import InputError
from reward.jsonl import JsonlLog
from training.eval.records import (
    Failure,
    Generation,
    RunRecord,
    VerdictLine,
    read_generations,
    read_verdicts,
)


def _write(path, recs):
    log = JsonlLog(path)
    for r in recs:
        log.append(r)
    log.close()


def test_generations_round_trip_and_first_line_wins(tmp_path):
    a = Generation("p1", "answer", "stop", 7, "thought")
    b = Generation("p1", "later answer")
    c = Generation("p2", "other", "length", 9)
    path = tmp_path / "generations.jsonl"
    _write(path, [a.to_json("prompt_id"), b.to_json("prompt_id"), c.to_json("prompt_id")])
    assert "reasoning" not in c.to_json("prompt_id")
    assert read_generations(path, "prompt_id") == {"p1": a, "p2": c}
    assert read_generations(path, "prompt_id", wanted={"p2"}) == {"p2": c}
    mcq = tmp_path / "mcq.jsonl"
    _write(mcq, [Generation("q1", "B").to_json("id")])
    assert read_generations(mcq, "id")["q1"].response == "B"
    assert read_generations(tmp_path / "absent.jsonl", "id") == {}
    with pytest.raises(InputError, match="line 1"):
        read_generations(path, "id")  # a prompt_id file read as MCQ: the key is missing


def test_run_and_failure_records_serialise_what_was_set(tmp_path):
    r = RunRecord(argv=["eval"], generated=2)
    r.graded_items = 3
    back = RunRecord.model_validate(json.loads(json.dumps(r.to_json())))
    assert back == r and "judge_stats" not in r.to_json()
    with pytest.raises(ValueError):
        r.generated = "many"  # validated on assignment
    assert Failure(key="p", error="boom").to_json("prompt_id").keys() == {"prompt_id", "error", "time"}
    judged = Failure(key="p", rubric_index=2, error="timeout").to_json("prompt_id")
    assert (judged["rubric_index"], judged["failure"]) == (2, "timeout")


def _verdicts(path, lines, torn=None):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + (torn or ""), encoding="utf-8")


def test_pipeline_verdicts_are_read_leniently(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    lines = [VerdictLine(prompt_id="a", rubric_index=0, criteria_met=True, p_yes=0.9).to_json(),
             VerdictLine(prompt_id="a", rubric_index=0, criteria_met=False).to_json(),  # first wins
             VerdictLine(prompt_id="a", rubric_index=1, criteria_met=False, explanation="no").to_json(),
             VerdictLine(prompt_id="beyond-limit", rubric_index=0, criteria_met=True).to_json(),
             {"prompt_id": "a", "rubric_index": 5, "criteria_met": True}]
    _verdicts(path, lines, torn='{"prompt_id": "a", "rubr')
    got = read_verdicts(path, {"a": 2}, exact=False)
    assert got == {("a", 0): True, ("a", 1): False}
    assert path.read_text().endswith("}\n")  # the torn line was cut
    assert read_verdicts(tmp_path / "none.jsonl", {"a": 2}, exact=False) == {}
    _verdicts(path, [{"prompt_id": "a", "rubric_index": 0, "criteria_met": "yes"}])
    with pytest.raises(InputError) as e:
        read_verdicts(path, {"a": 2}, exact=False)
    assert "line 1" in str(e.value) and "criteria_met" in str(e.value)


@pytest.mark.parametrize("lines, match", [
    ([{"prompt_id": "x", "rubric_index": 0, "criteria_met": True}], "prompt_id 'x' is not in the data file"),
    ([{"prompt_id": "a", "rubric_index": 2, "criteria_met": True}], "rubric_index 2 out of range"),
    ([{"prompt_id": "a", "rubric_index": 0, "criteria_met": True}] * 2, "duplicate verdict.*first on line 1"),
    ([{"prompt_id": "a", "rubric_index": 0, "criteria_met": True},
      {"prompt_id": "a", "rubric_index": 1, "criteria_met": None}], "criteria_met is null"),
    ([{"prompt_id": "a", "rubric_index": 0, "criteria_met": True}], "no verdict for prompt_id 'a' rubric_index 1"),
])
def test_user_verdicts_are_read_exactly(tmp_path, lines, match):
    path = tmp_path / "v.jsonl"
    _verdicts(path, lines)
    with pytest.raises(InputError, match=match):
        read_verdicts(path, {"a": 2}, exact=True)


def test_exact_reader_accepts_a_complete_file(tmp_path):
    path = tmp_path / "v.jsonl"
    _verdicts(path, [{"prompt_id": "a", "rubric_index": 1, "criteria_met": False, "extra": 1},
                     {"prompt_id": "a", "rubric_index": 0, "criteria_met": True}])
    assert read_verdicts(path, {"a": 2}, exact=True) == {("a", 0): True, ("a", 1): False}
    with pytest.raises(InputError, match="file not found"):
        read_verdicts(tmp_path / "missing.jsonl", {"a": 2}, exact=True)


def test_a_pass_graded_partly_by_another_judge_is_set_aside_and_earlier_verdicts_stay(tmp_path):
    """Exit 6 in a grading pass (the judge proved to be another): what the pass appended to
    verdicts.jsonl moves to verdicts.rejected-<time>.jsonl, so a resume grades it again; what
    earlier passes and runs wrote (confirmed at their end) stays, with or without a verdict cache."""
    from training.eval.healthbench import _set_aside_tail

    path = tmp_path / "verdicts.jsonl"
    path.write_text('{"prompt_id": "p1", "index": 0, "met": true}\n', encoding="utf-8")
    start = path.stat().st_size
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"prompt_id": "p2", "index": 0, "met": false}\n{"prompt_id": "p2", "index": 1, "met": true}\n')
    _set_aside_tail(path, start)
    assert path.read_text(encoding="utf-8") == '{"prompt_id": "p1", "index": 0, "met": true}\n'
    [aside] = tmp_path.glob("verdicts.rejected-*.jsonl")
    assert aside.read_text(encoding="utf-8").count("\n") == 2 and '"p2"' in aside.read_text(encoding="utf-8")
    _set_aside_tail(path, path.stat().st_size)  # nothing appended: nothing moved
    assert len(list(tmp_path.glob("verdicts.rejected-*.jsonl"))) == 1
