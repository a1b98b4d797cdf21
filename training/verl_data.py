"""verl training data: MCQ rows and HealthBench-format rows -> verl's RL parquet layout.

verl's ``RLHFDataset`` reads a parquet file with, per row::

    data_source   which reward scores it (reward.integrations.verl: mcq/medqa/medbullets, error_rubric,
                  clinical_rubric/healthbench)
    prompt        the chat messages the policy answers (our system prompt applied, as in TRL)
    ability       a free label
    reward_model  {"style": "rule"|"model", "ground_truth": ...}
    extra_info    {"index", "split", ...}: verl hands it to compute_score unchanged

What goes where:

* MCQ (stage 1, ``kind="mcq"``) and error rubric (stage 2, ``kind="error_rubric"``):
  ``ground_truth`` is the key letter; ``extra_info`` holds ``options`` (JSON letter -> text, so
  rows with 4 and 5 options share one schema), ``judge_prompt`` (the question without our system
  prompt: what the stage 2 judge reads), ``row_id`` and ``answer_text``.
* HealthBench format (stage 3, ``kind="healthbench"``): ``ground_truth`` is the row's rubric items
  as JSON (``[{criterion, points, tags}]``); ``extra_info`` holds ``judge_prompt`` (the
  conversation as the row gave it), ``prompt_id`` and ``example_tags``.

Prompts come from ``training.data`` (``mcq_record``, ``healthbench_record``), so TRL and verl
train on the same text. Command line::

    python -m training.verl_data mcq data/medqa_train.jsonl data/verl/stage1_train.parquet --data-source medqa
    python -m training.verl_data error_rubric data/hard.jsonl data/verl/stage2_train.parquet
    python -m training.verl_data healthbench data/vaidya_rubrics.jsonl data/verl/stage3_train.parquet \\
        --data-source clinical_rubric
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from reward.errors import InputError
from training.data import _mcq_rows, healthbench_record, mcq_record

Kind = Literal["mcq", "error_rubric", "healthbench"]
KINDS: tuple[str, ...] = ("mcq", "error_rubric", "healthbench")
# The data source each kind gets unless told otherwise; each must be registered in reward.integrations.verl.
DEFAULT_DATA_SOURCE = {"mcq": "medqa", "error_rubric": "error_rubric", "healthbench": "clinical_rubric"}
DEFAULT_SYSTEM_PROMPT = {"mcq": "none", "error_rubric": "none", "healthbench": "ours"}


def mcq_verl_row(row, *, row_id: str, index: int, data_source: str = "medqa", split: str = "train",
                 system_prompt: str = "none", style: str = "rule") -> dict[str, Any]:
    """One verl row for an MCQ (``reward.stages.mcq.MCQRow``); see the module docstring."""
    rec = mcq_record(row, row_id=row_id, system_prompt=system_prompt)
    return {
        "data_source": data_source,
        "prompt": rec["prompt"],
        "ability": "medical_mcq",
        "reward_model": {"style": style, "ground_truth": row.answer_idx},
        "extra_info": {
            "index": index,
            "split": split,
            "row_id": row_id,
            "options": json.dumps(dict(row.options), ensure_ascii=False, sort_keys=True),
            "answer_text": row.options[row.answer_idx],
            "judge_prompt": rec["judge_prompt"],
        },
    }


def healthbench_verl_row(row, *, index: int, data_source: str = "clinical_rubric", split: str = "train",
                         system_prompt: str = "ours") -> dict[str, Any]:
    """One verl row for a HealthBench-format row (``reward.healthbench.HealthBenchRow``)."""
    rec = healthbench_record(row, system_prompt=system_prompt)
    return {
        "data_source": data_source,
        "prompt": rec["prompt"],
        "ability": "clinical_conversation",
        "reward_model": {"style": "model", "ground_truth": json.dumps(rec["rubrics"], ensure_ascii=False)},
        "extra_info": {
            "index": index,
            "split": split,
            "prompt_id": rec["prompt_id"],
            "judge_prompt": rec["judge_prompt"],
            "example_tags": list(getattr(row, "example_tags", []) or []),
        },
    }


def _check_source(data_source: str) -> None:
    from reward.integrations.verl.sources import DATA_SOURCES

    if data_source not in DATA_SOURCES:
        raise InputError(f"data source {data_source!r} has no scorer in reward.integrations.verl; known: "
                         f"{', '.join(sorted(DATA_SOURCES))}", field="data_source")


def verl_rows(kind: Kind, source: str | Path | Iterable, *, data_source: str | None = None,
              system_prompt: str | None = None, split: str = "train", limit: int | None = None) -> list[dict]:
    """Rows of ``kind`` (a JSONL path or rows/dicts) as verl rows.

    Args:
        kind: ``mcq`` (stage 1), ``error_rubric`` (stage 2, MCQ rows judged for errors) or
            ``healthbench`` (stage 3: HealthBench / HealthBench Professional / Vaidya-Rubrics rows).
        data_source: the reward's data source; default ``medqa``, ``error_rubric``, ``clinical_rubric``.
        system_prompt: ``ours``, ``none`` or a file; default ``none`` for MCQ kinds, ``ours`` for
            HealthBench (the paper's stage 3 setting).
        split: written to ``extra_info.split``.
        limit: keep the first ``limit`` rows.

    Raises:
        InputError: an invalid row (the error names the file, line and field) or an unknown kind
            or data source.
    """
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}", field="kind")
    data_source = data_source or DEFAULT_DATA_SOURCE[kind]
    _check_source(data_source)
    system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT[kind]
    if kind in ("mcq", "error_rubric"):
        pairs = _mcq_rows(source if isinstance(source, (str, Path)) else list(source))
        pairs = pairs[:limit] if limit else pairs
        style = "rule" if kind == "mcq" else "model"
        return [mcq_verl_row(row, row_id=rid, index=i, data_source=data_source, split=split,
                             system_prompt=system_prompt, style=style) for i, (rid, row) in enumerate(pairs)]
    from reward.healthbench.schema import HealthBenchRow, load_healthbench, parse_row

    if isinstance(source, (str, Path)):
        rows = load_healthbench(source)
    else:
        rows = [r if isinstance(r, HealthBenchRow) else parse_row(r, record=f"#{i}") for i, r in enumerate(source)]
    rows = rows[:limit] if limit else rows
    return [healthbench_verl_row(r, index=i, data_source=data_source, split=split, system_prompt=system_prompt)
            for i, r in enumerate(rows)]


def write_parquet(rows: Sequence[dict], out: str | Path) -> Path:
    """Write verl rows to ``out`` (parent folders created)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise InputError("no rows to write", file=str(out))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), out)
    return out


def build_verl_parquet(kind: Kind, source: str | Path | Iterable, out: str | Path, **kw: Any) -> Path:
    """:func:`verl_rows` then :func:`write_parquet`; returns the written path."""
    return write_parquet(verl_rows(kind, source, **kw), out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.verl_data",
                                 description="Convert MCQ or HealthBench-format JSONL to verl's RL parquet.")
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("source", help="input JSONL")
    ap.add_argument("out", help="output .parquet")
    ap.add_argument("--data-source", default=None, help="reward data source (default: by kind)")
    ap.add_argument("--system-prompt", default=None, help="ours, none or a text file (default: by kind)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args(argv)
    path = build_verl_parquet(a.kind, a.source, a.out, data_source=a.data_source, system_prompt=a.system_prompt,
                              split=a.split, limit=a.limit)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
