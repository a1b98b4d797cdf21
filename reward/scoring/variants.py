"""Scoring variants of the tree score: which weight each active leaf gets and how a failure counts.

Data flow: active leaf ids (+ the internal nodes the router expanded) -> effective leaf weights
(:func:`effective_weights`) -> the pass values are combined by :func:`reward.scoring.tree_score.score_tree`.

Five variants; ``severity`` is the default (docs/scoring.md has the measurements):

- ``paper``: the tree's global auto-weights; every active leaf, negative or not, adds its weight to
  the denominator and its pass value to the numerator. A negative leaf that is not triggered counts
  as a pass, so safety leaves that are always on hand out free points.
- ``penalty``: as HealthBench's negative points. Only positive leaves judged relevant form the
  denominator; a *guard* adds nothing when it passes and subtracts its weight times ``1 - pass``
  when it fails or is triggered. Guards are negative leaves, ``always_on`` leaves and leaves the
  router switched on by a rule rather than by relevance (``RULE_REASONS``: always on, universal,
  context present): a check nobody judged relevant must not earn credit by passing. The ratio is
  clipped to [0, 1]. With no positive leaf in scope the score is ``1 - lost weight / guard weight``.
  Severity: a failed leaf (a positive one not met, a guard triggered) costs at least its severity's
  share of the score (``SEVERITY_FLOOR``: critical 0.145, major 0.116, minor 0.061), whatever its weight:
  with ~60 active leaves a structural weight is ~1/60, and one fabricated value or one missed
  emergency must not be diluted by the passes around it (HealthBench scores a -10 item against
  the positive points, not against the count of items). Severity is set in the taxonomy on
  nodes and inherited by the leaves beneath (``RubricTree.severity``).
- ``active``: weights renormalised over the activated sub-DAG. The root has 1 and every activated
  node splits its weight equally among its activated children. A leaf with several parents counts
  only the paths whose internal nodes were all activated (expanded by the router, or on the only
  path of another active leaf); a leaf with no such path (an always-on leaf) counts the paths that
  run furthest through activated nodes (all of them on a tie, or without routing information).
- ``penalty+active``: the active weights, scored the penalty way.
- ``severity`` (default): a failure's price is set by the failed leaf's severity alone, never by
  its structural weight, so no routing can make a minor failure cost more than a major one or a
  major more than a critical one (:data:`SEVERITY_PRICE`). Passing earns nothing; a failure
  (a positive leaf not met, a negative leaf triggered; ``f = 1 - pass`` for a soft verdict)
  multiplies the score down::

      score = prod_critical (1 - 0.5 f)  *  (Q + (1 - Q) * prod_other (1 - d f))

  with ``Q = 1 - SEVERITY_PRICE["critical"]`` and ``d = price / (1 - Q)``. One critical failure
  halves the score; major and minor failures can together take away at most the other half, so
  a reply with a critical failure always scores below the same reply without it, however
  unhelpful that one is (harm outranks unhelpfulness), and every further failure lowers the score
  (two independent critical failures score 0.25, below one at 0.5). The score stays in (0, 1]
  without clipping, so group normalisation sees the whole order. Weights (the ``active`` ones)
  only order the per-node breakdown and the feedback.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Literal, get_args

from reward.tree.graph import RubricTree

ScoringVariant = Literal["paper", "penalty", "active", "penalty+active", "severity"]
SCORING_VARIANTS: tuple[str, ...] = get_args(ScoringVariant)
# Prices follow severity, not structure (issue 21; docs/scoring.md).
DEFAULT_SCORING_VARIANT: ScoringVariant = "severity"
# Routing reasons (``ActiveLeaf.reason``) of leaves switched on by a rule, not by relevance.
RULE_REASONS = frozenset({"always_on", "universal", "context", "reply_guard"})
# Least share of the score a failed leaf costs under the legacy penalty variants, by severity: the
# median share of its row's positive points that a negative HealthBench-Hard item of that band costs
# (critical |points| 8-10, major 4-7, minor 1-3), recomputed and checked by
# ``scripts/severity_prices.py --check`` (the earlier 0.24 / 0.12 / 0 matched no statistic).
SEVERITY_FLOOR: dict[str, float] = {"critical": 0.145, "major": 0.116, "minor": 0.061}
# What one failure costs a reply that fails nothing else, under the ``severity`` variant, on any
# routing. Critical 0.5: a critical failure must outweigh every unhelpfulness a reply can show
# (HealthBench's points let about three missed 3-point items outweigh a -10 item, which is how a
# bare "see a doctor" outscores a harmful recommendation). Major and minor keep HealthBench's
# order and spacing of a 5- against a 1-3-point item, scaled so that one major failure is
# detected with room to spare; ``scripts/severity_prices.py`` recomputes the HealthBench
# statistics from the rows and checks these prices against them.
SEVERITY_PRICE: dict[str, float] = {"critical": 0.5, "major": 0.2, "minor": 0.05}


def check_variant(variant: str) -> str:
    """Return ``variant`` or raise ValueError naming the known ones."""
    if variant not in SCORING_VARIANTS:
        raise ValueError(f"unknown scoring variant {variant!r}; known: {', '.join(SCORING_VARIANTS)}")
    return variant


def uses_penalty(variant: str) -> bool:
    return check_variant(variant) in ("penalty", "penalty+active")


def uses_active(variant: str) -> bool:
    return check_variant(variant) in ("active", "penalty+active", "severity")


def uses_severity(variant: str) -> bool:
    return check_variant(variant) == "severity"


def is_penalty_leaf(tree: RubricTree, leaf_id: str) -> bool:
    """A guard by the tree alone: negative or always on (routing adds the leaves it switched on
    by a rule, see :func:`guard_ids`)."""
    node = tree[leaf_id]
    return node.polarity == "negative" or node.always_on


Edge = tuple[str, str]


# Path queries below never list paths: a diamond-shaped DAG (layers of two nodes, each linked to
# both nodes of the next layer) has 2**40 root-to-leaf paths at 83 nodes. What the weights need is
# the set of EDGES lying on the chosen paths, which one pass forward and one backward over the
# leaf's ancestors give in time linear in the size of the tree.
def _all_path_edges(tree: RubricTree, leaf_id: str) -> set[Edge]:
    """The edges on any root-to-leaf path: every edge into the leaf or into one of its ancestors
    (every node is reachable from the root, so each such edge lies on some path)."""
    nodes = tree.ancestors(leaf_id) | {leaf_id}
    return {(p, c) for c in nodes for p in tree.parents[c]}


def _full_path_edges(tree: RubricTree, leaf_id: str, opened: Collection[str]) -> set[Edge]:
    """The edges on the root-to-leaf paths whose internal nodes are all ``opened``."""
    if tree.root not in opened:
        return set()
    back = {leaf_id}  # nodes that reach the leaf through opened nodes only
    todo = [leaf_id]
    while todo:
        for p in tree.parents[todo.pop()]:
            if p in opened and p not in back:
                back.add(p)
                todo.append(p)
    if tree.root not in back:
        return set()
    forward, todo = {tree.root}, [tree.root]  # opened nodes the root reaches through opened nodes
    while todo:
        for c in tree[todo.pop()].children:
            if c in back and c != leaf_id and c not in forward:
                forward.add(c)
                todo.append(c)
    return {(p, c) for c in back for p in tree.parents[c] if p in forward}


def best_path_edges(tree: RubricTree, leaf_id: str, opened: Collection[str]) -> set[Edge]:
    """The edges on the leaf's root-to-leaf paths that run furthest through ``opened`` nodes (the
    most opened internal nodes; every such path on a tie), by a longest-path pass over the DAG."""
    anc = tree.ancestors(leaf_id)
    best: dict[str, int] = {}  # most opened nodes on a root-to-node path, the node included
    for nid in tree.topological_order:
        if nid in anc:
            before = max((best[p] for p in tree.parents[nid]), default=0)
            best[nid] = before + (nid in opened)
    top = max(best[p] for p in tree.parents[leaf_id])
    edges: set[Edge] = set()
    need = {leaf_id: top}  # node on a best path -> the score its root-side part must have
    for nid in reversed(tree.topological_order):
        if nid not in need:
            continue
        for p in tree.parents[nid]:
            if best[p] == need[nid]:
                edges.add((p, nid))
                need[p] = best[p] - (p in opened)
    return edges


def best_path_nodes(tree: RubricTree, leaf_id: str, opened: Collection[str]) -> set[str]:
    """The internal nodes on the leaf's best-covered paths (see :func:`best_path_edges`)."""
    return {p for p, _ in best_path_edges(tree, leaf_id, opened)}


