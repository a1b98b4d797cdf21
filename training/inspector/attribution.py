"""Which leaves explain a score, a group's advantages and a change between two runs.

Every figure here is a Shapley value (:mod:`training.inspector.shapley`) of the reward's own
rescoring (``reward.stages.rescore.Rescorer``, never a formula of ours), so the parts always add
up, whatever the scoring variant, and checks that play the same part share alike: five members of
one fault group that failed together, priced once, carry a fifth of the group's price each.

**Contribution** of a leaf (or rubric item) to one rollout's score: its Shapley value in the game
whose players are the checks that did not pass (``pass < 1``) and whose reference is every check
passing. The contributions of a rollout's checks add up to ``score - the score with every check
passing`` (1 under ``severity`` with no rubric items); a passing check's is 0. Leaves and rubric
items are split apart: the score is the mean (or one) of the tree and points scores
(``combine_scores``), so a leaf and an item never interact. **If flipped** is the older what-if,
``score - the score with that one verdict flipped`` (``Rescorer.flip_contributions``): under a
fault group one member of five failing changes nothing when flipped alone.

**Part** of a leaf in a rollout's score, relative to a set of rollouts of the same prompt (its
group; in a comparison, both runs' rollouts of the prompt): its Shapley value in the game whose
reference is each leaf's mean verdict over the set. A leaf whose verdict is the same in every
rollout of the set is no player and has part 0; under the linear variants the parts are each
leaf's linear deviation ``a * w * (pass - mean pass)``. A rollout's parts add up to its score minus
the score at the set's mean verdicts; what is left (the rubric items, leaves routed in some
rollouts only) is ``other``.

**Advantage** of a rollout: its score minus its group's mean (GRPO's advantage before the division
by the group's standard deviation). The leaves that drove it: the largest centred parts
``part_rl - mean_g part_l``; all of them plus ``other`` add up to the advantage.

**Share of the within-group variance** of leaf ``l``::

    share_l = sum_g sum_r (part_rl - mean_g part_l) (s_r - mean_g s) / sum_g sum_r (s_r - mean_g s)^2

over the scored rollouts of groups with at least two of them; the shares of all leaves plus
``other`` add up to 1.

**Share of the mean change** (compare): with ``D = mean_B s - mean_A s`` over the prompts scored in
both runs (each prompt's mean first), leaf ``l``'s share is ``(mean_B part_l - mean_A part_l) / D``
(parts relative to both runs' rollouts of the prompt, the same averaging); the shares plus
``other`` add up to 1. A leaf's **flipped** rollouts are the rollouts (paired by id) whose pass or
fail on it changed (now passes / now fails: a negative leaf that stops being met now passes);
when the runs share no ids, the net change in the number of rollouts of a prompt that pass it.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from training.inspector.shapley import shapley

__all__ = ["Scorable", "attach_contributions", "compare_groups", "group_view", "leaf_variance_shares", "pair_key",
           "reference_parts"]

TOLERANCE = 1e-6  # a record's score must be what its verdicts give (else it has no contributions)
MEMO_LIMIT = 200_000  # rescorings remembered at once (verdict patterns repeat within a group)


@dataclass
class Scorable:
    """One record made rescorable: the record, the reward's rescorer, the verdicts it was scored on
    and a memo of rescorings shared by the records of the same shape (routing, variant, items)."""

    record: Any  # RolloutScore
    rescorer: Any  # Rescorer
    leaves: dict[str, bool | float]
    items: list[bool | float]
    shape: tuple
    memo: dict = field(default_factory=dict, repr=False)
    seed: int = 0  # of the sampled orders, when there are too many players for the exact value

    def score(self, leaves: dict[str, bool | float], items: Sequence[bool | float]) -> float:
        key = (self.shape, tuple(leaves.values()), tuple(items))
        got = self.memo.get(key)
        if got is None:
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            again = self.rescorer.rescore(self.record, leaves, list(items))
            got = self.memo[key] = float(again) if again is not None else math.nan
        return got

    def leaf_split(self, reference: dict[str, bool | float]):
        """Shapley values of the leaves whose verdict differs from ``reference`` (leaf id ->
        verdict), the other leaves and the items at their own verdicts."""
        players = [lid for lid, v in self.leaves.items() if lid in reference and abs(float(v) - float(reference[lid])) > 1e-12]

        def value(coalition: frozenset[str]) -> float:
            return self.score({lid: v if lid in coalition or lid not in players else reference[lid]
                               for lid, v in self.leaves.items()}, self.items)

        return shapley(players, value, additive=self.rescorer.additive, seed=self.seed)

    def item_split(self, reference: Sequence[bool | float]):
        """Shapley values of the items (by index, as strings) whose verdict differs from ``reference``."""
        players = [str(k) for k, v in enumerate(self.items) if abs(float(v) - float(reference[k])) > 1e-12]

        def value(coalition: frozenset[str]) -> float:
            return self.score(self.leaves, [v if str(k) in coalition else reference[k]
                                            for k, v in enumerate(self.items)])

        return shapley(players, value, additive=self.rescorer.additive, seed=self.seed)


def _passing(verdict: bool | float, good: bool) -> bool | float:
    """The verdict of a passing check, in the verdict's own kind (yes/no or a probability)."""
    return good if isinstance(verdict, bool) else float(good)


