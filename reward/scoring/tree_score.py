"""The RubricsTree score of one response: weighted pass values over the active leaves, with a
per-node breakdown.

A leaf's judge verdict says whether its criterion is met. Polarity turns that into a pass value
(positive leaf: pass = met; negative leaf, which describes a failure: pass = 1 - met). The scoring
variant (``reward.scoring.variants``) decides the weights (global auto-weights or renormalised over
the activated sub-DAG) and how they combine (``paper``: ``sum(w_i * pass_i) / sum(w_i)``;
``penalty``: negative and always-on leaves only subtract when triggered, and a failed critical or
major leaf costs at least a fixed share of the score). Each node's score is the
same combination over its active descendant leaves, with the same weights.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from reward.errors import ScoringError
from reward.scoring.variants import (
    DEFAULT_SCORING_VARIANT,
    check_variant,
    combine,
    effective_weights,
    guard_ids,
    severity_combine,
    severity_floors,
    severity_prices,
    uses_penalty,
    uses_severity,
)
from reward.tree.graph import RubricTree


@dataclass(frozen=True)
class TreeScore:
    """Result of :func:`score_tree`.

    Attributes:
        score: the tree score over the active leaves, in [0, 1] (``severity``: in (0, 1], never
            clipped: every failure lowers it).
        nodes: node id -> ``{"score", "weight", "n_active"}`` for every node with at least one
            active descendant leaf (active leaves included); ``weight`` is the summed effective
            weight (under the variant) of its active descendant leaves.
        leaves: active leaf id -> pass value in [0, 1] (after polarity).
        weights: active leaf id -> effective weight under the variant.
        variant: the scoring variant used.
    """

    score: float
    nodes: Mapping[str, Mapping[str, float | int]] = field(default_factory=dict)
    leaves: Mapping[str, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    variant: str = "paper"

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable copy."""
        return {"score": self.score, "nodes": {k: dict(v) for k, v in self.nodes.items()},
                "leaves": dict(self.leaves), "weights": dict(self.weights), "variant": self.variant}


def _met_value(leaf_id: str, met: Any) -> float:
    if isinstance(met, bool):
        return 1.0 if met else 0.0
    if isinstance(met, (str, bytes)):  # float("0.5") would pass silently
        raise ScoringError(f"leaf '{leaf_id}': met must be a boolean or a probability, got {met!r}")
    try:
        value = float(met)
    except (TypeError, ValueError):
        raise ScoringError(f"leaf '{leaf_id}': met must be a boolean or a probability in [0, 1], "
                           f"got {met!r}") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ScoringError(f"leaf '{leaf_id}': met must be in [0, 1], got {met!r}")
    return value


