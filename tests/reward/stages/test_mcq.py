"""Tests of the multiple-choice rule reward: answer extraction on real MedQA rows (MIT licence) and
hand-written edge cases, the row loader, ``score_mcq`` and the ``rubricstree mcq score`` command."""

from __future__ import annotations

import functools
import json
import pickle
from pathlib import Path

import pytest
from rt_paths import TESTS_DIR, shared_file
from typer.testing import CliRunner

from reward.errors import InputError, ScoringError
from reward.paths import shared_data_file
from reward.stages.mcq import MCQResult, MCQRow, extract_choice, grade_mcq, load_mcq, mcq_reward, score_mcq
from rubricstree import app

FIXTURE = TESTS_DIR / "fixtures" / "mcq_own.jsonl"


MEDQA = shared_data_file("medqa_usmle_4opt_test.jsonl")  # None where the shared data is absent
N_EXTRACT = 40


@functools.cache
def _medqa_rows(n: int) -> list[MCQRow]:
    if MEDQA is None:
        shared_file("medqa_usmle_4opt_test.jsonl")  # skips, saying where it is looked for
    rows = []
    with MEDQA.open(encoding="utf-8") as fh:
        for line in fh:
            rows.append(MCQRow.model_validate_json(line))
            if len(rows) == n:
                break
    return rows


def _other(row: MCQRow) -> str:
    """A wrong option letter for ``row`` (the next key, cyclically)."""
    keys = sorted(row.options)
    return keys[(keys.index(row.answer_idx) + 1) % len(keys)]


def _listed(row: MCQRow) -> str:
    return "\n".join(f"{k}. {v}" for k, v in sorted(row.options.items()))


# Completion builders: (key, key's option text, a wrong letter, row) -> completion that chooses key.
POSITIVE_FORMS = {
    "answer_colon": lambda k, t, w, r: f"Answer: {k}",
    "boxed": lambda k, t, w, r: f"The findings point one way.\n\n\\boxed{{{k}}}",
    "boxed_text": lambda k, t, w, r: f"$\\boxed{{\\text{{{k}}}}}$",
    "paren_alone": lambda k, t, w, r: f"({k})",
    "answer_is": lambda k, t, w, r: f"Considering the presentation, the answer is {k}.",
    "answer_is_paren": lambda k, t, w, r: f"Therefore the answer is ({k}) {t}.",
    "final_lowercase": lambda k, t, w, r: f"Let me weigh the options.\nFinal answer: {k.lower()}",
    "option_text_alone": lambda k, t, w, r: t,
    "answer_is_text": lambda k, t, w, r: f"The answer is {t}.",
    "think_other_letter": lambda k, t, w, r: f"<think>Maybe {w}. Answer: {w}. No, reconsider.</think>\nAnswer: {k}",
    "bold_answer": lambda k, t, w, r: f"**Answer: {k}**",
    "bold_letter": lambda k, t, w, r: f"The most appropriate choice here:\n**{k}**",
    "bare_letter": lambda k, t, w, r: k,
    "letter_dot_last_line": lambda k, t, w, r: f"After weighing each option, I pick\n{k}.",
    "letter_paren_last_line": lambda k, t, w, r: f"After weighing each option, I pick\n{k})",
    "option_word": lambda k, t, w, r: f"I would go with Option {k}.",
    "letter_and_text_then_explanation": lambda k, t, w, r: f"{k}. {t}\n\nExplanation: this fits the vignette best.",
    "last_statement_wins": lambda k, t, w, r: f"Answer: {w}\nOn reflection that is wrong; the final answer is {k}.",
    "question_echoed_then_answer": lambda k, t, w, r: f"{r.question}\n{_listed(r)}\n\nAnswer: {k}",
    "answer_tag": lambda k, t, w, r: f"<answer>{k}</answer>",
    "correct_option_bold": lambda k, t, w, r: f"The correct option is **{k}**, since {t.lower()} fits.",
}


@pytest.mark.parametrize("row_index", range(N_EXTRACT))
@pytest.mark.parametrize("form", sorted(POSITIVE_FORMS))
def test_medqa_forms_extract_the_key(form: str, row_index: int) -> None:
    row = _medqa_rows(N_EXTRACT)[row_index]
    k, w = row.answer_idx, _other(row)
    completion = POSITIVE_FORMS[form](k, row.options[k], w, row)
    assert extract_choice(completion, row.options) == k
    assert mcq_reward(completion, k, row.options) == 1.0
    # the same completion graded against another key is wrong, not a format failure
    assert grade_mcq(completion, w, row.options) == MCQResult(choice=k, reward=0.0, format_failure=False)


