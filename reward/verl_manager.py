"""Old import path of the verl reward-loop manager, kept so existing user configs keep working.

``reward.reward_manager.module.path=pkg://reward.verl_manager`` still selects
``RubricsTreeRewardManager``; the code lives in ``reward.integrations.verl.manager`` (new
configs: ``pkg://reward.integrations.verl.manager``). Re-exports only, no logic; imports verl.
"""

from reward.integrations.verl.manager import (
    REGISTRY_NAME,
    RubricsTreeRewardManager,
    reward_kwargs_of,
)

__all__ = ["REGISTRY_NAME", "RubricsTreeRewardManager", "reward_kwargs_of"]
