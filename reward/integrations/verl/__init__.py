"""verl adapter, split by job; this package is also verl's custom reward function path.

* ``settings``: :class:`VerlRewardSettings` (``reward_kwargs``) and :func:`load_settings`;
* ``context``: the judge, tree, router and scorers per event loop;
* ``sources``: rollouts, the data-source registry and its scorers, the result shape;
* ``policy``: what an unscored rollout's score becomes (single rollout or whole groups);
* ``compute_score``: verl's custom reward function (``compute_score``, ``compute_score_sync``);
* ``streaming``: group-aware scoring of rollouts handed over one at a time;
* ``manager``: verl's reward-loop manager, the only module that imports verl (not imported here).

Data flow: verl -> ``compute_score`` or ``manager`` -> ``sources.score_samples`` (the stage
rewards of ``reward.stages``) -> ``policy`` -> ``{"score", **extra}``. Use
``reward.custom_reward_function.path=pkg://reward.integrations.verl.compute_score`` and
``reward.reward_manager.module.path=pkg://reward.integrations.verl.manager``.
"""

from reward.integrations.verl.compute_score import (
                                              VERL_KWARGS,
                                              compute_score,
                                              compute_score_sync,
)
from reward.integrations.verl.context import RewardContext, get_context
from reward.integrations.verl.policy import group_policy, single_policy
from reward.integrations.verl.settings import (
                                              CONFIG_ENV,
                                              JUDGE_URL_ENV,
                                              VerlRewardSettings,
                                              load_settings,
)
from reward.integrations.verl.sources import (
                                              DATA_SOURCES,
                                              EXTRA_DEFAULTS,
                                              Sample,
                                              SampleScore,
                                              finalize,
                                              get_data_source,
                                              register_data_source,
                                              score_samples,
)
from reward.integrations.verl.streaming import GroupBoard, StreamingScorer

__all__ = ["CONFIG_ENV", "DATA_SOURCES", "EXTRA_DEFAULTS", "JUDGE_URL_ENV", "VERL_KWARGS", "GroupBoard",
           "RewardContext", "Sample", "SampleScore", "StreamingScorer", "VerlRewardSettings", "compute_score",
           "compute_score_sync", "finalize", "get_context", "get_data_source", "group_policy", "load_settings",
           "register_data_source", "score_samples", "single_policy"]
