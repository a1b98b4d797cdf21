"""Derived HealthBench sets: ``easy`` = the full file minus the hard file, by ``prompt_id``.

The Fathom-Vaidya paper trains and ablates on "HealthBench-Easy", the 4,000 conversations of the
full set that are not in Hard. No such file is published, so it is built here from the two
published files (each checked against its published SHA-256 by the caller), written once into
the cache folder under a name that carries both source hashes, and reused. Rows keep the full
file's order and bytes (each line copied as it is), so the derived file's hash is reproducible.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reward.errors import InputError

EASY = "easy"


def build_easy(full: Path, hard: Path, dest_dir: Path) -> Path:
    """Write (once) and return the easy file: lines of ``full`` whose prompt_id is not in ``hard``.

    Raises:
        InputError: a line is not JSON or has no ``prompt_id`` (names the file and line), or
            no row of ``hard`` is in ``full`` (the two are not the published pair).
    """
    from reward.healthbench.variants import sha256_file

    dest = dest_dir / f"easy_{sha256_file(full)[:12]}_minus_{sha256_file(hard)[:12]}.jsonl"
    if dest.is_file():
        return dest
    hard_ids = set(_ids(hard))
    kept, dropped = [], 0
    with full.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if _id(line, full, n) in hard_ids:
                dropped += 1
            else:
                kept.append(line if line.endswith("\n") else line + "\n")
    if not dropped:
        raise InputError("no prompt_id of the hard file occurs in the full file: not the published pair",
                         file=str(full))
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + f".part{os.getpid()}")
    part.write_text("".join(kept), encoding="utf-8")
    os.replace(part, dest)
    return dest


def _ids(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as fh:
        return [_id(line, path, n) for n, line in enumerate(fh, start=1) if line.strip()]


def _id(line: str, path: Path, n: int) -> str:
    try:
        pid = json.loads(line).get("prompt_id")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise InputError("not a JSON object", file=str(path), record=f"line {n}") from exc
    if not isinstance(pid, str):
        raise InputError("no string prompt_id", file=str(path), record=f"line {n}", field="prompt_id")
    return pid
