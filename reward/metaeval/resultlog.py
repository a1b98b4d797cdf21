"""The append-only results log every meta-eval runner resumes from.

Rows are JSON objects, one per line, appended and flushed as they are produced. A kill can leave
a torn last line: reading skips any line that does not parse, and appending first ends such a
line, so the next row is never glued onto the fragment (and lost).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Every parseable object row of ``path`` (none when it does not exist)."""
    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from a kill
        if isinstance(row, dict):
            yield row


def append_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append ``rows`` and flush; a torn last line is ended first."""
    if not rows:
        return
    torn = False
    if path.exists() and path.stat().st_size:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            torn = fh.read(1) != b"\n"
    with path.open("a", encoding="utf-8") as fh:
        if torn:
            fh.write("\n")
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        fh.flush()
