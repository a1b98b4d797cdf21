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


def judge_cost(results: Sequence[RolloutScore], prompt_keys: Sequence[Any]) -> dict[str, float | None]:
    """Judge items per rollout and per prompt (rollouts grouped by ``prompt_keys``, one key per
    result), and the share of them that are tree leaves."""
    if not results:
        return {"judge_items_per_rollout": None, "judge_items_per_prompt": None, "leaf_items_per_rollout": None,
                "rubric_items_per_rollout": None, "confirm_items_per_rollout": None}
    n = len(results)
    total = sum(judge_items(r) for r in results)
    n_prompts = len(set(prompt_keys)) or 1
    return {"judge_items_per_rollout": total / n, "judge_items_per_prompt": total / n_prompts,
            "leaf_items_per_rollout": sum(len(r.leaves) for r in results) / n,
            "rubric_items_per_rollout": sum(len(r.rubric_items) for r in results) / n,
            "confirm_items_per_rollout": sum(r.confirm_items for r in results) / n}


def items_per_prompt(results: Sequence[RolloutScore], prompt_keys: Sequence[Any]) -> list[int]:
    """For each result, the judge items of all rollouts that share its prompt in this batch."""
    by_key: dict[Any, int] = {}
    for r, k in zip(results, prompt_keys, strict=True):
        by_key[k] = by_key.get(k, 0) + judge_items(r)
    return [by_key[k] for k in prompt_keys]
