"""The feedback a reviser reads: the checks a response did not pass, heaviest first
(``RolloutScore.feedback``; the paper's response-revision use)."""

from __future__ import annotations

from collections.abc import Sequence

from reward.scoring.variants import SEVERITY_PRICE
from reward.stages.results import ItemResult, LeafResult
from reward.tree.graph import RubricTree


def reviser_feedback(tree: RubricTree, scoring_variant: str, limit: int, leaves: Sequence[LeafResult],
                     items: Sequence[ItemResult]) -> str:
    """Checks the response did not pass, heaviest first, phrased for a reviser."""
    # Importance = share of its own score (leaf weight over the active weight, item points
    # over the positive points), so tree leaves and rubric items sort on one scale.
    lines: list[tuple[float, str]] = []
    leaf_total = sum(lr.weight for lr in leaves) or 1.0
    for lr in leaves:
        if lr.passed is not None and lr.passed < 0.5:
            crit = tree[lr.leaf_id].criterion
            verb = "Avoid" if lr.polarity == "negative" else "Missing"
            # under ``severity`` a failure's price, not its structural weight, says what matters most
            share = (SEVERITY_PRICE[tree.severity[lr.leaf_id]] if scoring_variant == "severity"
                     else lr.weight / leaf_total)
            lines.append((share, f"- {verb} [{lr.title}]: {crit}"))
    total = sum(it.points for it in items if it.points > 0) or 1.0
    for it in items:
        if it.met is None:
            continue
        if it.points > 0 and not it.met:
            lines.append((it.points / total, f"- Missing [rubric, {it.points:g} points]: {it.criterion}"))
        elif it.points < 0 and it.met:
            lines.append((-it.points / total, f"- Avoid [rubric, {it.points:g} points]: {it.criterion}"))
    if not lines:
        return ""
    lines.sort(key=lambda x: -x[0])
    shown = [text for _, text in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"- ... and {len(lines) - limit} more")
    return "Checks this response did not pass (most important first):\n" + "\n".join(shown)