NEGATIVE_FORMS = {
    "question_only": lambda k, t, w, r: r.question,
    "options_listed_only": lambda k, t, w, r: f"{r.question}\n{_listed(r)}",
    "unclosed_think": lambda k, t, w, r: f"<think>The answer is {k}. Answer: {k}",
    "ambiguous_or": lambda k, t, w, r: f"Answer: {k} or {w}",
    "ambiguous_either": lambda k, t, w, r: f"It is either {k} or {w}; the answer is {min(k, w)}/{max(k, w)}.",
    "answer_only_in_think": lambda k, t, w, r: f"<think>Answer: {k}</think>\nI am not sure.",
    "not_an_option_letter": lambda k, t, w, r: "Answer: E",  # MedQA 4-option rows have A..D only
    "empty": lambda k, t, w, r: "   ",
}


@pytest.mark.parametrize("row_index", range(N_EXTRACT))
@pytest.mark.parametrize("form", sorted(NEGATIVE_FORMS))
def test_medqa_unreadable_completions_are_format_failures(form: str, row_index: int) -> None:
    row = _medqa_rows(N_EXTRACT)[row_index]
    k, w = row.answer_idx, _other(row)
    completion = NEGATIVE_FORMS[form](k, row.options[k], w, row)
    assert extract_choice(completion, row.options) is None
    assert grade_mcq(completion, k, row.options) == MCQResult(choice=None, reward=0.0, format_failure=True)


@pytest.mark.parametrize("row_index", range(N_EXTRACT))
def test_medqa_wrong_letter_scores_zero(row_index: int) -> None:
    row = _medqa_rows(N_EXTRACT)[row_index]
    w = _other(row)
    for completion in (f"Answer: {w}", f"\\boxed{{{w}}}", row.options[w], f"The answer is {row.options[w]}"):
        assert extract_choice(completion, row.options) == w
        assert mcq_reward(completion, row.answer_idx, row.options) == 0.0


def test_medqa_questions_starting_with_an_article_are_not_answers() -> None:
    rows = [r for r in _medqa_rows(N_EXTRACT) if r.question.startswith("A ")]
    assert rows, "expected vignettes that start with 'A <age>-year-old'"
    for row in rows:
        first_sentence = row.question.split(".")[0] + "."
        assert extract_choice(first_sentence, row.options) is None


# ---------------------------------------------------------------------------------------------
# hand-written cases
# ---------------------------------------------------------------------------------------------

OWN = {"A": "Lumbar puncture", "B": "Discharge home", "C": "Oral antihistamine", "D": "Knee X-ray"}
ASPIRIN = {"A": "Aspirin", "B": "Aspirin and clopidogrel", "C": "Warfarin", "D": "Heparin"}
ROMAN = {"A": "VII", "B": "VIIa", "C": "X", "D": "XII"}
BLOTS = {"A": "A Northern blot showing the RNA", "B": "A Western blot showing the protein"}


