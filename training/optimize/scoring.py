"""Score rollouts prompt by prompt with the rubric reward, reporting each prompt as it finishes.

Each prompt's rollouts go to :meth:`RubricReward.score` together (routed once, graded in one
judge call); ``on_done(results)`` runs as soon as that prompt is scored so the caller appends the
results to its log at once. A kill loses at most the prompts in flight, and their verdicts are
already in the judge's durable cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from reward.aio import gather_or_cancel
from reward.stages.rubric_reward import Rollout, RolloutScore

__all__ = ["score_by_prompt"]


async def score_by_prompt(reward, rollouts: Sequence[Rollout], on_done: Callable[[list[RolloutScore]], None], *,
                          concurrency: int = 8, desc: str = "scoring") -> None:
    """Score ``rollouts`` (``concurrency`` prompts at a time), calling ``on_done`` per prompt."""
    from reward.progress import bar as progress_bar

    groups: dict[tuple, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.prompt_key, []).append(r)
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = progress_bar(len(rollouts), unit="rollout", desc=desc)

    async def one(group: list[Rollout]) -> None:
        async with sem:
            scores = await reward.score(group)
        on_done(scores)
        bar.update(len(group))

    try:
        await gather_or_cancel(one(g) for g in groups.values())
    finally:
        bar.close()
