"""HealthBench grader meta-evaluation: our judge against physicians' Boolean labels on rubric items.

Input: the official meta-eval file (``2025-05-07-06-14-12_oss_meta_eval.jsonl`` beside the other
HealthBench files), one row per (conversation, completion, rubric item)::

    {"prompt": [{role, content}], "completion": str, "rubric": str, "category": str,
     "binary_labels": [bool, ...], "anonymized_physician_ids": [str, ...], "prompt_id"?, "completion_id"?}

Data flow: rows -> one judge item each (per mode: choice and/or explain) -> verdicts (durable
cache; each arrives in OUT/hb_grader.jsonl per chunk) -> metrics:

- the official method's score: *pairwise* agreement. Every (grader label, one physician's label)
  pair on a row is one observation; precision of "pos" is the share of the grader's positive
  pairs that agree, recall of "pos" the share of the physicians' positive pairs that agree, F1 of
  each class from those, and the balanced F1 is their mean (``pairwise_model_f1_balanced``);
- the same for each physician against the other physicians of the rows they labelled, and the
  n-weighted mean over physicians: the physician baseline (the unweighted mean is kept under its
  own name), overall, per category and per theme (``reward.metaeval.hb_aggregate``);
- beside it, plain macro F1 against the physicians' majority (rows with a tie are left out and
  counted), which is what a reader usually means by "agreement with the majority".

All of it overall and per ``category``. The file's SHA-256 is checked against ``--sha256`` when
given; the official hash is not pinned here (we have not verified it), so the report prints the
hash it saw.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reward.errors import InputError
from reward.healthbench.schema import Message
from reward.jsonl import iter_jsonl, validation_error
from reward.metaeval import agreement as ag
from reward.metaeval.resultlog import append_rows, read_rows

META_EVAL_FILE = "2025-05-07-06-14-12_oss_meta_eval.jsonl"
META_EVAL_URL = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench/" + META_EVAL_FILE
META_EVAL_SHA256: str | None = None  # not verified by us: pass --sha256 to pin it


class MetaRow(BaseModel):
    """One physician-labelled (conversation, completion, rubric item)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt: list[Message] = Field(min_length=1)
    completion: str
    rubric: str = Field(min_length=1)
    category: str = "all"
    binary_labels: list[bool] = Field(min_length=1)
    anonymized_physician_ids: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _aligned(self) -> MetaRow:
        if len(self.binary_labels) != len(self.anonymized_physician_ids):
            raise ValueError(f"{len(self.binary_labels)} labels but {len(self.anonymized_physician_ids)} physician ids")
        return self

    @property
    def majority(self) -> bool | None:
        pos = sum(self.binary_labels)
        neg = len(self.binary_labels) - pos
        return None if pos == neg else pos > neg


