"""Old import path of the verl reward function, kept so existing user configs keep working.

``reward.custom_reward_function.path=pkg://reward.verl_rewards`` (name ``compute_score``) and
``from reward.verl_rewards import ...`` still work; the code lives in ``reward.integrations.verl``
(new configs: ``pkg://reward.integrations.verl.compute_score``). Re-exports only, no logic.
"""

from reward.integrations.verl import (
    CONFIG_ENV,
    DATA_SOURCES,
    EXTRA_DEFAULTS,
    JUDGE_URL_ENV,
    VERL_KWARGS,
    GroupBoard,
    RewardContext,
    Sample,
    SampleScore,
    StreamingScorer,
    VerlRewardSettings,
    compute_score,
    compute_score_sync,
    finalize,
    get_context,
    get_data_source,
    group_policy,
    load_settings,
    register_data_source,
    score_samples,
    single_policy,
)

__all__ = ["CONFIG_ENV", "DATA_SOURCES", "EXTRA_DEFAULTS", "JUDGE_URL_ENV", "VERL_KWARGS", "GroupBoard",
           "RewardContext", "Sample", "SampleScore", "StreamingScorer", "VerlRewardSettings", "compute_score",
           "compute_score_sync", "finalize", "get_context", "get_data_source", "group_policy", "load_settings",
           "register_data_source", "score_samples", "single_policy"]
