"""Rollout records: what ``rubricstree score`` reads and :class:`RubricReward` scores (a prompt, a
completion, optional HealthBench-style rubric items), parsed with errors that name the file, the
line and the field."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from reward.errors import InputError
from reward.healthbench.schema import Message as PromptMessage
from reward.healthbench.schema import RubricItem
from reward.jsonl import iter_jsonl, validation_error
from reward.router.base import Conversation, as_conversation


# ---------------------------------------------------------------------- input
class Rollout(BaseModel):
    """One rollout: the prompt conversation, the completion to grade, and optionally the row's
    own HealthBench-style rubric items, a context (user records) the router and judge read, and
    the tool calls the completion made (any JSON objects: the judge sees them after the
    conversation; the router walks the agentic branch only when there are some). Unknown fields
    are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1)
    prompt: list[PromptMessage] = Field(min_length=1)
    completion: str
    rubrics: list[RubricItem] | None = None
    context: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @model_validator(mode="after")
    def _rubrics_scorable(self) -> Rollout:
        if self.rubrics is not None and not any(r.points > 0 for r in self.rubrics):
            raise ValueError("rubrics: no item has positive points, so the points score is undefined")
        return self

    @property
    def conversation(self) -> Conversation:
        return as_conversation(self.prompt)

    @property
    def prompt_key(self) -> tuple:
        return (self.conversation, self.context, bool(self.tool_calls))


def parse_rollouts(records: Iterable[dict[str, Any] | Rollout], *, source: str = "<memory>") -> list[Rollout]:
    """Validate rollouts; an error names the source, the record (index and id) and the field.

    Raises:
        InputError: a record is invalid, or two records share an id.
    """
    out: list[Rollout] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(records):
        if isinstance(rec, Rollout):
            r = rec
        else:
            label = f"#{i}" + (f" (id {rec.get('id')})" if isinstance(rec, dict) and "id" in rec else "")
            if not isinstance(rec, dict):
                raise InputError(f"a rollout must be a mapping, got {type(rec).__name__}", file=source, record=label)
            try:
                r = Rollout.model_validate(rec)
            except ValidationError as exc:
                raise validation_error(exc, file=source, record=label) from exc
        if r.id in seen:
            raise InputError(f"duplicate id '{r.id}' (first at #{seen[r.id]})", file=source, record=f"#{i}", field="id")
        seen[r.id] = i
        out.append(r)
    return out


def load_rollouts(path: str | Path) -> list[Rollout]:
    """Load a rollouts JSONL file; errors name the file, the line (and id) and the field."""
    src = str(path)
    out: list[Rollout] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        rec = f"line {lineno}" + (f" (id {obj['id']})" if "id" in obj else "")
        try:
            r = Rollout.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=rec) from exc
        if r.id in seen:
            raise InputError(f"duplicate id '{r.id}' (first on line {seen[r.id]})", file=src, record=rec, field="id")
        seen[r.id] = lineno
        out.append(r)
    if not out:
        raise InputError("no rollouts", file=src)
    return out
