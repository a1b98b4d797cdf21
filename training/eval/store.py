"""An evaluation run's folder: its settings check, model identity and the crash test hook.

Records themselves are append-only JSONL (:class:`reward.jsonl.JsonlLog`): every generation and
every verdict is one line, appended and flushed as soon as it exists; a torn last line left by a
kill is cut off on reopening and the run redoes only that record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from reward.errors import InputError

__all__ = ["CRASH_ENV", "CrashHook", "check_settings", "model_identity"]

CRASH_ENV = "RUBRICSTREE_EVAL_CRASH_AFTER"


class CrashHook:
    """Test hook: ``RUBRICSTREE_EVAL_CRASH_AFTER=N`` (or ``verdicts:N``, ``generations:N``, and
    a ``:kill`` suffix) stops the process after the N-th record of that kind it writes, to test
    resuming deterministically: by raising, or with ``:kill`` by a real SIGKILL (no cleanup at
    all, as an out-of-memory kill or a pre-empted node). Unset in normal use."""

    def __init__(self) -> None:
        spec = os.environ.get(CRASH_ENV, "").strip()
        self.kind: str | None = None
        self.after, self.kill, self.count, self.fired = 0, False, 0, False
        if spec:
            parts = spec.split(":")
            self.kill = parts[-1] == "kill"
            if self.kill:
                parts = parts[:-1]
            self.kind = parts[0] if len(parts) > 1 else "verdicts"
            self.after = int(parts[-1])

    def guard(self) -> None:
        """Call before writing: once crashed, nothing more is written (a dead process writes nothing)."""
        if self.fired:
            raise RuntimeError(f"{CRASH_ENV}: the run has crashed")

    def tick(self, kind: str) -> None:
        """Call after writing one record of ``kind``."""
        if self.kind == kind:
            self.count += 1
            if self.count >= self.after:
                self.fired = True
                if self.kill:
                    import signal

                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"{CRASH_ENV}: simulated crash after {self.count} {kind}")


def model_identity(name: str) -> str:
    """A local path resolved to an absolute one (``./ckpt`` and ``/runs/ckpt`` are one model);
    a hub or served name as given."""
    path = Path(name)
    return str(path.resolve()) if path.exists() else name


def check_settings(path: str | Path, settings: dict[str, Any]) -> None:
    """Write ``settings`` to ``path`` on the first run; on a resume, refuse different ones.

    Only settings that change a generation or a verdict belong here (model, data hash, system
    prompt, decoding, judge, template): mixing records made under different ones would give a
    number that belongs to no configuration. Scoring options (length adjustment, limit) may change.

    Raises:
        InputError: the folder holds a run made with other settings (names each difference).
    """
    path = Path(path)
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        diffs = [f"{k}: was {old.get(k)!r}, now {v!r}" for k, v in settings.items() if old.get(k) != v]
        diffs += [f"{k}: was {old[k]!r}, now absent" for k in old if k not in settings]
        if diffs:
            raise InputError("this output folder holds a run with other settings (use another --out, "
                             "or delete the folder to start again): " + "; ".join(diffs),
                             file=str(path))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