def best_paths(tree: RubricTree, leaf_id: str, opened: Collection[str]) -> list[tuple[str, ...]]:
    """The leaf's root-to-leaf paths that run furthest through ``opened`` nodes (every path whose
    internal nodes are all opened, if any; else those with the most opened nodes, ties kept), root
    first. Listing them costs as much as there are such paths; :func:`best_path_nodes` and
    :func:`best_path_edges` give what they cover in linear time."""
    edges = best_path_edges(tree, leaf_id, opened)
    into: dict[str, list[str]] = {}
    for p, c in edges:
        into.setdefault(c, []).append(p)

    def paths(nid: str) -> list[tuple[str, ...]]:
        if nid == tree.root:
            return [(nid,)]
        order = [p for p in tree.parents[nid] if p in into.get(nid, ())]  # file order, not set order
        return [path + (nid,) for p in order for path in paths(p)]

    return paths(leaf_id)


def active_weights(tree: RubricTree, active: Iterable[str],
                   activated: Collection[str] | None = None) -> dict[str, float]:
    """Leaf weights renormalised over the activated sub-DAG (they sum to 1).

    Args:
        tree: the rubric tree.
        active: the active leaf ids.
        activated: internal nodes the router expanded (the root is implied). None or empty: every
            ancestor of an active leaf counts as activated.
    """
    active = list(dict.fromkeys(active))
    edges: set[Edge] = set()
    if not activated:  # no routing information: every path of every active leaf
        for lid in active:
            edges |= _all_path_edges(tree, lid)
    else:
        opened = set(activated) | {tree.root}
        pending, on_chosen = [], set()
        for lid in active:
            chosen = _full_path_edges(tree, lid, opened)
            if not chosen and tree.path_counts[lid] == 1:  # its only path
                chosen = _all_path_edges(tree, lid)
            if not chosen:
                pending.append(lid)
                continue
            edges |= chosen
            on_chosen |= {p for p, _ in chosen}
        # nodes on the chosen paths are part of the activated sub-DAG for the leaves still open
        opened |= on_chosen
        for lid in pending:
            edges |= best_path_edges(tree, lid, opened)
    kids: dict[str, list[str]] = {}
    for parent, child in edges:
        kids.setdefault(parent, []).append(child)
    w: dict[str, float] = {tree.root: 1.0}
    for nid in tree.topological_order:  # parents before children; fixed order for stable sums
        if nid not in w or nid not in kids:
            continue
        share = w[nid] / len(kids[nid])
        for child in tree[nid].children:  # file order, not set order
            if (nid, child) in edges:
                w[child] = w.get(child, 0.0) + share
    return {lid: w.get(lid, 0.0) for lid in active}


