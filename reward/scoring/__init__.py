"""Pure scoring math: the RubricsTree weighted score (HealthBench scoring lives in reward.healthbench)."""

from reward.scoring.tree_score import TreeScore, macro_breakdown, score_tree

__all__ = ["TreeScore", "macro_breakdown", "score_tree"]
