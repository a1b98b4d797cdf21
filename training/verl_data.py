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
import sys
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
    if out.is_dir():
        raise InputError("is a folder: give the .parquet file to write", file=str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), out)
    return out


CLINICAL_SOURCES = ("clinical_rubric", "healthbench")


def _has_field(schema, column: str, field: str) -> bool:
    import pyarrow as pa

    if column not in schema.names:
        return False
    kind = schema.field(column).type
    if pa.types.is_map(kind):  # keys are per row: trust it
        return True
    return pa.types.is_struct(kind) and kind.get_field_index(field) >= 0


def check_parquet_columns(path: str | Path, *, rubric_source: str = "both", prompt_key: str = "prompt",
                          source_key: str = "data_source") -> None:
    """Refuse a verl parquet without a column the reward needs, before verl starts: the prompt and
    data-source columns, and for clinical rows (``clinical_rubric``/``healthbench``) under a
    ``rubric_source`` that grades the row's items the items themselves,
    ``reward_model.ground_truth`` (or ``extra_info.rubrics``). Without them the stage-3 reward would
    be the tree score alone (``both``) or fail on every rollout (``rows``).

    Raises:
        InputError: naming the file, the column and the columns it has (a near miss like
            ``rubric`` is pointed out).
    """
    import difflib

    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    names = list(schema.names)
    have = f"its columns: {', '.join(names) or 'none'}"
    for key in (source_key, prompt_key):
        if key not in names:
            raise InputError(f"no '{key}' column, which verl reads ({have})", file=str(path), field=key)
    if rubric_source == "tree":
        return
    sources = set(pq.read_table(path, columns=[source_key]).column(0).to_pylist())
    if not sources & set(CLINICAL_SOURCES):
        return
    if _has_field(schema, "reward_model", "ground_truth") or _has_field(schema, "extra_info", "rubrics"):
        return
    near = difflib.get_close_matches("rubrics", names, n=1, cutoff=0.6)
    hint = f" ('{near[0]}' is not read)" if near else ""
    raise InputError(f"the clinical rows carry no rubric items: no 'reward_model.ground_truth' column (nor "
                     f"'extra_info.rubrics'){hint}, and rubric_source '{rubric_source}' grades them ({have}). "
                     "`python -m training.verl_data healthbench ROWS.jsonl OUT.parquet` writes them; "
                     "rubric_source: tree grades the tree's leaves alone", file=str(path),
                     field="reward_model.ground_truth")


def build_verl_parquet(kind: Kind, source: str | Path | Iterable, out: str | Path, **kw: Any) -> Path:
    """:func:`verl_rows` then :func:`write_parquet`; returns the written path."""
    return write_parquet(verl_rows(kind, source, **kw), out)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input (a missing file, a bad row, an unknown data source or system
    prompt, an output that cannot be written) prints one ``error:`` line naming the file, record
    and field and exits 2 (``--debug``: the traceback)."""
    ap = argparse.ArgumentParser(prog="python -m training.verl_data",
                                 description="Convert MCQ or HealthBench-format JSONL to verl's RL parquet.")
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("source", help="input JSONL")
    ap.add_argument("out", help="output .parquet")
    ap.add_argument("--data-source", default=None, help="reward data source (default: by kind)")
    ap.add_argument("--system-prompt", default=None, help="ours, none or a text file (default: by kind)")
    ap.add_argument("--split", default="train")
    def positive(text: str) -> int:
        n = int(text)
        if n < 1:
            raise argparse.ArgumentTypeError(f"must be 1 or more, got {n} (leave it out for every row)")
        return n

    ap.add_argument("--limit", type=positive, default=None, help="keep the first N rows")
    ap.add_argument("--debug", action="store_true", help="a traceback instead of one error line")
    a = ap.parse_args(argv)
    try:
        path = build_verl_parquet(a.kind, a.source, a.out, data_source=a.data_source, system_prompt=a.system_prompt,
                                  split=a.split, limit=a.limit)
    except (InputError, OSError, ValueError) as exc:
        if a.debug:
            raise
        print(f"error: {_one_line(exc, a)}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _one_line(exc: BaseException, a: argparse.Namespace) -> str:
    """The error as one line naming what it is about: the option for a bad data source or system
    prompt, the path for an OS error."""
    if isinstance(exc, InputError) and exc.field == "data_source" and not exc.file:
        return f"--data-source: {exc.reason}"
    if isinstance(exc, FileNotFoundError) and "system prompt" in str(exc):
        return f"--system-prompt: {exc}"
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.filename}: {exc.strerror or exc}"
    return " ".join(str(exc).split())


if __name__ == "__main__":
    raise SystemExit(main())
