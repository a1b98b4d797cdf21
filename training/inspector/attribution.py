"""Which leaves explain a score, a group's advantages and a change between two runs.

**Contribution** of a leaf (or rubric item) to one rollout's score, under every scoring variant:
the score minus the score the reward gives the same rollout with that one verdict flipped
(``reward.stages.rescore.Rescorer.flip_contributions``: the reward's own rescoring, never a formula
of ours). A passing leaf's contribution is what its pass is worth (>= 0), a failing leaf's is
minus what its failure costs (<= 0). Under the linear variants (``paper``, ``active``) the
contributions of a rollout's leaves add up to ``a * (2 * tree score - 1)`` (``a``: the tree's
share of the score: 1, 1/2 under ``combine: mean`` with rubric items); under ``severity`` and the
penalty variants they need not add up to anything, since a failure's cost depends on the others.

**Part** of a leaf in a rollout's score, relative to a set of rollouts of the same prompt (its
group; in a comparison, both runs' rollouts of the prompt): the score minus the score the reward
gives the rollout with that leaf's verdict set to the set's mean verdict (rescored the same way).
A leaf whose verdict is the same in every rollout of the set has part 0 in all of them, whatever
the variant; under the linear variants the parts are exactly each leaf's linear deviation
``a * w * (pass - mean pass)``, so the statistics below reduce to the usual linear ones; under
the others they are each verdict's own effect, and what is left over (the interplay of failures,
the rubric items) is shown as ``other``.

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
``other`` add up to 1. A leaf's **flipped** rollouts are the rollouts (paired by id) whose verdict
on it changed; when the runs share no ids, the net change in the number of rollouts of a prompt
that meet it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["attach_contributions", "compare_groups", "group_view", "leaf_variance_shares", "pair_key",
           "reference_parts"]

TOLERANCE = 1e-6  # a record's score must be what its verdicts give (else it has no contributions)


def attach_contributions(rollouts: Sequence[Any], tree: Any, *, clip_below_zero: bool = False) -> int:
    """Set each rollout's ``contrib`` (leaf id -> contribution) and ``item_contrib`` from its record,
    rescored on ``tree``; returns how many scored records could not be rescored (their score is not
    what their verdicts give, or their leaves are not in the tree), which get none."""
    from pydantic import ValidationError

    from reward.errors import RubricsTreeError
    from reward.stages.rescore import Rescorer
    from reward.stages.results import RolloutScore

    skipped = 0
    memo: dict[tuple, tuple[dict[str, float], list[float | None]]] = {}
    for r in rollouts:
        if r.score is None or not (r.rec.get("leaves") or r.rec.get("rubric_items")):
            continue
        try:
            # the shapes the viewer accepts beyond RolloutScore's own (not_applicable as dicts) do not score
            s = RolloutScore.model_validate({**r.rec, "id": r.id, "score": r.score, "not_applicable": [],
                                             "group": None})
            rescorer = Rescorer.of_record(tree, s, clip_below_zero=clip_below_zero)
            leaves, items = rescorer.verdicts(s)
            key = (s.scoring_variant, s.combine, tuple(sorted(s.routing.get("expanded") or ())),
                   tuple(sorted((lr.leaf_id, lr.reason) for lr in s.leaves)), tuple(sorted(leaves.items())),
                   tuple(items), tuple(it.points for it in s.rubric_items))
            if key not in memo:
                again = rescorer.rescore(s, leaves, items)
                if again is None or abs(again - s.score) > TOLERANCE:
                    raise ValueError("the record's score is not what its verdicts give")
                memo[key] = rescorer.flip_contributions(s)
            r.contrib, r.item_contrib = memo[key]
            r.ctx = (s, rescorer, leaves, items)
        except (ValidationError, RubricsTreeError, ValueError, KeyError):
            skipped += 1
    return skipped


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
    ctxs = [getattr(r, "ctx", None) for r in members]
    sums: dict[str, list[float]] = {}
    for c in ctxs:
        if c is not None:
            for lid, v in c[2].items():
                sums.setdefault(lid, []).append(float(v))
    ref = {lid: sum(v) / len(v) for lid, v in sums.items()}
    out = []
    for r, c in zip(members, ctxs):
        if c is None:
            out.append({})
            continue
        s, rescorer, leaves, items = c
        part = {}
        for lid, v in leaves.items():
            if abs(float(v) - ref[lid]) < 1e-12:
                part[lid] = 0.0
                continue
            again = rescorer.rescore(s, {**leaves, lid: ref[lid]}, items)
            part[lid] = r.score - again if again is not None else 0.0
        out.append(part)
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


def _met(r: Any) -> dict[str, bool]:
    return {lf["leaf_id"]: bool(lf.get("met")) for lf in r.leaves if not lf.get("failure")}


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
        ids = {lid for p in pa + pb for lid in p} | {lid for r in sa + sb for lid in _met(r)}
        flips = _flips(ga[key], gb[key])
        leaves = {}
        for lid in ids:
            d = sum(p.get(lid, 0.0) for p in pb) / len(pb) - sum(p.get(lid, 0.0) for p in pa) / len(pa)
            up, down = flips.get(lid, (0, 0))
            rate_a = _rate(sa, lid)
            rate_b = _rate(sb, lid)
            leaves[lid] = {"part_change": d, "up": up, "down": down, "met_a": rate_a, "met_b": rate_b}
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
    got = [m for r in members for k, m in _met(r).items() if k == lid]
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
    """Leaf id -> (rollouts now meeting it, rollouts no longer meeting it): paired by id, or the net
    change in the count when the runs share no rollout id."""
    by_a, by_b = {r.id: _met(r) for r in a}, {r.id: _met(r) for r in b}
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
