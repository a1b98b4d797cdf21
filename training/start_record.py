"""Which start model a run's checkpoints came from, so that a rerun from another one is not
silently resumed.

Both trainers resume from the newest checkpoint in their folder (TRL's launcher from ``output_dir``,
verl from ``trainer.default_local_dir``), and a checkpoint holds the weights: a rerun that names a
new start model (a retrained stage-1 export, another base model) but keeps the folder would
continue the old run and label the result with the new start. The first run writes :data:`RECORD`
in the folder: the start model as given, its real path when it is a local folder, and a
fingerprint of its weights (the export's ``export.json`` and every weight file's size and
modification time, shards included), so a start model retrained into the same path is told apart
too, even with the same step count.
:func:`check_start` refuses a resume whose start model differs. A folder with checkpoints and no
record (written before this check) is resumed as the trainer would, with a note.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from reward.errors import InputError
from training.hf_export import WEIGHT_FILES

__all__ = ["RECORD", "check_start", "describe", "same_start"]

RECORD = "rubricstree_start.json"
log = logging.getLogger(__name__)


def describe(model: str) -> dict[str, Any]:
    """What the record keeps of a start model (see the module docstring)."""
    p = Path(model).expanduser()
    if not p.is_dir():
        return {"model": model}
    meta = p / "export.json"
    export: Any = None
    if meta.is_file():
        try:
            export = json.loads(meta.read_text())
        except (OSError, ValueError):
            export = meta.read_text(errors="replace")
    # every weight file, shards included: a retrain with the same config and step count writes the
    # same export.json, but new files
    files = {f.name: [f.stat().st_size, f.stat().st_mtime_ns] for f in sorted(p.iterdir())
             if f.is_file() and (f.name in WEIGHT_FILES or f.suffix in (".safetensors", ".bin"))}
    return {"model": model, "path": os.path.realpath(p), "fingerprint": {"export": export, "files": files}}


def same_start(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether two :func:`describe` records name the same start: the same real path and weights for
    a local folder, the same name otherwise."""
    if "path" in before or "path" in now:
        return before.get("path") == now.get("path") and before.get("fingerprint") == now.get("fingerprint")
    return str(before.get("model", "")).rstrip("/") == str(now.get("model", "")).rstrip("/")


def check_start(folder: str | Path, model: str, *, resuming: str | None, write: bool = True,
                ways_out: str, file: str | None = None, field: str = "model") -> None:
    """Refuse to resume ``resuming`` (a checkpoint in ``folder``, or None: a fresh start) when the
    run recorded in ``folder`` started from another model than ``model``; on a fresh start, record
    ``model`` (when ``write``: the job's first process only).

    Raises:
        InputError: the recorded start model differs (the message gives ``ways_out``), or the
            record cannot be read.
    """
    folder = Path(folder)
    record = folder / RECORD
    now = describe(model)
    if resuming:
        if not record.is_file():
            log.warning("resuming %s: its start model is not recorded (a run before %s), so it is not compared "
                        "with %s", resuming, RECORD, model)
            return
        try:
            before = json.loads(record.read_text())
        except (OSError, ValueError) as exc:
            before = exc
        if not isinstance(before, dict):
            raise InputError(f"not a start record ({before}); delete it to resume without the check",
                             file=str(record))
        if not same_start(before, now):
            what = ("the same folder with other weights" if before.get("path") and before.get("path") == now.get("path")
                    else str(model))
            raise InputError(f"{folder} holds a run started from {before.get('model')} ({resuming}); this run starts "
                             f"from {what}, and resuming would continue the old run from its checkpoint, not start "
                             f"from the new model. {ways_out}. If the start is the same model moved or re-saved, "
                             f"delete {record} to resume anyway", file=file, field=field)
        return
    if write:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(now, indent=2))
        tmp.replace(record)
