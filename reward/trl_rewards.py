"""Old import path of the TRL reward functions, kept so existing user code and configs keep working.

The adapter lives in ``reward.integrations.trl``, the shared pieces in ``reward.stages``,
``reward.settings`` (``JudgeSpec`` is now :class:`reward.settings.JudgeSettings`) and
``reward.runtime``. Re-exports only, no logic.
"""

from reward.integrations.trl import ErrorRubricReward, MCQRuleReward, RubricRewardFunc
from reward.runtime import run_sync
from reward.settings import JudgeSettings
from reward.stages.rollout_text import completion_text, prompt_messages
from reward.stages.row_rubrics import RowScore, grade_rubric_rows, results_items

JudgeSpec = JudgeSettings

__all__ = ["ErrorRubricReward", "JudgeSpec", "MCQRuleReward", "RowScore", "RubricRewardFunc", "completion_text",
           "grade_rubric_rows", "prompt_messages", "results_items", "run_sync"]
