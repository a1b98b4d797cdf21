"""The resumable output of an optimisation command: one append-only JSONL, read back on start.

Every record has a ``kind`` and an ``id`` (plus a ``round`` or sample index where it needs one).
A command first loads what the file holds (a torn last line from a kill is cut) and then does
only what is missing, appending each record the moment it exists. A ``settings.json`` next to the
file pins what changes the results (model, judge, rounds, n, ...): a rerun with other settings is
refused, so one file never mixes two configurations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError
from reward.healthbench.schema import Message, RubricItem
from reward.jsonl import JsonlLog, iter_jsonl, validation_error
from training.eval.store import CrashHook, check_settings

__all__ = ["OptimizeLog", "PromptRow", "load_prompts"]


class PromptRow(BaseModel):
    """One prompt to answer: ``id`` (or HealthBench's ``prompt_id``), the conversation, and
    optionally the row's rubric items and a context. Unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str = Field(min_length=1)
    prompt: list[Message] = Field(min_length=1)
    rubrics: list[RubricItem] | None = None
    context: str | None = None

    def messages(self) -> list[dict[str, Any]]:
        return [m.model_dump() for m in self.prompt]


def load_prompts(path: str | Path) -> list[PromptRow]:
    """Prompt rows from a JSONL file; errors name the file, the line and the field."""
    out: list[PromptRow] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        obj = dict(obj)
        if "id" not in obj and "prompt_id" in obj:
            obj["id"] = obj["prompt_id"]
        if isinstance(obj.get("id"), int):
            obj["id"] = str(obj["id"])
        rec = f"line {lineno}" + (f" (id {obj['id']})" if "id" in obj else "")
        try:
            row = PromptRow.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, file=str(path), record=rec) from exc
        if row.id in seen:
            raise InputError(f"duplicate id '{row.id}' (first on line {seen[row.id]})", file=str(path),
                             record=rec, field="id")
        seen[row.id] = lineno
        out.append(row)
    if not out:
        raise InputError("no prompts", file=str(path))
    return out


class OptimizeLog:
    """``out`` JSONL plus ``out.settings.json``; :meth:`records` of a kind, :meth:`append` one.

    The crash hook (``RUBRICSTREE_EVAL_CRASH_AFTER=<kind>:N[:kill]``) stops the process after the
    N-th record of a kind, for resume tests.
    """

    def __init__(self, out: str | Path, settings: dict[str, Any]) -> None:
        self.path = Path(out)
        check_settings(self.path.with_name(self.path.name + ".settings.json"), settings)
        self._log = JsonlLog(self.path)
        self._rows = self._log.load()
        self._crash = CrashHook()

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self._rows if r.get("kind") == kind]

    def append(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        self._crash.guard()
        rec = {"kind": kind, **record}
        self._log.append(rec)
        self._rows.append(rec)
        self._crash.tick(kind)
        return rec

    def close(self) -> None:
        self._log.close()
