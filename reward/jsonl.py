"""Reading and writing JSON Lines with errors that name the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reward.errors import InputError

M = TypeVar("M", bound=BaseModel)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-empty line; line numbers start at 1."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", file=str(path), record=f"line {lineno}") from exc
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", file=str(path), record=f"line {lineno}")
            yield lineno, obj


def validation_error(exc: ValidationError, *, file: str, record: str | int) -> InputError:
    """Turn pydantic's error into one that names the file, the record and the first bad field."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or None
    return InputError(first.get("msg", str(exc)), file=file, record=record, field=field)


def load_models(path: str | Path, model: type[M]) -> list[M]:
    """Load every line of ``path`` into ``model``, raising :class:`InputError` on the first bad one."""
    out: list[M] = []
    for lineno, obj in iter_jsonl(path):
        try:
            out.append(model.model_validate(obj))
        except ValidationError as exc:
            raise validation_error(exc, file=str(path), record=f"line {lineno}") from exc
    return out


def append_jsonl(path: str | Path, obj: dict[str, Any] | BaseModel) -> None:
    """Append one record and flush it, so that a crash loses nothing already written."""
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(data, ensure_ascii=False) + "\n")
        fh.flush()
