"""The files of an evaluation folder: one typed record, one reader and one writer per format.

- ``generations.jsonl``: :class:`Generation` (the key column is ``prompt_id`` for HealthBench,
  ``id`` for multiple choice); :func:`read_generations` keeps the first line per key (the one
  that was graded).
- ``verdicts.jsonl``: :class:`VerdictLine` (``prompt_id``, ``rubric_index``, ``criteria_met``,
  ...); :func:`read_verdicts` is the one reader, for this pipeline's own resumable files
  (``exact=False``: lines of other rows ignored, a torn last line cut) and for a user's file
  given to ``rubricstree healthbench score --verdicts`` (``exact=True``: every item exactly once).
- ``generation_failures.jsonl`` / ``judge_failures.jsonl``: :class:`Failure`.
- ``runs.jsonl``: :class:`RunRecord`, what one invocation did (counts, timings, judge counters).

Each reader names the file, the line and the field of a bad record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from reward.errors import InputError
from reward.jsonl import JsonlLog, iter_jsonl, validation_error

KeyField = Literal["prompt_id", "id"]

__all__ = ["Failure", "Generation", "KeyField", "RunRecord", "VerdictLine", "now", "read_generations",
           "read_verdicts"]


def now() -> str:
    """UTC time to the second, as written in failure and run records."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Generation:
    """One line of ``generations.jsonl``: a response to the example ``key``."""

    key: str
    response: str
    finish_reason: str | None = None
    completion_tokens: int | None = None
    reasoning: str | None = None

    def to_json(self, key_field: KeyField) -> dict[str, Any]:
        rec: dict[str, Any] = {key_field: self.key, "response": self.response, "finish_reason": self.finish_reason,
                               "completion_tokens": self.completion_tokens}
        if self.reasoning:
            rec["reasoning"] = self.reasoning
        return rec


def read_generations(path: str | Path, key_field: KeyField, wanted: set[str] | None = None) -> dict[str, Generation]:
    """``{key: Generation}`` of an evaluation's ``generations.jsonl`` ({} when absent), the first
    line per key; keys outside ``wanted`` (rows beyond a ``--limit``) are skipped.

    Raises:
        InputError: a line without a string key or response (names the file and line).
    """
    log_ = JsonlLog(path)
    out: dict[str, Generation] = {}
    for lineno, rec in log_.load_numbered():
        key, resp = rec.get(key_field), rec.get("response")
        if not isinstance(key, str) or not isinstance(resp, str):
            raise InputError(f"a generation needs a string {key_field} and response", file=str(log_.path),
                             record=f"line {lineno}")
        if wanted is None or key in wanted:
            out.setdefault(key, Generation(key, resp, rec.get("finish_reason"), rec.get("completion_tokens"),
                                           rec.get("reasoning")))
    return out


class VerdictLine(BaseModel):
    """One line of ``verdicts.jsonl``: the judge's verdict on one rubric item of one example."""

    model_config = ConfigDict(extra="ignore")

    prompt_id: str = Field(min_length=1)
    rubric_index: int = Field(ge=0)
    criteria_met: StrictBool | None = Field(description="null = unscored by the judge; reported as missing")
    p_yes: float | None = None
    explanation: str | None = None

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"prompt_id": self.prompt_id, "rubric_index": self.rubric_index,
                               "criteria_met": self.criteria_met, "p_yes": self.p_yes}
        if self.explanation:
            rec["explanation"] = self.explanation
        return rec


def read_verdicts(path: str | Path, n_items: dict[str, int], *, exact: bool) -> dict[tuple[str, int], bool]:
    """``{(prompt_id, rubric_index): criteria_met}`` from a verdicts file.

    Args:
        n_items: rubric items per prompt id of the rows being scored.
        exact: a user's file (``healthbench score``): it must exist, name only known prompts
            and in-range items, each once, and cover every item with a boolean. Otherwise this
            pipeline's resumable file: absent is empty, a torn last line is cut, lines of other
            rows and null verdicts are skipped, and the first verdict per item wins.

    Raises:
        InputError: names the file, the line and the field.
    """
    src = str(path)
    lines = iter_jsonl(path) if exact else JsonlLog(path).load_numbered()
    out: dict[tuple[str, int], bool] = {}
    seen: dict[tuple[str, int], int] = {}
    for lineno, obj in lines:
        rec = f"line {lineno}"
        try:
            v = VerdictLine.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=rec) from exc
        key = (v.prompt_id, v.rubric_index)
        known = v.prompt_id in n_items and v.rubric_index < n_items[v.prompt_id]
        if exact:
            if v.prompt_id not in n_items:
                raise InputError(f"prompt_id '{v.prompt_id}' is not in the data file", file=src,
                                 record=rec, field="prompt_id")
            if not known:
                raise InputError(f"rubric_index {v.rubric_index} out of range: prompt_id '{v.prompt_id}' "
                                 f"has {n_items[v.prompt_id]} rubric items", file=src, record=rec,
                                 field="rubric_index")
            if key in seen:
                raise InputError(f"duplicate verdict for prompt_id '{v.prompt_id}' rubric_index "
                                 f"{v.rubric_index} (first on line {seen[key]})", file=src, record=rec)
        seen.setdefault(key, lineno)
        if known and v.criteria_met is not None:
            out.setdefault(key, v.criteria_met)
    if exact:
        for pid, n in n_items.items():
            for i in range(n):
                if (pid, i) not in out:
                    why = "criteria_met is null (unscored)" if (pid, i) in seen else "no verdict"
                    raise InputError(f"{why} for prompt_id '{pid}' rubric_index {i}", file=src)
    return out


class Failure(BaseModel):
    """One line of ``generation_failures.jsonl`` or ``judge_failures.jsonl``."""

    model_config = ConfigDict(extra="ignore")

    key: str
    error: str
    rubric_index: int | None = None
    time: str = Field(default_factory=now)

    def to_json(self, key_field: KeyField) -> dict[str, Any]:
        rec: dict[str, Any] = {key_field: self.key}
        if self.rubric_index is not None:
            rec["rubric_index"] = self.rubric_index
            rec["failure"] = self.error
        else:
            rec["error"] = self.error
        rec["time"] = self.time
        return rec


class RunRecord(BaseModel):
    """One line of ``runs.jsonl``: what one invocation found, did and how long it took."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    started: str = Field(default_factory=now)
    argv: list[str] = Field(default_factory=list)
    generations_found: int = 0
    generated: int = 0
    generation_failures: int = 0
    verdicts_found: int | None = None
    graded_items: int | None = None
    judge_failures: int | None = None
    judge_stats: dict[str, Any] | None = None
    finished: str | None = None
    wall_s: float | None = None
    n_scored: int | None = None
    n_unscored: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)
