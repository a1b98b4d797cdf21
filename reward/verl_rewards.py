"""Old import path of the verl reward function, kept so existing user configs keep working.

``reward.custom_reward_function.path=pkg://reward.verl_rewards`` (name ``compute_score``) and
``from reward.verl_rewards import ...`` still work; the code lives in ``reward.integrations.verl``
(new configs: ``pkg://reward.integrations.verl.compute_score``). Re-exports only, no logic.
"""

from reward.integrations.verl import *  # noqa: F403 - the old module's public names
from reward.integrations.verl import __all__  # noqa: F401
from reward.stages.rollout_text import to_plain as _plain  # noqa: F401 - the old private name