def attach_contributions(rollouts: Sequence[Any], tree: Any, *, clip_below_zero: bool = False) -> int:
    """Set each rollout's ``contrib`` (leaf id -> contribution), ``item_contrib``, their flip values
    (``flip``, ``item_flip``) and ``orders`` (0: exact; else how many sampled orders) from its record,
    rescored on ``tree``; returns how many scored records could not be rescored (their score is not
    what their verdicts give, or their leaves are not in the tree), which get none."""
    from pydantic import ValidationError

    from reward.errors import RubricsTreeError
    from reward.stages.rescore import Rescorer
    from reward.stages.results import RolloutScore

    skipped = 0
    done: dict[tuple, tuple] = {}
    memos: dict[tuple, dict] = {}
    for r in rollouts:
        if r.score is None or not (r.rec.get("leaves") or r.rec.get("rubric_items")):
            continue
        try:
            # the shapes the viewer accepts beyond RolloutScore's own (not_applicable as dicts) do not score
            s = RolloutScore.model_validate({**r.rec, "id": r.id, "score": r.score, "not_applicable": [],
                                             "group": None})
            rescorer = Rescorer.of_record(tree, s, clip_below_zero=clip_below_zero)
            leaves, items = rescorer.verdicts(s)
            shape = (s.scoring_variant, s.combine, s.format_failure, tuple(sorted(s.routing.get("expanded") or ())),
                     tuple((lr.leaf_id, lr.reason) for lr in s.leaves if lr.failure is None),
                     tuple(it.points for it in s.rubric_items), s.routing.get("urgency"))
            one = Scorable(s, rescorer, leaves, items, shape, memos.setdefault(shape, {}),
                           seed=zlib.crc32(r.id.encode("utf-8")))
            key = (shape, tuple(leaves.values()), tuple(items))
            if key not in done:
                if abs(one.score(leaves, items) - s.score) > TOLERANCE:
                    raise ValueError("the record's score is not what its verdicts give")
                done[key] = _contributions(one, tree)
            r.contrib, r.item_contrib, r.flip, r.item_flip, r.orders = done[key]
            r.ctx = one
        except (ValidationError, RubricsTreeError, ValueError, KeyError):
            skipped += 1
    return skipped


def _contributions(one: Scorable, tree: Any) -> tuple:
    s = one.record
    if s.format_failure:  # its score is fixed, whatever the verdicts
        return {}, [None] * len(one.items), {}, [None] * len(one.items), 0
    flip, item_flip = one.rescorer.flip_contributions(s)
    passing = {lid: _passing(v, tree[lid].polarity == "positive") for lid, v in one.leaves.items()}
    leaves = one.leaf_split(passing)
    points = [it.points for it in s.rubric_items]
    items = one.item_split([_passing(v, p > 0) if p else v for v, p in zip(one.items, points)])
    contrib = {lid: leaves.values.get(lid, 0.0) for lid in one.leaves}
    item_contrib = [items.values.get(str(k), 0.0) for k in range(len(one.items))]
    return contrib, item_contrib, flip, item_flip, max(leaves.orders, items.orders)