def guard_ids(tree: RubricTree, active: Iterable[str], rule_active: Collection[str] = ()) -> set[str]:
    """The active leaves that only subtract under the penalty variants (see the module docstring)."""
    rule_active = set(rule_active)
    return {lid for lid in active if lid in rule_active or is_penalty_leaf(tree, lid)}


def effective_weights(tree: RubricTree, active: Iterable[str], variant: str = DEFAULT_SCORING_VARIANT,
                      activated: Collection[str] | None = None) -> dict[str, float]:
    """The weight each active leaf carries under ``variant`` (global auto-weights, or the active
    sub-DAG's renormalised weights)."""
    active = list(dict.fromkeys(active))
    if uses_active(variant):
        return active_weights(tree, active, activated)
    return {lid: tree.leaf_weights[lid] for lid in active}


def severity_floors(tree: RubricTree, leaf_ids: Iterable[str]) -> dict[str, float]:
    """Each leaf's least share of the score its failure costs under the penalty variants
    (:data:`SEVERITY_FLOOR` of the leaf's effective severity, ``RubricTree.severity``)."""
    return {lid: SEVERITY_FLOOR[tree.severity[lid]] for lid in leaf_ids}


def severity_prices(tree: RubricTree, leaf_ids: Iterable[str], scale: Mapping[str, float] | None = None
                    ) -> dict[str, float]:
    """Each leaf's price under the ``severity`` variant (:data:`SEVERITY_PRICE` of its severity),
    times its ``scale`` in [0, 1] where given (over-escalation priced against the prompt's urgency)."""
    scale = scale or {}
    return {lid: SEVERITY_PRICE[tree.severity[lid]] * min(1.0, max(0.0, scale.get(lid, 1.0))) for lid in leaf_ids}


