"""Per-rollout columns for a trainer's completions table: the leaf verdicts behind each reward.

TRL logs one number per reward function next to each completion; verl dumps the reward's extra
info per rollout. These columns say why: which routed leaves failed the check, which the judge
could not decide (p_yes within 0.15 of 0.5), each macro capability's score, and a bounded
``leaf=p_yes`` list of every verdict. The same columns come on every call (a macro that was not
routed is None), as both trainers need: TRL aligns the extra columns across ranks and steps by
name, verl stacks each key across the batch.

Text is bounded: the leaf lists keep at most ``max_chars`` characters (with a ``+N more`` tail).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

UNCERTAIN = 0.15


def _bounded(ids: Sequence[str], max_chars: int) -> str:
    out: list[str] = []
    size = 0
    for i, x in enumerate(ids):
        if size + len(x) + 1 > max_chars and out:
            return " ".join(out) + f" +{len(ids) - i} more"
        out.append(x)
        size += len(x) + 1
    return " ".join(out)


def leaf_columns(results: Sequence[Any], macros: Sequence[str], *, max_chars: int = 300) -> dict[str, list[Any]]:
    """Column name -> one value per result (``RolloutScore``): ``tree_score``, ``points_score``,
    ``failed_leaves``, ``uncertain_leaves``, ``verdicts`` (``leaf=p_yes``), ``unscored`` (the first
    reason, or ""), and ``macro/<id>`` for every macro capability."""
    cols: dict[str, list[Any]] = {k: [] for k in ("tree_score", "points_score", "failed_leaves", "uncertain_leaves",
                                                   "verdicts", "unscored")}
    for m in macros:
        cols[f"macro/{m}"] = []
    for r in results:
        leaves = [lf for lf in r.leaves if lf.failure is None]
        cols["tree_score"].append(r.tree_score)
        cols["points_score"].append(r.points_score)
        cols["failed_leaves"].append(_bounded([lf.leaf_id for lf in leaves if lf.passed is not None
                                               and lf.passed < 0.5], max_chars))
        cols["uncertain_leaves"].append(_bounded([lf.leaf_id for lf in leaves if lf.p_yes is not None
                                                  and abs(lf.p_yes - 0.5) <= UNCERTAIN], max_chars))
        cols["verdicts"].append(_bounded([f"{lf.leaf_id}={lf.p_yes:.2f}" if lf.p_yes is not None
                                          else f"{lf.leaf_id}={int(bool(lf.met))}" for lf in leaves], max_chars))
        cols["unscored"].append("" if r.score is not None else (r.failures[0] if r.failures else "unscored")[:200])
        for m in macros:
            node = r.nodes.get(m) if r.score is not None else None
            cols[f"macro/{m}"].append(None if node is None else float(node["score"]))
    return cols