def _groups(rollouts: Iterable[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in rollouts:
        out.setdefault(r.group, []).append(r)
    return out


def reference_parts(members: Sequence[Any]) -> list[dict[str, float]]:
    """Per rollout of ``members`` (scored, of one prompt), leaf id -> its part of the score relative
    to ``members`` (see the module docstring); empty for a rollout that could not be rescored."""
    key = tuple(r.id for r in members)
    cache = getattr(members[0], "cache", None) if members else None
    if cache is not None and key in cache:  # the group view and the variance shares ask for the same
        return cache[key]
    ctxs: list[Scorable | None] = [getattr(r, "ctx", None) for r in members]
    sums: dict[str, list[float]] = {}
    for c in ctxs:
        if c is not None:
            for lid, v in c.leaves.items():
                sums.setdefault(lid, []).append(float(v))
    ref = {lid: sum(v) / len(v) for lid, v in sums.items()}
    out = []
    for c in ctxs:
        if c is None:
            out.append({})
            continue
        split = c.leaf_split(ref).values
        out.append({lid: split.get(lid, 0.0) for lid in c.leaves})
    if cache is not None:
        cache[key] = out
    return out


def group_view(rollouts: Sequence[Any], top: int = 3) -> dict[str, dict[str, Any]]:
    """Per group: ``{"mean", "std", "n_scored", "rollouts": {id: {"advantage", "drivers": [(leaf,
    part deviation)], "other"}}}`` (see the module docstring); drivers largest first."""
    out: dict[str, dict[str, Any]] = {}
    for key, members in _groups(rollouts).items():
        scored = [r for r in members if r.score is not None]
        if not scored:
            out[key] = {"mean": None, "std": None, "n_scored": 0, "rollouts": {}}
            continue
        mean = sum(r.score for r in scored) / len(scored)
        std = math.sqrt(sum((r.score - mean) ** 2 for r in scored) / len(scored))
        ps = reference_parts(scored)
        ids = {lid for p in ps for lid in p}
        mean_p = {lid: sum(p.get(lid, 0.0) for p in ps) / len(ps) for lid in ids}
        view = {}
        for r, p in zip(scored, ps):
            dev = {lid: p.get(lid, 0.0) - mean_p[lid] for lid in ids}
            adv = r.score - mean
            drivers = sorted(((lid, d) for lid, d in dev.items() if abs(d) > 1e-12), key=lambda x: -abs(x[1]))
            view[r.id] = {"advantage": adv, "drivers": drivers[:top], "other": adv - sum(dev.values())}
        out[key] = {"mean": mean, "std": std, "n_scored": len(scored), "rollouts": view}
    return out


def leaf_variance_shares(rollouts: Sequence[Any]) -> tuple[dict[str, float], float, float]:
    """``({leaf id: share}, other share, within-group variance)`` (see the module docstring); the
    variance is the mean squared deviation from the group mean over the counted rollouts."""
    num: dict[str, float] = {}
    var = resid = 0.0
    n = 0
    for members in _groups(rollouts).values():
        scored = [r for r in members if r.score is not None]
        if len(scored) < 2:
            continue
        mean_s = sum(r.score for r in scored) / len(scored)
        ps = reference_parts(scored)
        ids = {lid for p in ps for lid in p}
        mean_p = {lid: sum(p.get(lid, 0.0) for p in ps) / len(ps) for lid in ids}
        for r, p in zip(scored, ps):
            d = r.score - mean_s
            var += d * d
            n += 1
            lin = 0.0
            for lid in ids:
                dp = p.get(lid, 0.0) - mean_p[lid]
                num[lid] = num.get(lid, 0.0) + dp * d
                lin += dp
            resid += (d - lin) * d
    if var <= 1e-12:
        return {}, 0.0, 0.0
    return {k: v / var for k, v in num.items()}, resid / var, var / n


def pair_key(group: str) -> str:
    """The key two runs' groups are paired on: a trainer record's ``step<N>:`` prefix dropped, so
    two steps of one run compare prompt by prompt."""
    return re.sub(r"^step\d+:", "", group)


def _passes(r: Any) -> dict[str, bool]:
    """Leaf id -> whether the check passed the rollout (pass value >= 0.5: a positive leaf met, a
    negative leaf not met), for the leaves with a verdict."""
    out = {}
    for lf in r.leaves:
        if lf.get("failure"):
            continue
        passed = lf.get("passed")
        if isinstance(passed, (int, float)) and not isinstance(passed, bool):
            out[lf["leaf_id"]] = passed >= 0.5
        else:
            out[lf["leaf_id"]] = bool(lf.get("met")) != (lf.get("polarity") == "negative")
    return out


def compare_groups(a: Any, b: Any) -> dict[str, Any]:
    """Prompts scored in both runs: per prompt the mean scores and, per leaf, its share of the
    mean change, its part change and the rollouts whose verdict flipped; and the same over all
    prompts (``leaves``), leaves ranked by the size of their share (see the module docstring)."""
    ga = {pair_key(k): v for k, v in _groups(a.rollouts).items()}
    gb = {pair_key(k): v for k, v in _groups(b.rollouts).items()}
    prompts, total = [], {}
    for key in sorted(ga.keys() & gb.keys()):
        sa = [r for r in ga[key] if r.score is not None]
        sb = [r for r in gb[key] if r.score is not None]
        if not sa or not sb:
            prompts.append({"group": key, "a": None, "b": None, "leaves": []})
            continue
        ma, mb = sum(r.score for r in sa) / len(sa), sum(r.score for r in sb) / len(sb)
        pooled = reference_parts(sa + sb)  # parts relative to both runs' rollouts of the prompt
        pa, pb = pooled[:len(sa)], pooled[len(sa):]
        ids = {lid for p in pa + pb for lid in p} | {lid for r in sa + sb for lid in _passes(r)}
        flips = _flips(ga[key], gb[key])
        leaves = {}
        for lid in ids:
            d = sum(p.get(lid, 0.0) for p in pb) / len(pb) - sum(p.get(lid, 0.0) for p in pa) / len(pa)
            up, down = flips.get(lid, (0, 0))
            leaves[lid] = {"part_change": d, "up": up, "down": down, "pass_a": _rate(sa, lid), "pass_b": _rate(sb, lid)}
            t = total.setdefault(lid, {"part_change": 0.0, "up": 0, "down": 0})
            t["part_change"] += d
            t["up"] += up
            t["down"] += down
        prompts.append({"group": key, "a": ma, "b": mb, "leaves": leaves})
    done = [p for p in prompts if p["a"] is not None]
    delta = sum(p["b"] - p["a"] for p in done) / len(done) if done else None
    for p in done:
        dp = p["b"] - p["a"]
        p["leaves"] = _ranked(p["leaves"], dp, 1)
    for p in prompts:
        if p["a"] is None:
            p["leaves"] = []
    overall = _ranked(total, delta, len(done) or 1)
    other = None if not delta else 1.0 - sum(x["share"] for x in overall if x["share"] is not None)
    prompts.sort(key=lambda p: -abs(p["b"] - p["a"]) if p["a"] is not None else 0.0)
    return {"prompts": prompts, "delta": delta, "leaves": overall, "other": other, "n_prompts": len(done)}


def _rate(members: Sequence[Any], lid: str) -> float | None:
    """The share of ``members`` that pass leaf ``lid`` (None: none was judged on it)."""
    got = [ok for r in members for k, ok in _passes(r).items() if k == lid]
    return sum(got) / len(got) if got else None


def _ranked(leaves: dict[str, dict[str, Any]], delta: float | None, n: int) -> list[dict[str, Any]]:
    out = []
    for lid, x in leaves.items():
        change = x["part_change"] / n
        share = change / delta if delta and abs(delta) > 1e-12 else None
        if abs(change) < 1e-12 and not x["up"] and not x["down"]:
            continue
        out.append({**x, "leaf_id": lid, "part_change": change, "share": share})
    out.sort(key=lambda x: (-abs(x["share"]) if x["share"] is not None else 0.0, -abs(x["part_change"]),
                            -(x["up"] + x["down"])))
    return out


def _flips(a: Sequence[Any], b: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """Leaf id -> (rollouts that now pass it, rollouts that now fail it): paired by id, or the net
    change in the count when the runs share no rollout id."""
    by_a, by_b = {r.id: _passes(r) for r in a}, {r.id: _passes(r) for r in b}
    out: dict[str, list[int]] = {}
    common = by_a.keys() & by_b.keys()
    if common:
        for rid in common:
            for lid in by_a[rid].keys() & by_b[rid].keys():
                x, y = by_a[rid][lid], by_b[rid][lid]
                if x != y:
                    c = out.setdefault(lid, [0, 0])
                    c[0 if y else 1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}
    count_a: dict[str, int] = {}
    count_b: dict[str, int] = {}
    for m in by_a.values():
        for lid, v in m.items():
            count_a[lid] = count_a.get(lid, 0) + v
    for m in by_b.values():
        for lid, v in m.items():
            count_b[lid] = count_b.get(lid, 0) + v
    res = {}
    for lid in count_a.keys() | count_b.keys():
        d = count_b.get(lid, 0) - count_a.get(lid, 0)
        if d:
            res[lid] = (max(d, 0), max(-d, 0))
    return res
