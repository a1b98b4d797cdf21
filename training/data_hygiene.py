"""Training-data hygiene: keep evaluation prompts out of training, HealthBench-Easy, MedMCQA rows.

Data flow:
- :func:`exclusion_hashes` reads evaluation files (HealthBench-Hard, the eval set in use:
  HealthBench JSONL with ``prompt`` messages, or MCQ JSONL with ``question``) -> the set of
  normalised-text hashes of their prompts (:func:`prompt_hash`: case-folded, whitespace
  collapsed, SHA-256); :func:`drop_overlap` removes training rows whose prompt hash is in it and
  returns the count, which the launcher logs.
- :func:`healthbench_easy`: the full HealthBench rows minus the Hard ones by ``prompt_id`` (the
  paper's "HealthBench-Easy" ablation set).
- :func:`medmcqa_row`: a MedMCQA row (``question``, ``opa``..``opd``, ``cop``) -> our MCQ row
  (``question``, ``options`` A..D, ``answer_idx``). ``cop`` is 0-based in the Hugging Face
  release (ClassLabel a..d) and 1-based in the original JSON: ``cop_base`` says which.
Pure functions over rows (dicts); no trainer imports.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from reward.errors import InputError
from reward.jsonl import iter_jsonl

__all__ = ["drop_overlap", "exclusion_hashes", "healthbench_easy", "medmcqa_row", "prompt_hash", "row_prompt_text"]

_WS = re.compile(r"\s+")


def prompt_hash(text: str) -> str:
    """SHA-256 of the text case-folded with runs of whitespace collapsed to one space."""
    return hashlib.sha256(_WS.sub(" ", text.casefold()).strip().encode("utf-8")).hexdigest()


def row_prompt_text(row: dict[str, Any]) -> str:
    """The prompt a row shows a model: its conversation's contents (HealthBench) or question (MCQ)."""
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    if isinstance(prompt, str):
        return prompt
    if "question" in row:
        return str(row["question"])
    raise InputError("a row without 'prompt' messages or a 'question'", field="prompt")


def exclusion_hashes(paths: Iterable[str | Path]) -> set[str]:
    """Prompt hashes of every row of the evaluation files ``paths``."""
    out: set[str] = set()
    for p in paths:
        for lineno, obj in iter_jsonl(p):
            try:
                out.add(prompt_hash(row_prompt_text(obj)))
            except InputError as exc:
                raise InputError(exc.reason, file=str(p), record=f"line {lineno}", field=exc.field) from exc
    return out


def drop_overlap(rows: Sequence[dict], hashes: set[str]) -> tuple[list[dict], int]:
    """``rows`` without those whose prompt hash is in ``hashes``, and how many were dropped."""
    kept = [r for r in rows if prompt_hash(row_prompt_text(r)) not in hashes]
    return kept, len(rows) - len(kept)


def healthbench_easy(full: Sequence[dict], hard: Sequence[dict]) -> list[dict]:
    """The full HealthBench rows whose ``prompt_id`` is not a Hard one."""
    hard_ids = {str(r["prompt_id"]) for r in hard}
    return [r for r in full if str(r.get("prompt_id")) not in hard_ids]


def medmcqa_row(obj: dict[str, Any], *, cop_base: int = 0) -> dict[str, Any]:
    """One MedMCQA row as our MCQ row; the options are ``opa``..``opd`` and ``cop`` the key."""
    if cop_base not in (0, 1):
        raise ValueError("cop_base must be 0 (Hugging Face release) or 1 (original JSON)")
    letters = "ABCD"
    missing = [k for k in ("question", "opa", "opb", "opc", "opd", "cop") if obj.get(k) in (None, "")]
    if missing:
        raise InputError(f"MedMCQA row lacks {', '.join(missing)}", field=missing[0])
    try:
        idx = int(obj["cop"]) - cop_base
    except (TypeError, ValueError):
        raise InputError(f"cop must be an integer, got {obj['cop']!r}", field="cop") from None
    if not 0 <= idx < 4:
        raise InputError(f"cop {obj['cop']} is outside the options for cop_base {cop_base}", field="cop")
    row = {"question": str(obj["question"]),
           "options": {letters[i]: str(obj[k]) for i, k in enumerate(("opa", "opb", "opc", "opd"))},
           "answer_idx": letters[idx]}
    if obj.get("id") is not None:
        row["id"] = str(obj["id"])
    return row
