"""Score a rollout again under other verdicts: the one place a score is recomputed.

:class:`Rescorer` holds the pure part of the reward's recipe (the tree, the scoring variant, how
the tree and points scores combine, whether the points score is clipped) and scores a recorded
:class:`~reward.stages.results.RolloutScore` under verdicts of the caller's choosing, with the
routing the record carries (expanded nodes, rule-activated leaves). ``RubricReward.score`` and
``RubricReward.rescore`` use it, so stability re-sampling and the inspector's "what if this
verdict flipped" give the score ``score`` would have given, never a formula of their own.

:meth:`Rescorer.flip_contributions` is the inspector's leaf contribution under every variant:
``score - score with that one verdict flipped`` (met <-> not met; a soft verdict ``v`` becomes
``1 - v``). A passing leaf's contribution is what the pass is worth (>= 0), a failing leaf's is
minus what the failure costs (<= 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reward.healthbench.scoring import rl_reward
from reward.scoring.tree_score import RootScorer
from reward.scoring.variants import RULE_REASONS, check_variant, uses_penalty, uses_severity
from reward.stages.guards import price_scale_of
from reward.stages.results import RolloutScore
from reward.tree.graph import RubricTree

__all__ = ["Rescorer", "combine_scores"]


def combine_scores(combine: str, tree_score: float | None, points_score: float | None) -> float | None:
    """The reward of a rollout from its tree and points scores (either may be None)."""
    if tree_score is None or points_score is None:
        return tree_score if tree_score is not None else points_score
    if combine == "tree":
        return tree_score
    if combine == "points":
        return points_score
    return (tree_score + points_score) / 2


class Rescorer:
    """The scoring half of a reward (see the module docstring).

    Args:
        tree: the rubric tree the rollouts were scored on.
        scoring_variant, combine, clip_below_zero: as in ``reward.settings.RewardSettings``.
    """

    def __init__(self, tree: RubricTree | None, *, scoring_variant: str, combine: str = "mean",
                 clip_below_zero: bool = False) -> None:
        self.tree = tree
        self.scoring_variant = check_variant(scoring_variant)
        self.combine, self.clip_below_zero = combine, clip_below_zero
        self._last_root: tuple[tuple, RootScorer] | None = None  # rescorings of one record share a routing

    @classmethod
    def of_record(cls, tree: RubricTree | None, rec: RolloutScore, *, clip_below_zero: bool = False) -> Rescorer:
        """The rescorer a record was scored with (its variant and combine; clipping as given)."""
        return cls(tree, scoring_variant=rec.scoring_variant, combine=rec.combine, clip_below_zero=clip_below_zero)

    @property
    def additive(self) -> bool:
        """Whether a score is a sum of one term per verdict, each verdict's effect independent of
        the others: the linear variants (``paper``, ``active``: weighted pass values) with a points
        score that is not clipped (or not counted). Not under ``severity`` (failures compound) or
        the penalty variants (clipped at 0)."""
        linear_tree = not (uses_penalty(self.scoring_variant) or uses_severity(self.scoring_variant))
        return linear_tree and (not self.clip_below_zero or self.combine == "tree")

    def combined(self, tree_score: float | None, points_score: float | None) -> float | None:
        return combine_scores(self.combine, tree_score, points_score)

    def tree_score(self, leaf_met: Mapping[str, bool | float], *, expanded: Sequence[str] = (),
                   rule_leaves: Sequence[str] = (), price_scale: Mapping[str, float] | None = None) -> float | None:
        if not leaf_met:
            return None
        if self.tree is None:
            raise ValueError("rescoring tree leaves needs the tree they were scored on")
        scale = tuple(sorted((price_scale or {}).items()))
        key = (tuple(leaf_met), tuple(expanded), tuple(rule_leaves), scale)
        last = self._last_root
        if last is None or last[0] != key:
            last = self._last_root = (key, RootScorer(self.tree, list(leaf_met), variant=self.scoring_variant,
                                                      activated=set(expanded), rule_active=list(rule_leaves),
                                                      price_scale=price_scale))
        return last[1](leaf_met)

    def points_score(self, points: Sequence[float], met: Sequence[bool | float]) -> float | None:
        if not points:
            return None
        return rl_reward(list(points), list(met), clip=self.clip_below_zero)

    def rescore(self, s: RolloutScore, leaf_met: Mapping[str, bool | float],
                item_met: Sequence[bool | float]) -> float | None:
        """The score ``s``'s rollout gets had the judge answered ``leaf_met`` (active leaf ->
        verdict) and ``item_met`` (one per rubric item): the same routing and scoring."""
        if s.format_failure:
            return s.score
        rule = [lr.leaf_id for lr in s.leaves if lr.reason in RULE_REASONS]
        ts = self.tree_score(leaf_met, expanded=s.routing.get("expanded") or (), rule_leaves=rule,
                             price_scale=price_scale_of(s.routing))
        ps = self.points_score([it.points for it in s.rubric_items], item_met) if s.rubric_items else None
        return self.combined(ts, ps)

    @staticmethod
    def verdicts(s: RolloutScore) -> tuple[dict[str, bool | float], list[bool | float]]:
        """The verdicts ``s`` was scored on (soft scoring: p_yes where there is one)."""
        soft = s.scoring == "soft"

        def value(met, p):
            return float(p) if soft and p is not None else bool(met)

        def leaf_value(lr):  # posterior verdicts: the score took P(met) from p_fail
            if lr.p_fail is not None:
                return lr.p_fail if lr.polarity == "negative" else 1.0 - lr.p_fail
            return value(lr.met, lr.p_yes)

        return ({lr.leaf_id: leaf_value(lr) for lr in s.leaves if lr.failure is None},
                [value(it.met, it.p_yes) for it in s.rubric_items])

    def flip_contributions(self, s: RolloutScore) -> tuple[dict[str, float], list[float | None]]:
        """Per leaf and per rubric item: ``s.score`` minus the score with that one verdict flipped
        (see the module docstring). Empty for an unscored rollout or a format failure."""
        if s.score is None or s.format_failure:
            return {}, [None] * len(s.rubric_items)
        leaves, items = self.verdicts(s)

        def flipped(v: bool | float) -> bool | float:
            return (not v) if isinstance(v, bool) else 1.0 - float(v)

        out_leaves = {}
        for lid, v in leaves.items():
            again = self.rescore(s, {**leaves, lid: flipped(v)}, items)
            out_leaves[lid] = s.score - again if again is not None else 0.0
        out_items: list[float | None] = []
        for i, v in enumerate(items):
            again = self.rescore(s, leaves, [*items[:i], flipped(v), *items[i + 1:]])
            out_items.append(None if again is None else s.score - again)
        return out_leaves, out_items