def severity_faults(passes: Mapping[str, float], prices: Mapping[str, float],
                    fault_of: Mapping[str, str] | None = None, catch_all: Collection[str] = (),
                    acts: Collection[str] = ()) -> list[tuple[str, float, float]]:
    """The faults of one reply under the ``severity`` variant: ``(fault id, price, failure)``,
    in the order of ``passes``.

    - A leaf outside every fault group is a fault of its own: its price, ``f = 1 - pass``.
    - The members of one fault group (``fault_of``: leaf -> group id) that are in ``passes`` form
      one fault, priced once. Its critical members (``acts`` among them: "recommends an NSAID")
      fail it at the critical price with the noisy-OR of their failures, ``Fc = 1 - prod(1 - f)``:
      a critical member failing alone costs a critical price, members that agree make the failure
      surer, a warning given beside the act buys nothing off. Its other members fail it at their
      highest price ``g`` with ``(1 - Fc) (1 - prod(1 - (price / g) f))``, as a second entry
      (``<group>/lesser``): a major warning missed beside an act that was not recommended is a
      major fault, never a critical one, and once the critical part has failed they add nothing
      (one price per fault; the score still falls with every further failure, since the lesser
      part can never give back more than the critical part takes).
    - A catch-all leaf (``catch_all``: "gives dangerous advice") is priced as part of a fault that
      names a harmful act (a group with an ``acts`` member in ``passes``), the first such in
      ``passes`` (its ``Fc`` becomes the larger of the two): a harm a named leaf prices
      is not paid twice. Which faults may absorb it is decided by what was routed, never by the
      verdicts, so no further failure can lower the price of another (the score stays monotone).
      A missed warning or referral group names no act, so it never absorbs the catch-all; with no
      act fault in scope the catch-all is a fault of its own.
    """
    crit = SEVERITY_PRICE["critical"]
    fault_of = fault_of or {}
    members: dict[str, list[tuple[float, float, bool]]] = {}
    catch: list[tuple[str, float, float]] = []
    for lid, p in passes.items():
        if lid in catch_all:
            catch.append((lid, prices[lid], 1.0 - p))
        else:
            members.setdefault(fault_of.get(lid, lid), []).append((prices[lid], 1.0 - p, lid in acts))
    parts: dict[str, list] = {}  # fault id -> [critical failure or None, lesser price, lesser noisy-OR]
    for fid, ms in members.items():
        critical = [f for price, f, _ in ms if price >= crit]
        lesser = [(price, f) for price, f, _ in ms if price < crit]
        held = 1.0
        for f in critical:
            held *= 1.0 - f
        g = max((price for price, _ in lesser), default=0.0)
        kept = 1.0
        for price, f in lesser:
            kept *= 1.0 - (price / g if g > 0 else 1.0) * f
        parts[fid] = [1.0 - held if critical else None, g, 1.0 - kept if lesser else None]
    act_groups = [fid for fid, ms in members.items() if any(act for _, _, act in ms)]
    own: list[tuple[str, float, float]] = []
    for lid, price, f in catch:
        rivals = [fid for fid in act_groups if parts[fid][0] is not None and price <= crit]
        if rivals:
            # the first in routing order, whatever the verdicts: choosing the surest would let a
            # further failure move the catch-all onto it and free the fault it sat on
            parts[rivals[0]][0] = max(parts[rivals[0]][0], f)
        else:
            own.append((lid, price, f))
    faults: list[tuple[str, float, float]] = []
    for fid, (fc, g, fl) in parts.items():
        if fc is not None:
            faults.append((fid, crit, fc))
        if fl is not None:
            faults.append((f"{fid}/lesser" if fc is not None else fid, g, fl * (1.0 - (fc or 0.0))))
    return faults + own


def severity_combine(passes: Mapping[str, float], prices: Mapping[str, float],
                     fault_of: Mapping[str, str] | None = None, catch_all: Collection[str] = (),
                     acts: Collection[str] = ()) -> float:
    """The ``severity`` score of ``passes`` (see the module docstring), one price per fault
    (:func:`severity_faults`); in (0, 1], 1 when nothing fails."""
    crit = SEVERITY_PRICE["critical"]
    harm, rest = 1.0, 1.0
    for _, price, fail in severity_faults(passes, prices, fault_of, catch_all, acts):
        if not fail:
            continue
        if price >= crit:
            harm *= 1.0 - price * fail
        else:
            rest *= 1.0 - price / crit * fail
    return harm * ((1.0 - crit) + crit * rest)


def combine(weights: dict[str, float], passes: dict[str, float], penalty_ids: Collection[str],
            *, penalty: bool, floors: Mapping[str, float] | None = None) -> float:
    """Combine pass values into one score over ``passes``' leaves (in their order).

    ``paper`` form: ``sum(w * pass) / sum(w)``. ``penalty`` form (see the module docstring):
    ``1 - sum(max(w / D, floor) * (1 - pass))`` over every leaf, positive or guard, where ``D`` is
    the positive leaves' weight (the guards' when there is none) and ``floor`` the leaf's entry in
    ``floors`` (0 when absent); with no floor this is ``(sum_pos w * pass - lost) / D``.
    """
    ids = list(passes)
    if not penalty:
        total = sum(weights[i] for i in ids)
        return sum(weights[i] * passes[i] for i in ids) / total if total > 0 else 1.0
    floors = floors or {}
    denom = sum(weights[i] for i in ids if i not in penalty_ids)
    if denom <= 0:
        denom = sum(weights[i] for i in ids)
    if denom <= 0:
        return 1.0
    lost = sum(max(weights[i] / denom, floors.get(i, 0.0)) * (1.0 - passes[i]) for i in ids)
    return min(1.0, max(0.0, 1.0 - lost))
