"""verl reward-loop manager ``rubricstree``: our data sources, scored with the group in sight.

verl 0.9.1 computes rewards one rollout at a time: the agent loop sends each finished rollout to
a random reward-loop worker, whose manager's ``run_single`` scores it (see the docstring of
``reward.integrations.verl.compute_score``). A rollout's group (same ``uid``) is therefore never handed over at once.
This manager restores it inside one worker:

* rollouts arriving within ``batch_window_s`` are scored together (one judge call per data
  source; ``RubricReward`` routes each distinct prompt once, and its routing cache serves the
  group's later rollouts);
* a rollout whose judge calls failed waits (``group_timeout_s`` at most) for the rest of its group,
  then gets the mean score of the group's scored rollouts: its advantage is zero, and its extra
  info says ``unscored: true`` with the reason; a group with none scored gets ``all_failed_score``.

That needs every rollout of a group in this worker: run with ``reward.num_workers=1`` (checked).
The worker is an async Ray actor and scoring is I/O on the judge server, so one worker keeps up.

Select it with (see configs/verl/stage2_error_rubric.yaml)::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=RubricsTreeRewardManager
    reward.reward_manager.module.path=pkg://reward.integrations.verl.manager
    reward.num_workers=1

Its settings are ``reward.custom_reward_function.reward_kwargs`` (the keys of
``reward.integrations.verl.settings.VerlRewardSettings``), the same ones ``compute_score`` reads. Importing
this module also registers the class in verl's reward-manager registry as ``rubricstree``.
This is the only module of the package that imports verl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.registry import (
    REWARD_MANAGER,
    register,
)

from reward.integrations.verl.advantage import ESTIMATOR
from reward.integrations.verl.context import RewardContext
from reward.integrations.verl.policy import group_policy
from reward.integrations.verl.settings import load_settings, refuse_legacy_reward_keys
from reward.integrations.verl.sources import Sample, score_samples
from reward.integrations.verl.streaming import StreamingScorer
from reward.stages.rollout_text import to_plain

REGISTRY_NAME = "rubricstree"


def _select(config: Any, path: str, default: Any) -> Any:
    node = config
    for part in path.split("."):
        if node is None:
            return default
        try:
            node = node.get(part) if hasattr(node, "get") else getattr(node, part)
        except (AttributeError, KeyError):
            return default
    return default if node is None else node


def reward_kwargs_of(config: Any) -> dict[str, Any]:
    """``reward.custom_reward_function.reward_kwargs`` as a plain dict (empty when absent)."""
    return dict(to_plain(_select(config, "reward.custom_reward_function.reward_kwargs", {})) or {})


class RubricsTreeRewardManager(RewardManagerBase):
    """Group-aware reward manager for verl's reward loop (see the module docstring).

    Args:
        config: verl's full config (reads ``reward.custom_reward_function.reward_kwargs``,
            ``actor_rollout_ref.rollout.n`` and ``reward.num_workers``).
        tokenizer: the policy's tokenizer (decodes responses).
        compute_score: verl's loaded custom function; unused (this manager scores with
            ``reward.integrations.verl.sources`` directly, with the group in sight).
        context: tests: a :class:`reward.integrations.verl.context.RewardContext` with its own judge.
    """

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, reward_router_address: Any = None,
                 reward_model_tokenizer: Any = None, *, context: RewardContext | None = None, **_: Any) -> None:
        super().__init__(config, tokenizer, compute_score)
        if config is not None:  # verl's older reward keys would bypass these settings: said, not ignored
            refuse_legacy_reward_keys(config)
        if context is None:
            kw = reward_kwargs_of(config)
            context = RewardContext(load_settings(kw.pop("config", None), **kw))
        self.context = context
        self.settings = context.settings
        self.group_size = int(self.settings.group_size or _select(config, "actor_rollout_ref.rollout.n", 1))
        workers = int(_select(config, "reward.num_workers", 1))
        if self.settings.on_failure == "neutral" and self.group_size > 1 and workers != 1:
            raise ValueError(
                f"on_failure 'neutral' gives a failed rollout its group's mean, so the whole group must reach one "
                f"reward worker, but reward.num_workers={workers} scatters it: set reward.num_workers=1 "
                "(scoring is I/O on the judge; one async worker keeps up) or on_failure: raise")
        estimator = str(_select(config, "algorithm.adv_estimator", ""))
        if self.settings.on_failure == "mask" and config is not None and estimator != ESTIMATOR:
            raise ValueError(
                f"on_failure 'mask' scores a failed rollout NaN for the {ESTIMATOR} advantage estimator to leave "
                f"out, but algorithm.adv_estimator is {estimator!r}: set algorithm.adv_estimator={ESTIMATOR} and "
                "ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=reward.integrations.verl.advantage.register "
                "(configs/verl/stage3_clinical_rubric.yaml), or on_failure: neutral")
        self.streaming = StreamingScorer(self.settings, self.context, self.group_size)

    # ------------------------------------------------------------------ verl's entry point
    async def run_single(self, data: DataProto) -> dict:
        """Score one rollout (verl calls this once per rollout, concurrently)."""
        # decode off the loop; the running loop, not the one verl captured at construction
        sample = await asyncio.get_running_loop().run_in_executor(None, self.sample_of, data[-1:][0])
        result = await self.streaming.score(sample)
        return {"reward_score": result["score"], "reward_extra_info": result}

    # ------------------------------------------------------------------ whole batches
    async def run_batch(self, data: DataProto) -> list[dict]:
        """Score a whole batch at once (every group complete, no waiting): for callers that hold
        the batch, such as tests or a colocated reward step. Same result shape as ``run_single``."""
        samples = [self.sample_of(data[i]) for i in range(len(data))]
        raws = await score_samples(samples, self.context)
        self.streaming.monitor_batch(samples, raws)
        results = group_policy(samples, raws, self.settings)
        return [{"reward_score": r["score"], "reward_extra_info": r} for r in results]

    def sample_of(self, item: Any) -> Sample:
        """A :class:`Sample` from one ``DataProtoItem`` (decoded response, row fields, uid)."""
        response_ids = item.batch["responses"]
        n = int(item.batch["attention_mask"][-response_ids.shape[-1]:].sum())
        text = self.tokenizer.decode(response_ids[:n], skip_special_tokens=True)
        nt = item.non_tensor_batch
        reward_model = nt.get("reward_model") or {}
        extra = nt.get("extra_info")
        extra = dict(to_plain(extra)) if isinstance(extra, Mapping) or hasattr(extra, "items") else {}
        uid = nt.get("uid")
        return Sample(data_source=str(nt["data_source"]), solution_str=text,
                      ground_truth=reward_model.get("ground_truth") if hasattr(reward_model, "get") else None,
                      extra_info=extra, uid=None if uid is None else str(uid), raw_prompt=nt.get("raw_prompt"))


def _register_once(name: str, cls: type) -> None:
    """verl's ``register`` refuses a second class under a name; this module may be executed twice
    in one process (verl loads ``module.path`` files with a fresh module each time), so the same
    class, by qualified name, is accepted again."""
    have = REWARD_MANAGER.get(name)
    if have is None:
        register(name)(cls)
    elif have.__qualname__ != cls.__qualname__:
        raise ValueError(f"reward manager {name!r} is already registered as {have.__module__}.{have.__qualname__}")


_register_once(REGISTRY_NAME, RubricsTreeRewardManager)
