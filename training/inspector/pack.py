"""Pack runs into the page's compact JSON: every string once, in a table ``S``, and arrays of
indices and rounded numbers (the layout is documented at the top of ``page.html``'s script)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from math import isfinite
from typing import Any

from reward.scoring.variants import uses_severity
from training.inspector.attribution import compare_groups, group_view, leaf_variance_shares, pair_key
from training.inspector.data import MONITOR_KEYS, Rollout, Run, leaf_counts, not_applicable, settings_differences

KIND_INTERNAL, KIND_POSITIVE, KIND_NEGATIVE = 0, 1, 2


def _mean_abs(xs: Sequence[float]) -> float | None:
    return sum(abs(x) for x in xs) / len(xs) if xs else None


def _num(x: Any, nd: int = 4) -> float | None:
    t = type(x)
    if t is float:  # the common case first: ~1M calls on a 10,000-rollout file
        return round(x, nd) if isfinite(x) else None
    if t is int:
        return float(x)
    if t is bool or not isinstance(x, (int, float)):
        return None
    return _num(float(x), nd)


def _tri(x: Any) -> int:
    return -1 if x is None else int(bool(x))


class Packer:
    """Builds the string table and the node table while packing rollouts."""

    def __init__(self, tree: Any = None, *, text_limit: int | None = None) -> None:
        self.tree = tree
        self.text_limit = text_limit
        self.strings: list[str] = []
        self._sid: dict[str, int] = {}
        self.nodes: list[list[Any]] = []
        self._nid: dict[str, int] = {}
        self.groups: list[str] = []
        self._gid: dict[str, int] = {}
        if tree is not None:
            for nid in tree.topological_order:
                self.node(nid)
            for nid in tree.topological_order:  # children once every node has an index
                self.nodes[self._nid[nid]][6] = [self._nid[c] for c in tree[nid].children]

    def s(self, text: str | None) -> int:
        if text is None:
            return -1
        i = self._sid.get(text)
        if i is None:
            i = self._sid[text] = len(self.strings)
            self.strings.append(text)
        return i

    def node(self, node_id: str, title: str | None = None, polarity: str | None = None) -> int:
        """The node table's index of ``node_id`` (added, from the tree or the record, when new):
        ``[id, title, kind, severity, macro, criterion, children]``."""
        i = self._nid.get(node_id)
        if i is not None:
            return i
        i = self._nid[node_id] = len(self.nodes)
        t = self.tree
        if t is not None and node_id in t:
            n = t[node_id]
            kind = KIND_INTERNAL if not n.is_leaf else KIND_POSITIVE if n.polarity == "positive" else KIND_NEGATIVE
            macros = [m for m in t.macro_capabilities if m == node_id or m in t.ancestors(node_id)]
            self.nodes.append([self.s(node_id), self.s(n.title), kind, self.s(t.severity.get(node_id)), -1,
                               self.s(n.criterion), []])
            if macros and macros[0] != node_id:
                self.nodes[i][4] = self.node(macros[0])
            elif macros:
                self.nodes[i][4] = i
        else:  # not in the taxonomy given (another tree): shown flat, by what the record says
            kind = KIND_NEGATIVE if polarity == "negative" else KIND_POSITIVE
            self.nodes.append([self.s(node_id), self.s(title or node_id), kind, -1, -1, -1, []])
        return i

    def group(self, key: str) -> int:
        i = self._gid.get(key)
        if i is None:
            i = self._gid[key] = len(self.groups)
            self.groups.append(key)
        return i

    def text(self, text: str) -> str:
        lim = self.text_limit
        if lim is None or len(text) <= lim:
            return text
        return text[:lim] + f"\n[… {len(text) - lim} more characters cut by --text-limit]"

    def faults(self, r: Rollout) -> list[list[Any]]:
        """The fault groups (``faults:`` of the taxonomy) the rollout failed, each as one line:
        ``[idS, titleS, summed contribution, [node, contribution]*]`` of its failed members."""
        t = self.tree
        if t is None or not r.contrib or r.ctx is None or not uses_severity(r.ctx.record.scoring_variant):
            return []  # only the severity variant prices a group once
        by: dict[str, list[tuple[str, float]]] = {}
        for lf in r.leaves:
            lid = lf["leaf_id"]
            passed = lf.get("passed")
            failed = isinstance(passed, (int, float)) and passed < 0.5 and not lf.get("failure")
            if lid in t and t[lid].id in t.fault_of and lid in r.contrib and (failed or r.contrib[lid]):
                by.setdefault(t.fault_of[t[lid].id], []).append((lid, r.contrib[lid]))
        out = []
        for fid, members in by.items():
            members.sort(key=lambda m: m[1])
            out.append([self.s(fid), self.s(t.faults[fid].title), _num(sum(c for _, c in members)),
                        [x for lid, c in members for x in (self.node(lid), _num(c))]])
        out.sort(key=lambda f: f[2] if f[2] is not None else 0.0)
        return out

    def rollout(self, r: Rollout, view: dict[str, Any] | None = None) -> list[Any]:
        rec = r.rec
        leaves: list[Any] = []
        for lf in r.leaves:
            lid = lf["leaf_id"]
            leaves += [self.node(lid, lf.get("title"), lf.get("polarity")), _tri(lf.get("met")),
                       _num(lf.get("p_yes"), 3), _num(lf.get("passed"), 3), _num(lf.get("weight"), 5),
                       self.s(str(lf.get("reason") or "")), self.s(lf.get("failure")),
                       _num(r.contrib[lid]) if lid in r.contrib else None,
                       _num(r.flip[lid]) if lid in r.flip else None]
        nodes: list[Any] = []
        for nid, v in (rec.get("nodes") or {}).items():
            if isinstance(v, dict):
                nodes += [self.node(nid), _num(v.get("score")), _num(v.get("weight"), 5)]
        items: list[Any] = []
        for k, it in enumerate(x for x in rec.get("rubric_items") or [] if isinstance(x, dict)):
            items += [self.s(str(it.get("criterion", ""))), _num(it.get("points"), 2), _tri(it.get("met")),
                      _num(it.get("p_yes"), 3), self.s(it.get("failure")),
                      _num(r.item_contrib[k]) if k < len(r.item_contrib) else None,
                      _num(r.item_flip[k]) if k < len(r.item_flip) else None]
        na: list[Any] = []
        for lid, why in not_applicable(rec):
            na += [self.node(lid), self.s(why)]
        conv: list[int] = []
        for m in r.prompt:
            conv += [self.s(m["role"]), self.s(self.text(m["content"]))]
        user = [m["content"] for m in r.prompt if m["role"] == "user"] or [m["content"] for m in r.prompt] or [""]
        fails = [str(f) for f in rec.get("failures") or []]
        reason = ""
        if r.score is None:
            reason = fails[0] if fails else "unscored"
        elif rec.get("format_failure"):
            reason = "format failure (unclosed <think>)"
        return [self.s(r.id), self.group(r.group), self.s(self.text(user[-1])), conv,
                self.s(self.text(r.completion)), _num(r.score), _num(rec.get("tree_score")),
                _num(rec.get("points_score")), r.rank if r.rank is not None else None, r.group_size,
                self.s(reason), self.s(str(rec.get("feedback") or "")), leaves, nodes, items, na,
                [self.s(f) for f in fails[1:10]], self.s(str(rec.get("scoring_variant") or "")),
                _num((view or {}).get("advantage")),
                [x for lid, d in (view or {}).get("drivers", []) for x in (self.node(lid), _num(d))],
                _num((view or {}).get("other")), r.orders, self.faults(r)]

    def run(self, run: Run) -> dict[str, Any]:
        counts = leaf_counts(run.rollouts)
        shares, other, var = leaf_variance_shares(run.rollouts)
        groups = group_view(run.rollouts)
        stats = [[self.node(lid), c["routed"], c["met"], c["failed"], c["uncertain"], c["errors"], c["na"],
                  _num(shares.get(lid, 0.0)),
                  _num(_mean_abs([r.contrib[lid] for r in run.rollouts if lid in r.contrib]))]
                 for lid, c in counts.items()]
        scored = [r.score for r in run.rollouts if r.score is not None]
        rows = [self.rollout(r, groups[r.group]["rollouts"].get(r.id)) for r in run.rollouts]
        G = [[self.group(k), g["n_scored"], _num(g["mean"]), _num(g["std"])] for k, g in groups.items()]
        return {"name": run.name, "R": rows, "LS": stats, "G": G,
                "other": _num(other), "var": _num(var, 6), "n": len(run.rollouts), "scored": len(scored),
                "mean": _num(sum(scored) / len(scored)) if scored else None,
                "groups": len(groups), "unexplained": run.unexplained,
                "variant": ", ".join(sorted({str(r.rec.get("scoring_variant")) for r in run.rollouts
                                             if r.rec.get("scoring_variant")})),
                "settings": run.settings, "warnings": run.warnings,
                "estimated": sum(1 for r in run.rollouts if r.orders),
                "M": [[m.get("step"), m.get("rank"), *[_num(m.get(k)) for k in MONITOR_KEYS]] for m in run.monitors],
                "ML": [_num(run.monitor_limits.get(k)) for k in MONITOR_KEYS] if run.monitors else []}

    def _pair_group(self, run: Run, key: str) -> str:
        """The first run's own group id of a compare pair key (the page finds its rollouts by it)."""
        return next((r.group for r in run.rollouts if pair_key(r.group) == key), key)

    def pack(self, runs: list[Run], *, title: str, note: str | None,
             compare: dict[str, Any] | None) -> dict[str, Any]:
        packed = [self.run(r) for r in runs]
        data: dict[str, Any] = {
            "v": 1, "title": title, "note": note or "", "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "runs": packed, "N": self.nodes,
            "root": self._nid.get(self.tree.root, -1) if self.tree is not None else -1,
            "macros": [self._nid[m] for m in self.tree.macro_capabilities] if self.tree is not None else [],
            "tree": f"{self.tree.name} ({len(self.tree.leaves)} leaves)" if self.tree is not None else "",
            "MK": list(MONITOR_KEYS),
        }
        if compare is not None:
            def leaves(xs: list[dict[str, Any]]) -> list[list[Any]]:
                return [[self.node(x["leaf_id"]), _num(x["share"]), _num(x["part_change"]), x["up"], x["down"],
                         _num(x.get("pass_a"), 3), _num(x.get("pass_b"), 3)] for x in xs]

            data["C"] = [[self.group(self._pair_group(runs[0], g["group"])), _num(g["a"]), _num(g["b"]),
                          leaves(g["leaves"]), self.group(self._pair_group(runs[1], g["group"]))]
                         for g in compare["prompts"]]
            data["CL"] = leaves(compare["leaves"])
            data["CD"] = {"delta": _num(compare["delta"]), "other": _num(compare["other"]),
                          "n": compare["n_prompts"],
                          "settings_diff": settings_differences(runs[0].settings, runs[1].settings)}
        data["S"] = self.strings
        data["nG"] = len(self.groups)
        return data


def build_data(runs: Sequence[Run], tree: Any = None, *, title: str = "RubricsTree rollout inspector",
               note: str | None = None, text_limit: int | None = None) -> dict[str, Any]:
    """The page's JSON: a string table ``S`` and arrays that index it (see ``page.html``)."""
    return Packer(tree, text_limit=text_limit).pack(list(runs), title=title, note=note,
                                                     compare=compare_groups(runs[0], runs[1]) if len(runs) > 1 else None)
