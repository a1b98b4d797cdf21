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

__all__ = ["Grade", "GradedText", "graded_text", "split_reasoning"]

Grade = Literal["answer", "full"]


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
