"""Input records of the meta-evaluation, validated on load (errors name file, line and field).

Pairs (``--pairs``), one JSON object per line::

    {"id": "p1", "prompt": [{"role": "user", "content": "..."}], "response": "...",
     "rubrics": [{"criterion": "...", "points": 5}]?,   # optional HealthBench-style items
     "scenario": "symptoms"?, "context": "..."?}

Expert labels (``--labels``), one per pair, joined on ``id``::

    {"id": "p1", "score": 0.75,                         # the panel's overall score in [0, 1]
     "leaves": {"leaf_id": true, ...}?,                  # optional per-leaf "criterion met"
     "rubric_items": [true, false, ...]?}                # optional, aligned with the pair's rubrics

Scores for ``meta-eval agreement``: ``{"item": ID, "<rater>": score, ...}`` per line.

Stability rollouts are the reward's own rollout rows (``reward.stages.rubric_reward.Rollout``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reward.errors import InputError
from reward.healthbench.schema import Message, RubricItem
from reward.jsonl import iter_jsonl, validation_error


def _id_str(v: Any) -> Any:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class Pair(BaseModel):
    """One (conversation, response) the experts scored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1)
    prompt: list[Message] = Field(min_length=1)
    response: str
    rubrics: list[RubricItem] | None = None
    scenario: str = "all"
    context: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return _id_str(v)

    def rollout(self) -> dict[str, Any]:
        """The pair as a reward rollout row."""
        return {"id": self.id, "prompt": [m.model_dump() for m in self.prompt], "completion": self.response,
                "rubrics": [r.model_dump() for r in self.rubrics] if self.rubrics else None,
                "context": self.context}


class ExpertLabel(BaseModel):
    """The expert panel's verdict on one pair."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=1.0, description="overall score in [0, 1]")
    leaves: dict[str, bool] | None = None
    rubric_items: list[bool] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return _id_str(v)


def _load_unique(path: str | Path, model: type[BaseModel]) -> dict[str, Any]:
    src, out, lines = str(path), {}, {}
    for lineno, obj in iter_jsonl(path):
        rec = f"line {lineno}" + (f" (id {obj['id']})" if "id" in obj else "")
        try:
            m = model.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=rec) from exc
        if m.id in out:
            raise InputError(f"duplicate id '{m.id}' (first on line {lines[m.id]})", file=src, record=rec, field="id")
        out[m.id], lines[m.id] = m, lineno
    if not out:
        raise InputError("no records", file=src)
    return out


def load_pairs_and_labels(pairs_path: str | Path, labels_path: str | Path) -> tuple[list[Pair], dict[str, ExpertLabel]]:
    """Load both files and check that every pair has a label and every label a pair, and that
    per-item labels line up with the pair's rubric items."""
    pairs = _load_unique(pairs_path, Pair)
    labels = _load_unique(labels_path, ExpertLabel)
    for pid in pairs:
        if pid not in labels:
            raise InputError(f"pair '{pid}' has no expert label", file=str(labels_path), field="id")
    for lid, lab in labels.items():
        if lid not in pairs:
            raise InputError(f"label for unknown pair '{lid}'", file=str(labels_path), record=f"id {lid}", field="id")
        n_items = len(pairs[lid].rubrics or [])
        if lab.rubric_items is not None and len(lab.rubric_items) != n_items:
            raise InputError(f"{len(lab.rubric_items)} rubric item labels for a pair with {n_items} rubric items",
                             file=str(labels_path), record=f"id {lid}", field="rubric_items")
    return list(pairs.values()), labels


def load_scores(path: str | Path, raters: list[str]) -> tuple[list[str], list[list[float]]]:
    """Read ``{"item", <rater>: score}`` rows; every row must carry a finite number for every
    rater (a missing score is refused with the line and the field named, never dropped)."""
    if len(raters) < 2:
        raise InputError(f"need at least 2 raters, got {raters}", field="raters")
    src = str(path)
    items: list[str] = []
    rows: list[list[float]] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        rec = f"line {lineno}"
        if "item" not in obj:
            raise InputError("missing the item id", file=src, record=rec, field="item")
        item = str(obj["item"])
        if item in seen:
            raise InputError(f"duplicate item '{item}' (first on line {seen[item]})", file=src, record=rec, field="item")
        seen[item] = lineno
        row = []
        for r in raters:
            v = obj.get(r)
            if v is None:
                raise InputError(f"no score from rater '{r}'", file=src, record=rec, field=r)
            if isinstance(v, bool):
                v = float(v)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"score must be a finite number, got {v!r}", file=src, record=rec, field=r)
            row.append(float(v))
        items.append(item)
        rows.append(row)
    if not rows:
        raise InputError("no rows", file=src)
    return items, rows
