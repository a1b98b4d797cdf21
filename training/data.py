"""Training data builders: MCQ rows and HealthBench-format rows -> conversational TRL datasets.

MCQ (MedQA / MedBullets format: ``question``, ``options`` letter -> text, ``answer_idx``) becomes

    prompt:       [{"role": "user", "content": question + lettered options + answer instruction}]
    answer:       the key letter (what ``MCQRuleReward`` / ``ErrorRubricReward`` read)
    answer_text:  the key's text
    options:      {"A": ..., ..., "E": ...}  (None for letters a row does not have)
    judge_prompt: the prompt without our system prompt (what a judge is shown)
    row_id:       a stable id (the row's ``id`` when present, else ``mcq-<line>``)

HealthBench format (``prompt_id``, ``prompt`` messages, ``rubrics``) becomes ``prompt`` (with the
optional system prompt), ``judge_prompt``, ``rubrics`` (criterion, points, tags) and ``prompt_id``.

The system prompt (``training.system_prompt``: ``"ours"``, ``"none"``, ``"handbook:FILE"`` or a file) is applied to
``prompt`` only; ``judge_prompt`` keeps the conversation as the row gave it, so the judge grades
the answer to the user, not to our instructions. Heavy packages (``datasets``) load lazily.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from reward.stages.mcq import DEFAULT_LETTERS, MCQRow, load_mcq
from training.system_prompt import apply_system_prompt

ANSWER_INSTRUCTION = ("Think the question through, then end your reply with a final line of the form "
                      "\"Answer: X\", where X is the letter of the single best option.")


def mcq_user_text(row: MCQRow, instruction: str = ANSWER_INSTRUCTION) -> str:
    """The user turn of one MCQ: the question, its lettered options, the answer-format instruction."""
    opts = "\n".join(f"{k}. {v}" for k, v in sorted(row.options.items()))
    return f"{row.question.strip()}\n\n{opts}\n\n{instruction}"


def mcq_record(row: MCQRow, *, row_id: str, system_prompt: str = "none",
               instruction: str = ANSWER_INSTRUCTION) -> dict[str, Any]:
    """One dataset record for an MCQ row (see the module docstring)."""
    user = [{"role": "user", "content": mcq_user_text(row, instruction)}]
    return {
        "prompt": apply_system_prompt(user, system_prompt),
        "judge_prompt": user,
        "answer": row.answer_idx,
        "answer_text": row.options[row.answer_idx],
        # every letter present, so rows with 4 and 5 options share one Arrow schema
        "options": {k: row.options.get(k) for k in DEFAULT_LETTERS},
        "row_id": row_id,
    }


def _mcq_rows(source: str | Path | Sequence[MCQRow | dict]) -> list[tuple[str, MCQRow]]:
    if isinstance(source, (str, Path)):
        from reward.jsonl import iter_jsonl

        rows = load_mcq(source)
        ids = [str(obj.get("id", f"mcq-{lineno}")) for lineno, obj in iter_jsonl(source)]
        return list(zip(ids, rows))
    out = []
    for i, r in enumerate(source):
        row = r if isinstance(r, MCQRow) else MCQRow.model_validate(r)
        rid = r.get("id") if isinstance(r, dict) else None
        out.append((str(rid if rid is not None else f"mcq-{i + 1}"), row))
    return out


def build_mcq_dataset(source: str | Path | Sequence[MCQRow | dict], *, system_prompt: str = "none",
                      limit: int | None = None, instruction: str = ANSWER_INSTRUCTION):
    """MCQ rows (a JSONL path or rows) -> a ``datasets.Dataset`` of conversational prompts.

    Args:
        source: MedQA/MedBullets JSONL (``question``, ``options``, ``answer_idx``) or rows.
        system_prompt: ``"ours"``, ``"none"`` (default for MCQ stages) or a text file.
        limit: keep the first ``limit`` rows.
    """
    from datasets import Dataset

    pairs = _mcq_rows(source)[:limit] if limit else _mcq_rows(source)
    return Dataset.from_list([mcq_record(r, row_id=rid, system_prompt=system_prompt, instruction=instruction)
                              for rid, r in pairs])


def healthbench_record(row, *, system_prompt: str = "ours") -> dict[str, Any]:
    """One dataset record for a :class:`reward.healthbench.HealthBenchRow`."""
    conv = [m.model_dump() for m in row.prompt]
    return {
        "prompt": apply_system_prompt(conv, system_prompt),
        "judge_prompt": conv,
        "rubrics": [{"criterion": r.criterion, "points": float(r.points), "tags": list(r.tags)} for r in row.rubrics],
        "prompt_id": row.prompt_id,
    }


def build_healthbench_dataset(source: str | Path | Iterable, *, system_prompt: str = "ours",
                              limit: int | None = None):
    """HealthBench-format rows (a JSONL path or rows) -> a ``datasets.Dataset``.

    Args:
        source: HealthBench / HealthBench Professional JSONL, or ``HealthBenchRow`` objects / dicts.
        system_prompt: ``"ours"`` (default, the paper's stage 3 setting), ``"none"`` or a file.
        limit: keep the first ``limit`` rows.
    """
    from datasets import Dataset

    from reward.healthbench.schema import HealthBenchRow, load_healthbench, parse_row

    if isinstance(source, (str, Path)):
        rows = load_healthbench(source)
    else:
        rows = [r if isinstance(r, HealthBenchRow) else parse_row(r, record=f"#{i}") for i, r in enumerate(source)]
    rows = rows[:limit] if limit else rows
    return Dataset.from_list([healthbench_record(r, system_prompt=system_prompt) for r in rows])


def build_dataset(kind: str, paths: str | Path | Sequence[str | Path], *, system_prompt: str | None = None,
                  limit: int | None = None):
    """Build and concatenate datasets of one ``kind`` (``"mcq"`` or ``"healthbench"``) from paths.

    ``system_prompt`` None picks the stage default: ``"none"`` for MCQ, ``"ours"`` for HealthBench.
    """
    from datasets import concatenate_datasets

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if kind == "mcq":
        parts = [build_mcq_dataset(p, system_prompt=system_prompt or "none") for p in paths]
    elif kind == "healthbench":
        parts = [build_healthbench_dataset(p, system_prompt=system_prompt or "ours") for p in paths]
    else:
        raise ValueError(f"unknown data kind {kind!r}: use 'mcq' or 'healthbench'")
    ds = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
    return ds.select(range(min(limit, len(ds)))) if limit else ds
