"""Pure scoring math: the RubricsTree tree score and its scoring variants (HealthBench scoring lives
in reward.healthbench)."""

from reward.scoring.tree_score import TreeScore, macro_breakdown, score_tree
from reward.scoring.variants import (
                                     DEFAULT_SCORING_VARIANT,
                                     SCORING_VARIANTS,
                                     ScoringVariant,
                                     active_weights,
                                     effective_weights,
)

__all__ = ["DEFAULT_SCORING_VARIANT", "SCORING_VARIANTS", "ScoringVariant", "TreeScore", "active_weights",
           "effective_weights", "macro_breakdown", "score_tree"]
