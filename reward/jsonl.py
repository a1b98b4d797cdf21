"""JSON Lines: the one reader and the one writer, with errors that name the file and the line.

- :func:`iter_jsonl` reads a file line by line (``(line_number, object)``); :func:`load_models`
  validates each line into a pydantic model.
- :class:`JsonlLog` is an append-only file written as results arrive (each line flushed, so a
  killed process loses nothing already appended); :meth:`JsonlLog.load` reads it back, cutting a
  torn last line (a kill mid-write) instead of failing on it. :func:`append_jsonl` appends once.
- :func:`write_jsonl` writes a whole file atomically (a temporary file, then a rename).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reward.errors import InputError
from reward.textio import MAX_JSON_DEPTH, MAX_LINE_BYTES, clean_surrogates, decode_line, nesting_depth

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)

__all__ = ["JsonlLog", "append_jsonl", "iter_jsonl", "load_models", "validation_error", "write_jsonl"]


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _parse(line: str, path: Path, lineno: int) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        obj = json.loads(line, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.args[0]!r} (JSON would keep only the last value)",
                         file=str(path), record=f"line {lineno}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), record=f"line {lineno}") from exc
    except RecursionError as exc:
        raise InputError("JSON nested too deeply", file=str(path), record=f"line {lineno}") from exc
    if not isinstance(obj, dict):
        raise InputError("each line must be a JSON object", file=str(path), record=f"line {lineno}")
    if nesting_depth(obj, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:  # every later walk over it would recurse that deep
        raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", file=str(path), record=f"line {lineno}")
    return clean_surrogates(obj) if "\\u" in line else obj


def _line(obj: dict[str, Any] | BaseModel) -> str:
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    return json.dumps(data, ensure_ascii=False) + "\n"


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-empty line; line numbers start at 1."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if path.is_dir():
        raise InputError("is a folder, not a file", file=str(path))
    with path.open("rb") as fh:  # decoded per line: a bad byte is reported with its line
        lineno = 0
        while raw := fh.readline(MAX_LINE_BYTES + 1):
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"a line of more than {MAX_LINE_BYTES:,} bytes", file=str(path),
                                 record=f"line {lineno}")
            obj = _parse(decode_line(raw, path, lineno), path, lineno)
            if obj is not None:
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


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any] | BaseModel]) -> None:
    """Write ``rows`` as the whole file, atomically (readers never see half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(_line(r))
    tmp.replace(path)


class JsonlLog:
    """An append-only JSONL file: :meth:`load` reads (and repairs) it, :meth:`append` writes.

    Args:
        path: the file; created on the first append.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh = None

    def load(self) -> list[dict[str, Any]]:
        """Every complete record, ``[]`` for no file. A torn last line (no newline, a kill
        mid-write) is removed from the file; a bad line elsewhere is an error naming the file
        and line, because it means the file was edited, not interrupted."""
        return [obj for _, obj in self.load_numbered()]

    def load_numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """:meth:`load` with each record's line number (for errors that name the line)."""
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        good_end = self._cut_torn_tail(len(raw), raw.rfind(b"\n") + 1)
        out = []
        for lineno, line in enumerate(raw[:good_end].decode("utf-8").splitlines(), start=1):
            obj = _parse(line, self.path, lineno)
            if obj is not None:
                out.append((lineno, obj))
        return out

    def _cut_torn_tail(self, size: int, good_end: int) -> int:
        if good_end < size:
            log.warning("%s: dropping an unfinished last line (the run was interrupted)", self.path)
            with self.path.open("r+b") as fh:
                fh.truncate(good_end)
        return good_end

    def _repair_before_append(self) -> None:
        """Files that are only appended to (failures, runs) are never loaded first: cut a torn
        tail here, else the next record would be glued to it and the line would not parse."""
        if not self.path.exists():
            return
        with self.path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            raw = fh.read()
        self._cut_torn_tail(size, raw.rfind(b"\n") + 1)

    def append(self, obj: dict[str, Any] | BaseModel) -> None:
        """Write one record and flush it to the operating system (a killed process loses
        nothing already appended; only a power cut could, and fsync per line would be slow)."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._repair_before_append()
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(_line(obj))
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def append_jsonl(path: str | Path, obj: dict[str, Any] | BaseModel) -> None:
    """Append one record and flush it, so that a crash loses nothing already written."""
    log_ = JsonlLog(path)
    try:
        log_.append(obj)
    finally:
        log_.close()
