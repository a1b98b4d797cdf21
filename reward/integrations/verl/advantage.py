"""GRPO advantages with failed rollouts masked out of their group (``on_failure: mask``).

verl's GRPO estimator normalises each rollout's score by its group's (same ``uid``) mean and std.
A rollout the judge could not score has no score: given the group's mean (``on_failure:
neutral``), it adds zero deviations, which shrinks the group's std and inflates its siblings'
advantages (by sqrt(7/3) = 1.53 when 4 of 8 fail). Under ``on_failure: mask`` the reward manager
gives it NaN instead, and this estimator, ``rubricstree_grpo``, leaves NaN rollouts out of their
group's mean and std, gives them advantage 0 (no gradient) and sets their reward to 0 in place
(so the batch's reward metrics stay finite; ``unscored`` in the extra info counts them). A group
left with fewer than two scored rollouts has nothing to compare with: all its advantages are 0.

Registration must happen in verl's trainer process (a Ray actor): the verl configs set
``ray_kwargs.ray_init.runtime_env.worker_process_setup_hook`` to :func:`register`, which Ray runs
in every worker process, and ``algorithm.adv_estimator: rubricstree_grpo``. The estimator itself
(:func:`masked_grpo_advantage`) is plain torch, tested without verl.

Validation runs no advantage estimator: verl averages the raw rewards, so one masked (NaN) rollout
would make ``val-core/<source>/reward/mean@N`` NaN. :func:`register` also wraps verl's
``RayPPOTrainer._val_metrics_update`` with :func:`guard_validation_metrics`: masked rollouts are
left out of the validation statistics and counted as ``val-aux/<source>/masked_rollouts`` (a
source with every rollout masked reports only that count, never NaN).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["ESTIMATOR", "drop_masked", "guard_validation_metrics", "masked_grpo_advantage", "register"]

ESTIMATOR = "rubricstree_grpo"


def masked_grpo_advantage(token_level_rewards: Any, response_mask: Any, index: Any, epsilon: float = 1e-6,
                          norm_adv_by_std_in_grpo: bool = True, config: Any = None, **_: Any) -> tuple[Any, Any]:
    """verl's ``compute_grpo_outcome_advantage`` over each group's scored (finite) rollouts only;
    NaN-scored rollouts get advantage 0 and their NaN rewards become 0 in place."""
    import torch

    if config is not None:
        norm_adv_by_std_in_grpo = bool(getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    scores = token_level_rewards.sum(dim=-1)
    failed = torch.isnan(scores)
    token_level_rewards.nan_to_num_(0.0)
    adv = torch.zeros_like(scores)
    with torch.no_grad():
        groups: dict[Any, list[int]] = {}
        for i in range(scores.shape[0]):
            if not bool(failed[i]):
                groups.setdefault(index[i], []).append(i)
        for members in groups.values():
            if len(members) < 2:  # nothing to compare with: no advantage (verl's n=1 rule would use the raw score)
                continue
            vals = scores[members]
            mean, std = vals.mean(), vals.std()
            out = vals - mean
            if norm_adv_by_std_in_grpo:
                out = out / (std + epsilon)
            adv[members] = out
        adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


def _masked(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def drop_masked(data_sources: Any, sample_uids: Sequence[Any], infos: Mapping[str, list]) -> tuple[Any, list, dict,
                                                                                                   dict[str, int]]:
    """The validation rollouts whose ``reward`` is a number (not a masked NaN), and the number of
    masked ones per data source: ``(data_sources, sample_uids, infos, masked)``, same types in."""
    rewards = list(infos.get("reward", []))
    keep = [i for i in range(len(sample_uids)) if not (i < len(rewards) and _masked(rewards[i]))]
    kept, masked = set(keep), {}
    for i in range(len(sample_uids)):
        masked[str(data_sources[i])] = masked.get(str(data_sources[i]), 0) + (i not in kept)
    kept_sources = data_sources[keep] if hasattr(data_sources, "shape") else [data_sources[i] for i in keep]
    kept_infos = {k: ([v[i] for i in keep] if len(v) == len(sample_uids) else list(v)) for k, v in infos.items()}
    return kept_sources, [sample_uids[i] for i in keep], kept_infos, masked


def guard_validation_metrics(update: Callable) -> Callable:
    """Wrap verl's ``RayPPOTrainer._val_metrics_update`` (``self, data_sources, sample_uids,
    reward_extra_infos_dict, sample_turns``): statistics over the scored rollouts only, plus
    ``val-aux/<source>/masked_rollouts``."""
    if getattr(update, "_rubricstree_guard", False):
        return update

    @functools.wraps(update)
    def guarded(self: Any, data_sources: Any, sample_uids: Any, reward_extra_infos_dict: Mapping[str, list],
                sample_turns: Any, *args: Any, **kwargs: Any) -> dict:
        # *args/**kwargs: the v1 trainer passes expected_acc_counts, the legacy one nothing more
        sources, uids, infos, masked = drop_masked(data_sources, list(sample_uids), reward_extra_infos_dict)
        metrics = update(self, sources, uids, infos, sample_turns, *args, **kwargs) if len(uids) else {}
        for source, n in masked.items():
            metrics[f"val-aux/{source}/masked_rollouts"] = n
        return metrics

    guarded._rubricstree_guard = True  # type: ignore[attr-defined]
    return guarded


def register() -> None:
    """Register :func:`masked_grpo_advantage` in verl's estimator registry as ``rubricstree_grpo``
    (Ray's ``worker_process_setup_hook``; a no-op where verl is not installed or it is there)."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError:
        return
    if ESTIMATOR not in core_algos.ADV_ESTIMATOR_REGISTRY:
        core_algos.register_adv_est(ESTIMATOR)(masked_grpo_advantage)
    for trainer in _trainer_classes():
        trainer._val_metrics_update = guard_validation_metrics(trainer._val_metrics_update)


def _trainer_classes() -> list[type]:
    """verl 0.9.1's two PPO trainers: ``trainer.use_v1`` (the default, and our configs') runs
    ``ppo.v1.trainer_base.PPOTrainer``; the legacy path runs ``ray_trainer.RayPPOTrainer``. Each
    has its own ``_val_metrics_update``; a worker without a trainer's dependencies never validates."""
    out = []
    try:
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer
        out.append(PPOTrainer)
    except ImportError:
        pass
    try:
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer
        out.append(RayPPOTrainer)
    except ImportError:
        pass
    return out