@pytest.mark.parametrize("completion, options, expected", [
    ("Answer: C", None, "C"),
    ("answer: b", None, "B"),
    ("ANSWER - D", None, "D"),
    ("The correct answer is: (A)", OWN, "A"),
    ("The best answer would be D.", OWN, "D"),
    ("The answer is most likely B", OWN, "B"),
    ("Answer: [B]", OWN, "B"),
    ("**Answer:** C", OWN, "C"),
    ("Answer: **C**", OWN, "C"),
    ("Final Answer: $\\boxed{\\textbf{(D)}}$", OWN, "D"),
    ("\\boxed{Lumbar puncture}", OWN, "A"),
    ("The answer is lumbar   PUNCTURE.", OWN, "A"),
    ("knee x-ray", OWN, "D"),
    ("Answer: E", None, "E"),
    ("Answer: A because the neck is stiff.", OWN, "A"),
    ("Answer: A 45-year-old needs a lumbar puncture.", OWN, "A"),  # article, then the option's text
    ("Answer: B\nWait. Final answer: A", OWN, "A"),
    ("<think>It could be (B) or **C**.</think>The answer is (A).", OWN, "A"),
    ("<think>hmm</think><think>Answer: B</think>\n\nAnswer: D", OWN, "D"),
    ("Reasoning first.\n\nAnswer: B\n\nBecause the patient is well, discharge is safe.", OWN, "B"),
    ("A. Lumbar puncture\n\nThe stiff neck suggests meningitis.", OWN, "A"),
    ("A", OWN, "A"),
    ("a", OWN, "A"),
    ("choice D", OWN, "D"),
    ("Option (B).", OWN, "B"),
    ("The answer is aspirin and clopidogrel.", ASPIRIN, "B"),  # nested option texts: the longer one
    ("The answer is Aspirin.", ASPIRIN, "A"),
    ("Answer:\nB", OWN, "B"),
    ("Answer: b", {"a": "x", "b": "y"}, "B"),  # lower-case option keys given directly
    ("<think>x</think>Answer: C <think>but maybe", OWN, "C"),
    ("The answer is **C. Oral antihistamine**", OWN, "C"),
    ("Answer: C\n\nOption A is wrong and option D is irrelevant.", OWN, "C"),
    ("X", ROMAN, "C"),  # an option's text that is a letter but not an option key
    ("The answer is A Western blot showing the protein.", BLOTS, "B"),  # option text starting with "A"
    ("The answer is A.", BLOTS, "A"),
    ("B. Reid index > 50%", {"A": "Hypereosinophilia", "B": "Reid Index > 50%"}, "B"),
    ("Repeat screening; give anti-Rh(D) globulin", {"A": "Repeat screening; give anti-Rh(D) globulin",
                                                    "D": "No further management"}, "A"),
])
def test_extract_choice_positive(completion: str, options: dict | None, expected: str) -> None:
    assert extract_choice(completion, options) == expected


@pytest.mark.parametrize("completion, options", [
    ("", None),
    ("I don't know.", OWN),
    ("A 45-year-old man presents with chest pain.", OWN),
    ("A 45-year-old man presents with chest pain.", None),
    ("The answer is a lumbar drain, which is not listed.", None),
    ("Answer: A or B", OWN),
    ("Answer: C, D", OWN),
    ("The answer is B/C", OWN),
    ("The answer is either A or B.", OWN),
    ("<think>Answer: A", OWN),
    ("<think>I'm still thinking... the answer is C because", None),
    ("<think>Answer: A</think>", OWN),
    ("<think>x</think>\n<think>Answer: B, still thinking", OWN),
    ("Answer: E", OWN),  # not an option key of a 4-option question
    ("Answer: F", None),
    ("The answer is d-dimer.", None),
    ("Answer: e.g. a lumbar drain", None),
    ("Option (A) is wrong and option (C) is wrong too.", OWN),
    ("A. Lumbar puncture\nB. Discharge home\nC. Oral antihistamine\nD. Knee X-ray", OWN),
    ("The answer is Aspirin or Warfarin.", ASPIRIN),
    ("Something about a knee.", OWN),
])
def test_extract_choice_negative(completion: str, options: dict | None) -> None:
    assert extract_choice(completion, options) is None


def test_grade_and_reward() -> None:
    assert grade_mcq("Answer: a", "A", OWN) == MCQResult(choice="A", reward=1.0, format_failure=False)
    assert grade_mcq("Answer: B", "A", OWN) == MCQResult(choice="B", reward=0.0, format_failure=False)
    assert grade_mcq("no idea", "A", OWN) == MCQResult(choice=None, reward=0.0, format_failure=True)
    assert mcq_reward("Answer: c", "c") == 1.0
    assert pickle.loads(pickle.dumps(grade_mcq("Answer: A", "A"))).reward == 1.0


# ---------------------------------------------------------------------------------------------
# loading and scoring
# ---------------------------------------------------------------------------------------------

def test_load_fixture_ignores_extra_fields() -> None:
    rows = load_mcq(FIXTURE)
    assert [r.answer_idx for r in rows] == ["A", "C", "B"]
    assert rows[2].answer is None and set(rows[1].options) == set("ABCDE")