class _Routing:
    """What the variant needs to combine a response's pass values, which depends only on which
    leaves are active (weights, guards, floors, prices, catch-alls), never on their verdicts."""

    def __init__(self, tree: RubricTree, leaf_ids: Collection[str], variant: str, activated: Collection[str] | None,
                 rule_active: Collection[str], price_scale: Mapping[str, float] | None = None) -> None:
        check_variant(variant)
        self.tree = tree
        self.ids: dict[str, str] = {}  # the id as given -> the leaf's id (a former id scores as its leaf)
        self.positive: dict[str, bool] = {}
        for given in leaf_ids:
            if given not in tree:
                raise ScoringError(f"'{given}' is not a node of the tree '{tree.name}'")
            node = tree[given]
            if not node.is_leaf:
                raise ScoringError(f"'{node.id}' is not a leaf (it has children), so it cannot be judged")
            self.ids[given] = node.id
            self.positive[node.id] = node.polarity == "positive"
        active = list(self.ids.values())
        self.penalty = uses_penalty(variant)
        self.weights = effective_weights(tree, active, variant, activated)
        self.penalty_ids = guard_ids(tree, active, rule_active) if self.penalty else set()
        self.floors = severity_floors(tree, active) if self.penalty else {}
        self.prices = severity_prices(tree, active, price_scale) if uses_severity(variant) else None
        self.catch_all = {lid for lid in active if tree[lid].catch_all}

    def passes(self, met: Mapping[str, bool | float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for given, m in met.items():
            leaf_id = self.ids[given]
            value = _met_value(leaf_id, m)
            out[leaf_id] = value if self.positive[leaf_id] else 1.0 - value
        return out

    def score(self, passes: Mapping[str, float], active: list[str]) -> float:
        sub = {lid: passes[lid] for lid in active}
        if self.prices is not None:
            return severity_combine(sub, self.prices, self.tree.fault_of, self.catch_all, self.tree.fault_acts)
        return combine(self.weights, sub, self.penalty_ids, penalty=self.penalty, floors=self.floors)


class RootScorer:
    """The root score of one routing under any verdicts on its active leaves: ``score_tree(...).score``
    for callers that score one response under many verdicts (rescoring, attribution); what depends
    only on the routing is worked out once.

    Args:
        tree, variant, activated, rule_active, price_scale: as in :func:`score_tree`.
        leaf_ids: the active leaves; every call must give a verdict on each of them.
    """

    def __init__(self, tree: RubricTree, leaf_ids: Collection[str], *, variant: str = DEFAULT_SCORING_VARIANT,
                 activated: Collection[str] | None = None, rule_active: Collection[str] = (),
                 price_scale: Mapping[str, float] | None = None) -> None:
        if not leaf_ids:
            raise ScoringError("no active leaves: the tree score is undefined")
        self.routing = _Routing(tree, leaf_ids, variant, activated, rule_active, price_scale)
        self.leaf_ids = frozenset(leaf_ids)
        below = tree.descendant_leaves[tree.root]
        self._under_root = below

    def __call__(self, met: Mapping[str, bool | float]) -> float:
        if met.keys() != self.leaf_ids:
            raise ScoringError("the verdicts are not on the leaves this scorer was made for")
        passes = self.routing.passes(met)
        return float(self.routing.score(passes, [lid for lid in passes if lid in self._under_root]))


def score_tree(tree: RubricTree, met: Mapping[str, bool | float], *, variant: str = DEFAULT_SCORING_VARIANT,
               activated: Collection[str] | None = None, rule_active: Collection[str] = (),
               price_scale: Mapping[str, float] | None = None) -> TreeScore:
    """Score one response from the judge's verdicts on its active leaves.

    Args:
        tree: the rubric tree (gives polarity, auto-weights and the DAG).
        met: active leaf id -> "criterion met" as judged, a boolean or a probability in [0, 1].
            Leaves not in the mapping are inactive and do not count.
        variant: ``paper``, ``penalty``, ``active``, ``penalty+active`` or ``severity`` (see
            ``reward.scoring.variants``). Leaves whose situation is absent (not applicable) must
            be left out of ``met``: they are not scored.
        activated: internal nodes the router expanded (``Routing.expanded``); the ``active``
            variants count a multi-parent leaf only along paths through them.
        price_scale: ``severity`` variant: a leaf's price times this (default 1), e.g. an
            over-escalation priced against the prompt's urgency (``reward.stages.guards``).

    Raises:
        ScoringError: no active leaf, an unknown id, a non-leaf id, or a met value that is NaN,
            outside [0, 1] or not a number.
    """
    if not met:
        raise ScoringError("no active leaves: the tree score is undefined")
    routing = _Routing(tree, list(met), variant, activated, rule_active, price_scale)
    passes = routing.passes(met)
    nodes: dict[str, dict[str, float | int]] = {}
    for nid in tree.topological_order:
        # in the order of ``met``, not of the frozenset (whose order follows the per-process string
        # hash): float sums in a fixed order give the same score in every process and on a rerun
        below = tree.descendant_leaves[nid]
        active = [lid for lid in passes if lid in below]
        if not active:
            continue
        nodes[nid] = {
            "score": routing.score(passes, active),
            "weight": sum(routing.weights[lid] for lid in active),
            "n_active": len(active),
        }
    # plain dicts (not mapping proxies) so a TreeScore pickles across worker processes
    return TreeScore(score=float(nodes[tree.root]["score"]), nodes=nodes, leaves=passes,
                     weights=routing.weights, variant=variant)


def root_score(tree: RubricTree, met: Mapping[str, bool | float], *, variant: str = DEFAULT_SCORING_VARIANT,
               activated: Collection[str] | None = None, rule_active: Collection[str] = (),
               price_scale: Mapping[str, float] | None = None) -> float:
    """``score_tree(...).score`` without the per-node breakdown (:class:`RootScorer`, used once)."""
    return RootScorer(tree, list(met), variant=variant, activated=activated, rule_active=rule_active,
                      price_scale=price_scale)(met)


def macro_breakdown(tree: RubricTree, result: TreeScore) -> dict[str, float]:
    """Scores of the root's children (the macro capabilities) that have an active leaf.

    Args:
        tree: the tree the result was computed on.
        result: the output of :func:`score_tree`.
    """
    return {cid: float(result.nodes[cid]["score"]) for cid in tree.macro_capabilities
            if cid in result.nodes}
