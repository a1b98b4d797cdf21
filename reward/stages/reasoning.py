"""What of a reasoning model's completion a rubric grades: the final answer after ``</think>``.

Data flow: completion text -> :func:`split_reasoning` ``(answer, reasoning)`` ->
:func:`graded_text` (``grade="answer"``: the answer alone; ``"full"``: the text as is) ->
:class:`GradedText` (``format_failure`` when a ``<think>`` block was never closed: the model ran
out of budget while thinking and gave no answer; the rubric rewards score it with their
``format_failure_score`` and count it, the judge never sees it). Stage 3 and ``rubricstree score``
grade the answer; stage 2 (error rubrics) grades the full trajectory, since the reasoning's
errors are what it scores. ``training.generation`` imports :func:`split_reasoning` from here.
Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FLOOR_MARGIN", "Grade", "GradedText", "failure_score", "graded_text", "parse_failure_score",
           "split_reasoning"]

Grade = Literal["answer", "full"]
FLOOR_MARGIN = 0.1  # "floor": this far below the worst score a finished answer to the row can get


def split_reasoning(text: str) -> tuple[str, str | None]:
    """``(answer, reasoning)``: the text after the last ``</think>`` and the block before it.
    An unclosed ``<think>`` (the budget ran out while thinking) leaves only what preceded it."""
    if "</think>" in text:
        before, answer = text.rsplit("</think>", 1)
        return answer.strip(), before.replace("<think>", "", 1).strip()
    if "<think>" in text:
        before, reasoning = text.split("<think>", 1)
        return before.strip(), reasoning.strip()
    return text, None


@dataclass(frozen=True)
class GradedText:
    """The text a rubric judge sees, and whether the completion failed the think format."""

    text: str
    format_failure: bool = False


def graded_text(completion: str, grade: Grade = "answer") -> GradedText:
    """The part of ``completion`` to grade: its final answer (``answer``) or all of it (``full``).
    With ``answer``, an unclosed ``<think>`` is a format failure (no final answer was given)."""
    if grade == "full":
        return GradedText(completion)
    if grade != "answer":
        raise ValueError(f"grade must be 'answer' or 'full', got {grade!r}")
    unclosed = "<think>" in completion and "</think>" not in completion
    answer, _ = split_reasoning(completion)
    return GradedText(answer, format_failure=unclosed)


def parse_failure_score(value: float | str | None) -> float | str | None:
    """Validate a ``format_failure_score``: a number, None (unscored), ``"floor"`` or ``"floor-M"``
    (M: the margin below the row's worst finished score; ``floor`` is ``floor-0.1``)."""
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.startswith("floor"):
        tail = value[len("floor"):]
        try:
            if tail == "" or (tail.startswith("-") and float(tail[1:]) >= 0):
                return value
        except ValueError:
            pass
    raise ValueError(f"format_failure_score must be a number, null, 'floor' or 'floor-MARGIN', got {value!r}")


def failure_score(setting: float | str | None, worst: float | None) -> float | None:
    """The score of an unfinished answer (an unclosed ``<think>``). A number or None is used as is.
    ``floor``/``floor-M`` puts it below every finished answer to the same row: ``worst`` (the lowest
    score a finished answer can get: every positive criterion missed, every negative one met)
    minus the margin. Running out of budget then never beats answering, however badly."""
    setting = parse_failure_score(setting)
    if not isinstance(setting, str):
        return setting
    if worst is None:
        return None
    margin = float(setting[len("floor-"):]) if setting.startswith("floor-") else FLOOR_MARGIN
    return worst - margin