@pytest.mark.parametrize("row, field", [
    ({"question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "C"}, "answer_idx"),
    ({"question": "q", "options": {"A": "x", "7": "y"}, "answer_idx": "A"}, "options"),
    ({"question": "q", "options": {"A": "x", "B": " "}, "answer_idx": "A"}, "options"),
    ({"options": {"A": "x", "B": "y"}, "answer_idx": "A"}, "question"),
    ({"question": "q", "options": {"A": "x", "B": "y"}}, "answer_idx"),
])
def test_load_errors_name_file_line_and_field(tmp_path: Path, row: dict, field: str) -> None:
    path = tmp_path / "rows.jsonl"
    good = {"question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "B"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputError) as err:
        load_mcq(path)
    assert err.value.field == field
    assert str(path) in str(err.value) and "line 2" in str(err.value)


def test_score_mcq_counts_format_failures() -> None:
    rows = load_mcq(FIXTURE)
    out = score_mcq(rows, ["Answer: A", "I am unsure", "Answer: C"])
    assert out == {"accuracy": pytest.approx(1 / 3), "format_failures": 1, "rewards": [1.0, 0.0, 0.0]}
    with pytest.raises(ScoringError):
        score_mcq(rows, ["Answer: A"])
    with pytest.raises(ScoringError):
        score_mcq([], [])


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

runner = CliRunner()


def _write_completions(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _score(data: Path, completions: Path, *extra: str):
    return runner.invoke(app, ["mcq", "score", "--data", str(data), "--completions", str(completions), *extra])


def test_cli_score_json(tmp_path: Path) -> None:
    comps = _write_completions(tmp_path / "c.jsonl", [
        {"index": 2, "completion": "The answer is Pancreas."},
        {"index": 0, "completion": "Answer: B"},
        {"index": 1, "completion": "<think>C?"},
    ])
    result = _score(FIXTURE, comps, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == {"accuracy", "format_failures", "rewards"}
    assert out["rewards"] == [1.0, 0.0, 0.0]
    assert out["accuracy"] == pytest.approx(1 / 3)
    assert out["format_failures"] == 1


def test_cli_score_summary(tmp_path: Path) -> None:
    comps = _write_completions(tmp_path / "c.jsonl", [{"index": 1, "completion": "\\boxed{C}"}])
    result = _score(FIXTURE, comps)
    assert result.exit_code == 0, result.output
    assert "accuracy: 1.0000 (1/1 correct)" in result.output
    assert "format failures: 0" in result.output and "scored 1 of 3 rows" in result.output


@pytest.mark.parametrize("lines, reason", [
    ([{"index": 0, "completion": "A"}, {"index": 3, "completion": "A"}], "out of range"),
    ([{"index": 0, "completion": "A"}, {"index": 0, "completion": "B"}], "already given on line 1"),
    ([{"index": 0, "completion": "A"}, {"index": -1, "completion": "B"}], "greater than or equal to 0"),
    ([{"index": 0, "completion": "A"}, {"index": "1", "completion": "B"}], "valid integer"),
])
def test_cli_bad_index_exits_2_naming_the_field(tmp_path: Path, lines: list[dict], reason: str) -> None:
    comps = _write_completions(tmp_path / "c.jsonl", lines)
    result = _score(FIXTURE, comps, "--json")
    assert result.exit_code == 2
    assert str(comps) in result.stderr and "line 2" in result.stderr
    assert "field 'index'" in result.stderr and reason in result.stderr


def test_cli_missing_completion_field_and_bad_data(tmp_path: Path) -> None:
    comps = _write_completions(tmp_path / "c.jsonl", [{"index": 0}])
    result = _score(FIXTURE, comps)
    assert result.exit_code == 2 and "field 'completion'" in result.stderr
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"question": "q", "options": {"A": "x"}, "answer_idx": "A"}) + "\n")
    result = _score(bad, _write_completions(tmp_path / "c2.jsonl", [{"index": 0, "completion": "A"}]))
    assert result.exit_code == 2 and "field 'options'" in result.stderr


def test_cli_on_real_medqa_rows(tmp_path: Path) -> None:
    rows = _medqa_rows(50)
    right = _write_completions(tmp_path / "right.jsonl",
                               [{"index": i, "completion": f"Answer: {r.answer_idx}"} for i, r in enumerate(rows)])
    result = _score(MEDQA, right, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out == {"accuracy": 1.0, "format_failures": 0, "rewards": [1.0] * 50}

    shifted = _write_completions(tmp_path / "shifted.jsonl",
                                 [{"index": i, "completion": f"Answer: {_other(r)}"} for i, r in enumerate(rows)])
    out = json.loads(_score(MEDQA, shifted, "--json").stdout)
    assert out == {"accuracy": 0.0, "format_failures": 0, "rewards": [0.0] * 50}
