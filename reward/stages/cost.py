"""What grading costs: judge items per rollout and per prompt, from scored rollouts.

Every active leaf and every rubric item of a row is one judge item per rollout (before a batch
de-duplicates identical items); the figures are shown in the ``score`` summary, the TRL metrics
(``cost/...``) and verl's per-sample extra info.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reward.stages.rubric_reward import RolloutScore


def judge_items(result: RolloutScore) -> int:
    """Judge items one rollout asked for: its active leaves plus the row's rubric items, plus the
    extra readings that confirmed its failures (``confirm_failures``), before the batch
    de-duplicates identical items; the cost a training step pays per rollout."""
    return len(result.leaves) + len(result.rubric_items) + result.confirm_items


def applicability_items(result: RolloutScore) -> int:
    """Judge items of the prompt's applicability step (once per prompt, shared by its rollouts)."""
    return int(result.routing.get("n_applicability_calls", 0) or 0)


def _applicability_by_prompt(results: Sequence[RolloutScore], prompt_keys: Sequence[Any]) -> dict[Any, int]:
    """Each prompt's applicability questions: the most any of its rollouts records (a rollout scored
    without grading, such as an unfinished answer, records none)."""
    out: dict[Any, int] = {}
    for r, k in zip(results, prompt_keys, strict=True):
        out[k] = max(out.get(k, 0), applicability_items(r))
    return out


def judge_cost(results: Sequence[RolloutScore], prompt_keys: Sequence[Any]) -> dict[str, float | None]:
    """Judge items per rollout and per prompt (rollouts grouped by ``prompt_keys``, one key per
    result), and the share of them that are tree leaves. A prompt's applicability questions are
    asked once for all of its rollouts: counted once per prompt, and spread over its rollouts in
    the per-rollout figure."""
    if not results:
        return {"judge_items_per_rollout": None, "judge_items_per_prompt": None, "leaf_items_per_rollout": None,
                "rubric_items_per_rollout": None, "confirm_items_per_rollout": None,
                "applicability_items_per_prompt": None}
    n = len(results)
    app = _applicability_by_prompt(results, prompt_keys)
    per_prompt_app = sum(app.values())
    total = sum(judge_items(r) for r in results) + per_prompt_app
    n_prompts = len(app) or 1
    return {"judge_items_per_rollout": total / n, "judge_items_per_prompt": total / n_prompts,
            "leaf_items_per_rollout": sum(len(r.leaves) for r in results) / n,
            "rubric_items_per_rollout": sum(len(r.rubric_items) for r in results) / n,
            "confirm_items_per_rollout": sum(r.confirm_items for r in results) / n,
            "applicability_items_per_prompt": per_prompt_app / n_prompts}


def items_per_prompt(results: Sequence[RolloutScore], prompt_keys: Sequence[Any]) -> list[int]:
    """For each result, the judge items of all rollouts that share its prompt in this batch."""
    by_key = _applicability_by_prompt(results, prompt_keys)
    for r, k in zip(results, prompt_keys, strict=True):
        by_key[k] += judge_items(r)
    return [by_key[k] for k in prompt_keys]
