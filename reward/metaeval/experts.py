"""Agreement with experts: score expert-labelled pairs with the rubric reward (and the holistic
principle baseline) and compare each with the panel, overall and per scenario.

Data flow::

    pairs.jsonl + labels.jsonl (formats.py)
      -> chunks of pairs -> RubricReward.score / principle_scores      (judge, durable cache)
      -> OUT/results.jsonl, one line per (method, pair), appended as each chunk finishes
      -> compare(): ICC3 (F interval + seeded bootstrap), kappa on binned scores (+ bootstrap),
         per-leaf / per-rubric-item macro F1 and kappa where the experts labelled them
      -> OUT/summary.json (+ report.md/html/PNGs, report.py)

Resume: a rerun reads ``results.jsonl`` and grades only (method, pair) rows that are missing or
unscored there; the verdict cache answers whatever a killed chunk had already graded.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reward.metaeval import agreement as ag
from reward.metaeval.formats import ExpertLabel, Pair
from reward.metaeval.resultlog import append_rows, read_rows

OURS, BASELINE = "rubricstree", "principle"


def read_results(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The last row per (method, id) of the append-only results file."""
    return {(row["method"], str(row["id"])): row for row in read_rows(path) if "method" in row and "id" in row}


async def score_pairs(pairs: Sequence[Pair], *, reward, judge, out_dir: Path, baseline: bool,
                      chunk: int = 8, progress: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
    """Grade what ``OUT/results.jsonl`` lacks, chunk by chunk, appending as each chunk ends."""
    from reward.metaeval.baseline import principle_scores
    from reward.progress import bar as progress_bar
    from reward.stages.rubric_reward import parse_rollouts

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.jsonl"
    done = read_results(path)
    methods = [OURS] + ([BASELINE] if baseline else [])
    todo = {m: [p for p in pairs if done.get((m, p.id), {}).get("score") is None] for m in methods}
    total = sum(len(v) for v in todo.values())
    bar = progress_bar(total, unit="pair", desc="meta-eval", enabled=progress and bool(total))
    try:
        for method, rows in todo.items():
            for start in range(0, len(rows), chunk):
                part = rows[start:start + chunk]
                rollouts = parse_rollouts([p.rollout() for p in part])
                if method == OURS:
                    scores = await reward.score(rollouts)
                    new = [{"method": OURS, "id": s.id, "score": s.score, "failure": "; ".join(s.failures) or None,
                            "leaves": {lr.leaf_id: lr.met for lr in s.leaves},
                            "rubric_items": [it.met for it in s.rubric_items]} for s in scores]
                else:
                    res = await principle_scores(judge, rollouts)
                    new = [{"method": BASELINE, "id": p.id, "score": sc, "failure": why}
                           for p, (sc, why) in zip(part, res)]
                append_rows(path, new)
                for r in new:
                    done[(r["method"], r["id"])] = r
                bar.update(len(part))
    finally:
        bar.close()
    return done


# ---------------------------------------------------------------------- comparison
def _agreement(model: list[float], expert: list[float], *, bins: int, resamples: int, seed: int) -> dict[str, Any]:
    x = np.column_stack([model, expert]) if model else np.zeros((0, 2))
    n = len(model)
    out: dict[str, Any] = {"n": n}
    if n < 2:
        out.update(icc3=None, icc3_ci95=None, icc3_boot95=None, kappa=None, kappa_boot95=None,
                   note="fewer than 2 scored pairs")
        return out
    icc = ag.icc3(x)
    kap = ag.kappa_binned(model, expert, bins=bins)
    out["icc3"] = _num(icc.icc3)
    out["icc3_ci95"] = [_num(v) for v in icc.ci95]
    out["icc3_boot95"] = [_num(v) for v in ag.bootstrap_ci(lambda idx: ag.icc3(x[idx]).icc3, n,
                                                              resamples=resamples, seed=seed)]
    out["kappa"] = {k: _num(v) for k, v in kap.as_dict().items()}
    m, e = np.asarray(model), np.asarray(expert)
    out["kappa_boot95"] = {
        w: [_num(v) for v in ag.bootstrap_ci(lambda idx, w=w: getattr(ag.kappa_binned(m[idx], e[idx], bins=bins), w),
                                              n, resamples=resamples, seed=seed)]
        for w in ag.KAPPA_WEIGHTS}
    notes = [r for r in [icc.reason, *kap.reasons.values()] if r]
    if len(set(model)) == 1:
        notes.insert(0, "the method gave every pair the same score")
    if notes:
        out["note"] = "; ".join(dict.fromkeys(notes))
    return out


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _boolean_agreement(pred: list[bool], truth: list[bool]) -> dict[str, Any]:
    if not pred:
        return {"n": 0}
    k = ag.kappa_bool(pred, truth)
    return {"n": len(pred), "macro_f1": _num(ag.macro_f1(pred, truth)), "kappa": _num(k.unweighted),
            "accuracy": sum(p == t for p, t in zip(pred, truth)) / len(pred)}


def compare(pairs: Sequence[Pair], labels: dict[str, ExpertLabel], results: dict[tuple[str, str], dict[str, Any]],
            *, methods: Sequence[str], bins: int = 5, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The comparison table: per method and scenario (``all`` first) the agreement with experts,
    plus Boolean agreement on labelled leaves and rubric items for our reward."""
    scenarios = ["all"] + sorted({p.scenario for p in pairs} - {"all"})
    table: dict[str, dict[str, Any]] = {}
    points: dict[str, list[tuple[str, str, float, float]]] = {}
    for method in methods:
        table[method] = {}
        scored = [(p, results[(method, p.id)]["score"]) for p in pairs
                  if results.get((method, p.id), {}).get("score") is not None]
        points[method] = [(p.id, p.scenario, s, labels[p.id].score) for p, s in scored]
        for sc in scenarios:
            sel = [(s, labels[p.id].score) for p, s in scored if sc == "all" or p.scenario == sc]
            n_pairs = sum(1 for p in pairs if sc == "all" or p.scenario == sc)
            row = _agreement([a for a, _ in sel], [b for _, b in sel], bins=bins, resamples=resamples, seed=seed)
            row["unscored"] = n_pairs - len(sel)
            table[method][sc] = row
    leaf_pred, leaf_true, item_pred, item_true = [], [], [], []
    for p in pairs:
        r, lab = results.get((OURS, p.id)), labels[p.id]
        if r is None:
            continue
        for leaf, met in (r.get("leaves") or {}).items():
            if met is not None and lab.leaves and leaf in lab.leaves:
                leaf_pred.append(bool(met))
                leaf_true.append(lab.leaves[leaf])
        if lab.rubric_items is not None:
            for met, truth in zip(r.get("rubric_items") or [], lab.rubric_items):
                if met is not None:
                    item_pred.append(bool(met))
                    item_true.append(truth)
    return {"bins": bins, "resamples": resamples, "seed": seed, "scenarios": scenarios, "table": table,
            "leaf_agreement": _boolean_agreement(leaf_pred, leaf_true),
            "rubric_item_agreement": _boolean_agreement(item_pred, item_true),
            "points": points}


def run_experts(pairs: Sequence[Pair], labels: dict[str, ExpertLabel], *, reward, judge, out_dir: Path,
                baseline: bool, bins: int = 5, resamples: int = 1000, seed: int = 0, chunk: int = 8,
                progress: bool = True, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score, compare, write ``summary.json`` and the reports; returns the summary."""
    from reward.metaeval.report import write_experts_report

    async def go():
        try:
            return await score_pairs(pairs, reward=reward, judge=judge, out_dir=out_dir, baseline=baseline,
                                     chunk=chunk, progress=progress)
        finally:
            await judge.aclose()

    results = asyncio.run(go())
    methods = [OURS] + ([BASELINE] if baseline else [])
    summary = compare(pairs, labels, results, methods=methods, bins=bins, resamples=resamples, seed=seed)
    summary["meta"] = dict(meta or {})
    summary["judge_stats"] = judge.stats.as_dict()
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    write_experts_report(out_dir, summary)
    return summary
