"""HealthBench: the row schema and loader, the known file variants and the official scoring."""

from reward.healthbench.schema import HealthBenchRow, Message, RubricItem, load_healthbench
from reward.healthbench.scoring import (
    aggregate,
    example_score,
    example_tag_scores,
    length_adjusted,
    rl_reward,
    score_healthbench,
)
from reward.healthbench.variants import LENGTH_ADJUST, VARIANTS, Variant, verify_sha256

__all__ = [
    "LENGTH_ADJUST", "VARIANTS", "HealthBenchRow", "Message", "RubricItem", "Variant", "aggregate",
    "example_score", "example_tag_scores", "length_adjusted", "load_healthbench", "rl_reward",
    "score_healthbench", "verify_sha256",
]
