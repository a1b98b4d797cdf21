"""Per-rollout score records beside a training run, for ``rubricstree inspect``.

A trainer's reward writes, per call, one JSON line per rollout to ``DIR/step-<N>.jsonl``
(``N``: the trainer's global step; one file per step, appended by every call and every rank): the
full ``RolloutScore`` (verdicts, weights, routing, rubric items) with the rollout's ``prompt``,
``completion`` (each cut to ``max_chars``), ``step`` and an id unique in the run
(``s<step>-r<rank>-<n>``). ``DIR/settings.json`` records the reward's recipe
(``RewardSettings.record``) and name, so the inspector rescores with the run's own settings;
``DIR/monitors.jsonl`` the gaming monitors' figures per step (``reward.integrations.monitors``).
A line is written whole and flushed, so a killed run loses at most the call in flight.

A run resumed from a checkpoint writes the steps after it again, into the same folder. Each row
carries its writer's ``session`` (when the writer started, sortable; the monitors' lines too), the
inspector leaves out an earlier session's rows from the step a later session started at (the
resume undid them), and a writer that finds a file ending in a line cut by the kill starts on a new
line, so the fragment stays a line of its own, which the inspector skips with a warning. Sessions
are ordered by the writers' clocks: a resumed node whose clock runs behind the first one's is read
as the earlier session.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MONITORS_FILE", "RecordWriter", "SETTINGS_FILE"]

SETTINGS_FILE = "settings.json"
MONITORS_FILE = "monitors.jsonl"


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters]"


_WRITERS = itertools.count()  # two writers of one process started in the same nanosecond differ


def _after_cut(path: Path) -> str:
    """A newline when ``path`` ends in a line without one (cut by a killed run): what this session
    appends then starts on a line of its own instead of being glued to the fragment."""
    try:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return "" if fh.read(1) == b"\n" else "\n"
    except OSError:  # no file yet, or an empty one
        return ""


class RecordWriter:
    """Writes a reward's score records into ``out_dir`` (see the module docstring)."""

    def __init__(self, out_dir: str | Path, settings: Any, *, name: str, max_chars: int | None = 4000,
                 monitors: dict[str, Any] | None = None) -> None:
        self.out_dir, self.settings, self.name, self.max_chars = Path(out_dir), settings, name, max_chars
        self.monitors = monitors  # the gaming monitors' thresholds (the inspector marks the steps above them)
        self.n = 0
        self.calls = 0
        # when this writer started, sortable, unique per process: a resumed run's rows supersede the
        # earlier session's rows of the same step and rank (training.inspector.data)
        self.session = f"{time.time_ns():020d}-{os.getpid()}-{next(_WRITERS)}"
        self._opened: set[Path] = set()

    def _rank(self) -> str:
        return os.environ.get("RANK") or os.environ.get("LOCAL_RANK") or "0"

    def write(self, results: Sequence[Any], recs: Sequence[dict[str, Any]], trainer_state: Any = None) -> Path:
        """Append one line per result (``recs``: the records scored, for the prompt and completion)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        settings_path = self.out_dir / SETTINGS_FILE
        if not settings_path.exists():
            tmp = settings_path.with_suffix(f".{self._rank()}.tmp")
            head = {"name": self.name, "reward": self.settings.record()}
            if self.monitors is not None:
                head["monitors"] = self.monitors
            tmp.write_text(json.dumps(head, indent=1), encoding="utf-8")
            tmp.replace(settings_path)
        step = getattr(trainer_state, "global_step", None)
        step = int(step) if isinstance(step, int) else self.calls
        self.calls += 1
        path = self.out_dir / f"step-{step:06d}.jsonl"
        rank = self._rank()
        lines = []
        for res, rec in zip(results, recs):
            row = res.model_dump(mode="json")
            row["id"] = f"s{step}-r{rank}-{self.n}"
            self.n += 1
            row["step"] = step
            row["session"] = self.session
            row["prompt"] = [{"role": m["role"], "content": _cut(str(m["content"]), self.max_chars)}
                             for m in rec["prompt"]]
            row["completion"] = _cut(str(rec["completion"]), self.max_chars)
            if row.get("group"):
                row["group"] = f"step{step}:{row['group']}"  # a GRPO group is one prompt at one step
            lines.append(json.dumps(row, ensure_ascii=False))
        head = "" if path in self._opened else _after_cut(path)
        self._opened.add(path)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(head + "\n".join(lines) + "\n")
            fh.flush()
        return path

    def write_monitors(self, figures: dict[str, float], trainer_state: Any = None) -> Path:
        """Append one line of the gaming monitors' figures for this step to ``monitors.jsonl``
        (``reward.integrations.monitors``; the inspector shows them across steps)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        step = getattr(trainer_state, "global_step", None)
        step = int(step) if isinstance(step, int) else max(0, self.calls - 1)
        path = self.out_dir / MONITORS_FILE
        head = "" if path in self._opened else _after_cut(path)
        self._opened.add(path)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(head + json.dumps({"step": step, "rank": self._rank(), "session": self.session, **figures}) + "\n")
            fh.flush()
        return path
