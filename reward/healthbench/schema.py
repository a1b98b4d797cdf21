"""Pydantic models of a HealthBench row and a loader that also reads HealthBench Professional.

Both formats are normalised into :class:`HealthBenchRow`, so the scorer and the judge see one
shape. Every error names the file, the line (and prompt id when known) and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from reward.errors import InputError
from reward.jsonl import iter_jsonl, validation_error


def _not_bool(v: Any) -> Any:
    """``true`` is not 1 point: a boolean where a number belongs is a mistake in the file."""
    if isinstance(v, bool):
        raise PydanticCustomError("points_bool", "must be a number of points, not true/false")
    return v


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


class Message(BaseModel):
    """One conversation turn."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    role: str = Field(min_length=1)
    content: str


class RubricItem(BaseModel):
    """One rubric criterion. Negative ``points`` describe an undesirable behaviour: when the
    grader says it is met, the (negative) points are added."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    criterion: str = Field(min_length=1)
    points: float
    tags: list[str] = Field(default_factory=list)

    _points_finite = field_validator("points")(_finite)
    _points_not_bool = field_validator("points", mode="before")(_not_bool)


class HealthBenchRow(BaseModel):
    """One HealthBench example (full, hard and consensus format; unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt_id: str = Field(min_length=1)
    prompt: list[Message] = Field(min_length=1)
    rubrics: list[RubricItem] = Field(min_length=1)
    example_tags: list[str] = Field(default_factory=list)
    ideal_completions_data: Any = None
    canary: str | None = None


class _ProRubricItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    criterion_text: str = Field(min_length=1)
    points: float
    tags: list[str] = Field(default_factory=list)

    _points_finite = field_validator("points")(_finite)
    _points_not_bool = field_validator("points", mode="before")(_not_bool)


class _ProConversation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: list[Message] = Field(min_length=1)


class _ProRow(BaseModel):
    """HealthBench Professional as published; only used to validate before normalising."""

    model_config = ConfigDict(extra="ignore")

    id: str | int
    conversation: _ProConversation
    rubric_items: list[_ProRubricItem] = Field(min_length=1)
    use_case: str | list[str] | None = None
    type: str | list[str] | None = None
    difficulty: str | int | list[str] | None = None
    specialty: str | list[str] | None = None


# Professional metadata fields that become example tags ``<field>:<value>``.
PROFESSIONAL_TAG_FIELDS = ("use_case", "type", "difficulty", "specialty")


def _professional_to_row(pro: _ProRow) -> HealthBenchRow:
    tags: list[str] = []
    for name in PROFESSIONAL_TAG_FIELDS:
        value = getattr(pro, name)
        for v in value if isinstance(value, list) else [value]:
            if v is not None and str(v).strip():
                tags.append(f"{name}:{v}")
    return HealthBenchRow(
        prompt_id=str(pro.id),
        prompt=pro.conversation.messages,
        rubrics=[RubricItem(criterion=r.criterion_text, points=r.points, tags=r.tags)
                 for r in pro.rubric_items],
        example_tags=tags,
    )


def parse_row(obj: dict[str, Any], *, file: str = "<memory>", record: str | int | None = None
              ) -> HealthBenchRow:
    """Validate one decoded JSON object in either format and return the normalised row.

    Args:
        obj: the decoded line.
        file: file name used in error messages.
        record: record label used in error messages (e.g. ``"line 3"``).
    """
    ident = obj.get("prompt_id", obj.get("id"))
    where = f"{record} (prompt_id {ident})" if record is not None and ident is not None else record
    if "rubrics" in obj or "prompt" in obj:
        model: type[BaseModel] = HealthBenchRow
    elif "rubric_items" in obj or "conversation" in obj:
        model = _ProRow
    else:
        raise InputError("neither HealthBench ('prompt', 'rubrics') nor HealthBench Professional "
                         "('conversation', 'rubric_items') format", file=file, record=where)
    try:
        parsed = model.model_validate(obj)
    except ValidationError as exc:
        raise validation_error(exc, file=file, record=where) from exc
    return parsed if isinstance(parsed, HealthBenchRow) else _professional_to_row(parsed)


def load_healthbench(path: str | Path) -> list[HealthBenchRow]:
    """Load a HealthBench JSONL file (full/hard/consensus or Professional format).

    Args:
        path: the JSONL file; one row per line.

    Raises:
        InputError: a line is not valid JSON, a field is missing or of the wrong type, or two
            rows share a prompt id (verdicts are keyed by it).
    """
    src = str(path)
    rows: list[HealthBenchRow] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        row = parse_row(obj, file=src, record=f"line {lineno}")
        if row.prompt_id in seen:
            raise InputError(f"duplicate prompt_id '{row.prompt_id}' (first on line {seen[row.prompt_id]})",
                             file=src, record=f"line {lineno}", field="prompt_id")
        seen[row.prompt_id] = lineno
        rows.append(row)
    if not rows:
        raise InputError("no rows", file=src)
    return rows
