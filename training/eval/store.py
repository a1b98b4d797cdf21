"""Append-only JSONL records that survive a kill, and the run's settings check.

Every generation and every verdict is one line, appended and flushed as soon as it exists. A
process killed mid-write can leave a last line without its newline; on reopening, that torn tail
is cut off (it is the one record that was not finished) and the run redoes only that record.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from reward.errors import InputError

log = logging.getLogger(__name__)

CRASH_ENV = "RUBRICSTREE_EVAL_CRASH_AFTER"


class JsonlLog:
    """An append-only JSONL file: :meth:`load` reads (and repairs) it, :meth:`append` writes.

    Args:
        path: the file; created on the first append.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh = None

    def load(self) -> list[dict[str, Any]]:
        """Every complete record. A torn last line (no newline, a kill mid-write) is removed from
        the file; a bad line elsewhere is an error naming the file and line, because it means
        the file was edited, not interrupted."""
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        good_end = self._cut_torn_tail(len(raw), raw.rfind(b"\n") + 1)
        out: list[dict[str, Any]] = []
        for lineno, line in enumerate(raw[:good_end].decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", file=str(self.path), record=f"line {lineno}") from exc
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", file=str(self.path), record=f"line {lineno}")
            out.append(obj)
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

    def append(self, obj: dict[str, Any]) -> None:
        """Write one record and flush it to the operating system (a killed process loses
        nothing already appended; only a power cut could, and fsync per line would be slow)."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._repair_before_append()
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


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
