"""What the judge gate said at each launch of a run, kept in the run's folder.

A run may be launched many times (resumes, one stage-3 epoch per launch), each time past the gate
(``training.judge_gate``). Every launch appends its outcome to :data:`RECORD` in the run folder (TRL's
``output_dir``, verl's ``trainer.default_local_dir``), beside the start record: whether the judge
passed, and when it did not, that the launch went on under ``judge_gate.enforce: false`` and
what the gate refused. The exports read it back into their model card (``training.model_card``),
so a policy trained on a judge the gate refused says so wherever it goes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["RECORD", "append_outcome", "gate_history", "overridden"]

RECORD = "judge_gate.json"


def gate_history(folder: str | Path) -> list[dict[str, Any]]:
    """Every launch's gate outcome recorded in ``folder``, oldest first (none: an empty list; an
    unreadable file is kept as one entry saying so, never dropped)."""
    path = Path(folder) / RECORD
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [{"overridden": True, "line": f"the gate record {path} cannot be read ({exc}): treat the run as "
                                               "trained on an unchecked judge"}]
    return data if isinstance(data, list) else [data]


def append_outcome(folder: str | Path, outcome: dict[str, Any]) -> Path:
    """Add one launch's outcome to ``folder``'s record (atomically: the old list or the new one)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RECORD
    history = [*gate_history(folder), outcome]
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(history, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def overridden(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The launches that went on past a refusal."""
    return [h for h in history if h.get("overridden")]
