"""verl's custom reward function: ``compute_score`` (async) and ``compute_score_sync``.

How verl 0.9.1 calls it (read from ``verl/trainer/ppo/reward.py`` and
``verl/experimental/reward_loop/``): ``reward.custom_reward_function.{path,name}`` names the
function (``pkg://reward.integrations.verl``, name ``compute_score``);
``reward.custom_reward_function.reward_kwargs`` (``+reward.custom_reward_function.reward_kwargs.KEY=``
on the command line) is merged into every call, so our settings arrive as keyword arguments
(:class:`reward.integrations.verl.settings.VerlRewardSettings`, or ``config`` naming a YAML file
of them). verl sends each finished rollout alone to a reward worker, so this function never sees
a rollout's group: its failure policy is ``single_policy``; use the reward manager
(``reward.integrations.verl.manager``) for judge-scored stages.

Data flow: keyword arguments -> settings and context -> :class:`Sample` -> ``score_samples`` ->
``single_policy`` -> ``{"score": float, **extra}``.
"""

from __future__ import annotations

from typing import Any

from reward.integrations.verl.context import RewardContext, get_context
from reward.integrations.verl.policy import single_policy
from reward.integrations.verl.settings import VerlRewardSettings, load_settings
from reward.integrations.verl.sources import Sample, score_samples
from reward.runtime import run_sync
from reward.stages.rollout_text import to_plain

__all__ = ["VERL_KWARGS", "compute_score", "compute_score_sync"]

# Keyword arguments verl itself may add to a compute_score call (reward-model plumbing), not ours.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def _split_kwargs(kw: dict[str, Any]) -> tuple[VerlRewardSettings, RewardContext | None]:
    for k in VERL_KWARGS:
        kw.pop(k, None)
    context = kw.pop("context", None)
    settings = kw.pop("settings", None)
    if settings is None:
        settings = context.settings if context is not None else load_settings(kw.pop("config", None), **kw)
    return settings, context


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                        **kwargs: Any) -> dict[str, Any]:
    """verl's custom reward function: ``{"score": float, **extra}`` for one rollout.

    Args:
        data_source: a registered data source (see the module docstring).
        solution_str: the decoded response.
        ground_truth: ``reward_model.ground_truth`` of the row (the key letter, or rubric items JSON).
        extra_info: the row's ``extra_info`` (options, judge_prompt, prompt_id, ...).
        **kwargs: ``reward_kwargs`` from verl's config: settings keys (:class:`VerlRewardSettings`)
            and ``config`` (a YAML file of them). Tests may pass ``context`` (a :class:`RewardContext`).

    Raises:
        JudgeError: a judge failure under ``on_failure: raise``, or under ``neutral`` without
            ``fallback_score`` (this function cannot see the group; use the reward manager).
        InputError: the row lacks what its data source needs (the message names the field).
    """
    settings, context = _split_kwargs(dict(kwargs))
    context = context or get_context(settings)
    sample = Sample(str(data_source), solution_str or "", ground_truth, to_plain(extra_info) or {})
    [raw] = await score_samples([sample], context)
    return single_policy(sample, raw, settings)


def compute_score_sync(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                       **kwargs: Any) -> dict[str, Any]:
    """Blocking :func:`compute_score` for verl's legacy synchronous managers
    (``verl.workers.reward_manager``), run on the one background loop of ``reward.runtime`` so
    the judge's connections survive between calls."""
    return run_sync(compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs))
