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
"""

from __future__ import annotations

from typing import Any

__all__ = ["ESTIMATOR", "masked_grpo_advantage", "register"]

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


def register() -> None:
    """Register :func:`masked_grpo_advantage` in verl's estimator registry as ``rubricstree_grpo``
    (Ray's ``worker_process_setup_hook``; a no-op where verl is not installed or it is there)."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError:
        return
    if ESTIMATOR not in core_algos.ADV_ESTIMATOR_REGISTRY:
        core_algos.register_adv_est(ESTIMATOR)(masked_grpo_advantage)