def resolve(source: str, *, sha256: str | None = None, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A local path, an http(s) URL or ``official``; returns (path, its SHA-256).

    Raises:
        InputError: missing file, failed download, or a hash that is not ``sha256``.
    """
    from reward.healthbench.variants import sha256_file

    if source == "official" or source.startswith(("http://", "https://")):
        url = META_EVAL_URL if source == "official" else source
        from reward.paths import default_cache_dir, download

        dest = (cache_dir or default_cache_dir()) / "healthbench" / url.rsplit("/", 1)[-1]
        if not dest.exists():
            want = sha256 or (META_EVAL_SHA256 if dest.name == META_EVAL_FILE else None)
            download(url, dest, sha256=want)
        path = dest
    else:
        path = Path(source)
        if not path.is_file():
            raise InputError("meta-eval file not found", file=source)
    digest = sha256_file(path)
    want = sha256 or (META_EVAL_SHA256 if path.name == META_EVAL_FILE else None)
    if want and digest != want.lower():
        raise InputError(f"SHA-256 {digest} is not the expected {want}: the file is modified or truncated",
                         file=str(path))
    return path, digest


def load_rows(path: Path) -> list[MetaRow]:
    out = []
    for lineno, obj in iter_jsonl(path):
        try:
            out.append(MetaRow.model_validate(obj))
        except ValidationError as exc:
            raise validation_error(exc, file=str(path), record=f"line {lineno}") from exc
    if not out:
        raise InputError("no rows", file=str(path))
    return out


# ---------------------------------------------------------------------- official pairwise metric
def pairwise_f1(selves: Sequence[bool], others: Sequence[Sequence[bool]]) -> dict[str, Any]:
    """Balanced F1 of a rater against other raters' labels, each (self, other) pair one
    observation; a class F1 is None when its precision or recall has no observation."""
    tp = {True: 0, False: 0}
    pred = {True: 0, False: 0}
    truth = {True: 0, False: 0}
    n = 0
    for s, os_ in zip(selves, others, strict=True):
        for o in os_:
            n += 1
            pred[s] += 1
            truth[o] += 1
            tp[s] += s == o
    f1: dict[bool, float | None] = {}
    for c in (True, False):
        if not pred[c] or not truth[c]:
            f1[c] = None
            continue
        p, r = tp[c] / pred[c], tp[c] / truth[c]
        f1[c] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    bal = None if f1[True] is None or f1[False] is None else (f1[True] + f1[False]) / 2
    return {"n_pairs": n, "f1_pos": f1[True], "f1_neg": f1[False], "f1_balanced": bal}


def physician_ceiling(rows: Sequence[MetaRow]) -> dict[str, Any]:
    """The physician baseline the reference way (n-weighted over physicians), with the
    unweighted mean under its own name (``reward.metaeval.hb_aggregate``)."""
    from reward.metaeval.hb_aggregate import physician_baseline

    return physician_baseline(rows)


def grader_metrics(rows: Sequence[MetaRow], verdicts: Sequence[bool | None]) -> dict[str, Any]:
    """The grader's official pairwise balanced F1 and majority macro F1 over the rows it graded."""
    graded = [(r, v) for r, v in zip(rows, verdicts) if v is not None]
    pw = pairwise_f1([v for _, v in graded], [r.binary_labels for r, _ in graded])
    maj = [(v, r.majority) for r, v in graded if r.majority is not None]
    return {"n": len(graded), "failed": len(rows) - len(graded), "pairwise_f1_balanced": pw["f1_balanced"],
            "majority_macro_f1": ag.macro_f1([a for a, _ in maj], [b for _, b in maj]) if maj else None,
            "majority_n": len(maj), "majority_ties": sum(r.majority is None for r, _ in graded)}


# ---------------------------------------------------------------------- runner
async def grade_rows(rows: Sequence[MetaRow], judges: dict[str, Any], out: Path, *, chunk: int = 64,
                     progress: bool = True) -> dict[str, list[bool | None]]:
    """Grade every row with every judge (mode -> Judge); results append to ``out`` per chunk and
    rows already there are not graded again."""
    from reward.judge.types import JudgeItem
    from reward.progress import bar as progress_bar

    done = {(r["mode"], int(r["row"])): r["met"] for r in read_rows(out) if r.get("met") is not None}
    from reward.router.base import as_conversation

    items = [JudgeItem(conversation=as_conversation(r.prompt), response=r.completion, criterion=r.rubric)
             for r in rows]
    total = sum(1 for m in judges for i in range(len(rows)) if (m, i) not in done)
    bar = progress_bar(total, unit="item", desc="grader meta-eval", enabled=progress and bool(total))
    try:
        for mode, judge in judges.items():
            todo = [i for i in range(len(rows)) if (mode, i) not in done]
            for s in range(0, len(todo), chunk):
                part = todo[s:s + chunk]
                verdicts = await judge.grade([items[i] for i in part], _without_points(judge.template))
                append_rows(out, [{"mode": mode, "row": i, "met": v.met, "p_yes": v.p_yes, "failure": v.failure}
                                  for i, v in zip(part, verdicts)])
                done.update({(mode, i): v.met for i, v in zip(part, verdicts) if v.ok})
                bar.update(len(part))
    finally:
        bar.close()
    return {m: [done.get((m, i)) for i in range(len(rows))] for m in judges}


def summarise(rows: Sequence[MetaRow], verdicts: dict[str, list[bool | None]]) -> dict[str, Any]:
    from reward.metaeval.hb_aggregate import theme_table

    cats = ["all"] + sorted({r.category for r in rows} - {"all"})
    out: dict[str, Any] = {"modes": list(verdicts), "categories": {}}
    for c in cats:
        idx = [i for i, r in enumerate(rows) if c == "all" or r.category == c]
        sub = [rows[i] for i in idx]
        per_mode = {m: grader_metrics(sub, [v[i] for i in idx]) for m, v in verdicts.items()}
        out["categories"][c] = {"n": len(sub), **physician_ceiling(sub),
                                "modes": {m: per_mode[m]["pairwise_f1_balanced"] for m in per_mode},
                                "majority": {m: per_mode[m]["majority_macro_f1"] for m in per_mode},
                                "detail": per_mode}
    out["themes"] = theme_table(rows, verdicts)
    return out


def _without_points(template):
    """Meta-eval rows carry no points: a template that shows ``({{points}} points)`` would
    render "Criterion ( points)"; the slot is dropped from the text instead."""
    import dataclasses
    import re

    if "{{points}}" not in template.user:
        return template
    user = re.sub(r" ?\(\{\{points\}\} points?\)", "", template.user).replace("{{points}}", "")
    return dataclasses.replace(template, name=template.name + "-nopoints", user=user)


def run_hb_grader(rows: Sequence[MetaRow], judges: dict[str, Any], out_dir: Path, *, meta: dict[str, Any],
                  progress: bool = True) -> dict[str, Any]:
    from reward.metaeval.report import write_healthbench_report

    out_dir.mkdir(parents=True, exist_ok=True)

    async def go():
        try:
            return await grade_rows(rows, judges, out_dir / "hb_grader.jsonl", progress=progress)
        finally:
            for j in judges.values():
                await j.aclose()

    summary = summarise(rows, asyncio.run(go()))
    summary["meta"] = meta
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    write_healthbench_report(out_dir, summary)
    return summary
