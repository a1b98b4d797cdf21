"""Our judge reward beside other TRL reward functions: one combined reward function, and the group-mean
fill of a failed rollout (``reward.integrations.trl``'s ``on_failure="group_mean"``).

Nothing here imports trl, torch or transformers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def fill_group_mean(scores: list[float | None], groups: list[Any]) -> list[float | None]:
    """``scores`` with each None replaced by the mean of the scored rollouts of its group (rollouts
    with equal ``groups`` keys: one prompt's GRPO group); None where the group has no score."""
    by: dict[Any, list[float]] = {}
    for s, g in zip(scores, groups):
        if s is not None:
            by.setdefault(g, []).append(s)
    return [s if s is not None else (sum(by[g]) / len(by[g]) if by.get(g) else None) for s, g in zip(scores, groups)]


def group_keys(prompts: list) -> list[str]:
    """A key per rollout naming its prompt (TRL repeats each prompt once per generation)."""
    import json

    return [json.dumps(p, sort_keys=True, default=str) for p in prompts]


class CombinedReward:
    """Our judge reward beside your other TRL reward functions, as ONE reward function.

    TRL sums reward functions with ``nansum``: a rollout is left out of its group only when EVERY
    function returns None, so our None beside a format reward becomes 0 for that function, and the
    rollout whose judge failed is pushed down (a four-rollout group with one failure gave it
    advantage -0.45). Give TRL this instead of the list::

        reward = CombinedReward([RubricRewardFunc(judge=...), format_reward], weights=[1.0, 0.2])
        GRPOTrainer(..., reward_funcs=[reward])

    Each rollout's reward is the weighted sum of the functions' rewards; when any function returns
    None for a rollout (our judge failed, or a function of yours says it cannot score it), the whole
    rollout gets None, and TRL leaves it out of its group's baseline with advantage 0. Each
    function's mean is logged as ``<name>/<function name>`` (the judge reward logs its own metrics
    as usual). ``score_sync`` calls it from synchronous code.

    Args:
        funcs: reward functions (sync or async), TRL's signature.
        weights: one per function (default 1.0 each).
        name: the metric key (TRL's ``__name__``).
        monitors: the gaming monitors' thresholds over the total reward
            (:class:`reward.settings.MonitorSettings`): a total that rises with length inside the
            groups warns once, whichever function pays for it.
    """

    def __init__(self, funcs: list[Callable[..., Any]], weights: list[float] | None = None,
                 name: str = "combined", monitors: Any = None) -> None:
        if not funcs:
            raise ValueError("CombinedReward needs at least one reward function")
        if weights is not None and len(weights) != len(funcs):
            raise ValueError(f"{len(weights)} weights for {len(funcs)} reward functions")
        for f in funcs:
            if getattr(f, "on_failure", "skip") == "group_mean":
                raise ValueError(f"{getattr(f, '__name__', f)!r} fills a failed rollout with its group's mean: "
                                 "inside CombinedReward give it on_failure='skip' (the rollout is left out whole)")
        self.funcs = list(funcs)
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(funcs)
        self.__name__ = name
        from reward.integrations.monitors import RewardMonitor

        self.monitor = RewardMonitor(monitors, name=name)  # over the total reward the trainer sees

    async def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                       **kwargs: Any) -> list[float | None]:
        import inspect

        async def one(f):
            out = f(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)  # as TRL calls
            return await out if inspect.isawaitable(out) else out

        outs = await asyncio.gather(*(one(f) for f in self.funcs))
        n = len(completions)
        for f, out in zip(self.funcs, outs):
            if len(out) != n:
                raise ValueError(f"reward function {getattr(f, '__name__', f)!r} returned {len(out)} values for "
                                 f"{n} completions")
        total: list[float | None] = []
        for j in range(n):
            vals = [out[j] for out in outs]
            total.append(None if any(v is None for v in vals)
                         else sum(w * float(v) for w, v in zip(self.weights, vals)))
        log = kwargs.get("log_metric")
        if log is not None and n:
            for f, out in zip(self.funcs, outs):
                scored = [float(v) for v in out if v is not None]
                if scored:
                    log(f"{self.__name__}/{getattr(f, '__name__', type(f).__name__)}", sum(scored) / len(scored))
            log(f"{self.__name__}/left_out", sum(t is None for t in total) / n)
        from reward.integrations.monitors import RolloutFacts
        from reward.stages.rollout_text import completion_text

        facts = [RolloutFacts(group=g, reward=t, length=len(completion_text(c)))  # characters: what a reader sees
                 for g, t, c in zip(group_keys(list(prompts)), total, completions)]
        for k, v in self.monitor.observe(facts).items():
            if log is not None and k in ("length_correlation", "judge_failure_share"):
                log(f"{self.__name__}/monitor/{k}", v)
        return total

    def score_sync(self, prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        """The combined reward from synchronous code (see :meth:`RubricRewardFunc.score_sync`)."""
        from reward.runtime import run_sync

        return run_sync(self(prompts, completions, **kwargs))
