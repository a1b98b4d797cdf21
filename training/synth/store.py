"""Durable state of a synthesis run: a call cache and the append-only outputs and failures.

:class:`CallCache` maps a request key (model, settings, messages, attempt) to the text the
generator returned; only successful answers are stored, so a killed run asks nothing twice and a
failed call is asked again. :class:`RunFiles` names a run's files (``<out>``, ``<out>.failures.jsonl``,
``<out>.calls.jsonl``) and tells which item ids are finished (kept or recorded as failed).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from reward.jsonl import JsonlLog

__all__ = ["CallCache", "RunFiles", "request_key"]


def request_key(model_id: str, settings: dict[str, Any], messages: list[dict[str, Any]], attempt: int) -> str:
    """A stable hash of everything that decides a generated text."""
    blob = json.dumps([model_id, settings, messages, attempt], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class CallCache:
    """Append-only ``{"key", "text"}`` records; loaded once, appended as answers arrive."""

    def __init__(self, path: str | Path) -> None:
        self.log = JsonlLog(path)
        self._texts: dict[str, str] = {r["key"]: r["text"] for r in self.log.load()
                                       if isinstance(r.get("key"), str) and isinstance(r.get("text"), str)}

    def get(self, key: str) -> str | None:
        return self._texts.get(key)

    def put(self, key: str, text: str) -> None:
        if key not in self._texts:
            self._texts[key] = text
            self.log.append({"key": key, "text": text})

    def __len__(self) -> int:
        return len(self._texts)

    def close(self) -> None:
        self.log.close()


class RunFiles:
    """The output file, its failures file and its call cache; which ids are finished."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.failures_path = self.out.with_name(self.out.name + ".failures.jsonl")
        self.calls_path = self.out.with_name(self.out.name + ".calls.jsonl")
        self.outputs = JsonlLog(self.out)
        self.failures = JsonlLog(self.failures_path)
        self._seen: set[tuple[str, Any, Any]] | None = None  # failures recorded (loaded on first use)

    def finished_ids(self, id_field: str = "id") -> set[str]:
        """Ids kept in the output, plus ids whose failure record is ``final``."""
        done = {str(r.get(id_field)) for r in self.outputs.load()}
        done |= {str(r["id"]) for r in self.failures.load() if r.get("final")}
        return done

    def record_failure(self, record: dict[str, Any]) -> None:
        """Append a failure unless the same (id, stage, axis) is already recorded (a rerun after a
        kill replays cached answers and would otherwise record the same failure twice)."""
        if self._seen is None:
            self._seen = {(str(r.get("id")), r.get("stage"), r.get("axis")) for r in self.failures.load()}
        key = (str(record.get("id")), record.get("stage"), record.get("axis"))
        if key not in self._seen:
            self._seen.add(key)
            self.failures.append(record)

    def close(self) -> None:
        self.outputs.close()
        self.failures.close()


def save_dataset(rows_path: str | Path, out_dir: str | Path) -> int:
    """Save the HealthBench-format rows as an HF ``datasets`` dataset (``save_to_disk``): the row
    fields, with ``synth`` metadata as a JSON string (its shape varies by row). Returns rows saved."""
    from datasets import Dataset

    rows = []
    for r in JsonlLog(rows_path).load():
        rows.append({"prompt_id": r["prompt_id"], "prompt": r["prompt"],
                     "rubrics": [{"criterion": i["criterion"], "points": float(i["points"]), "tags": i["tags"]}
                                 for i in r["rubrics"]],
                     "example_tags": r["example_tags"], "synth": json.dumps(r.get("synth"))})
    Dataset.from_list(rows).save_to_disk(str(out_dir))
    return len(rows)
