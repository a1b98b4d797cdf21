"""Compare two taxonomies: added, removed, moved and changed leaves and nodes, and weight changes.

A leaf is *moved* when it is in both trees with a different set of parents, *changed* when a field
a judge or router reads differs (title, definition, criterion, polarity, grounding, tags,
always_on). Weight changes list every leaf in both trees whose auto-weight moved by more than
``eps`` (adding a sibling anywhere above a leaf dilutes it). ``unchanged_criteria`` counts the
leaves whose criterion is identical: their cached verdicts stay valid, because the verdict
cache key holds the criterion text, not the taxonomy.
"""

from __future__ import annotations

from typing import Any

from reward.router.base import tree_fingerprint
from reward.tree.graph import RubricTree

FIELDS = ("title", "definition", "criterion", "polarity", "grounding", "tags", "always_on")


def _info(tree: RubricTree, version: int | None) -> dict[str, Any]:
    return {"name": tree.name, "source": tree.source, "version": version, "leaves": len(tree.leaves),
            "nodes": len(tree.nodes), "fingerprint": tree_fingerprint(tree)[:16]}


def diff_trees(a: RubricTree, b: RubricTree, *, version_a: int | None = None, version_b: int | None = None,
               eps: float = 1e-12) -> dict[str, Any]:
    """The differences from ``a`` to ``b`` as a JSON-ready dict."""
    la = {n.id for n in a.leaves}
    lb = {n.id for n in b.leaves}
    ia = set(a.nodes) - la
    ib = set(b.nodes) - lb
    wa, wb = a.weights, b.weights

    def parents(t: RubricTree, nid: str) -> list[str]:
        return sorted(t.parents[nid])

    moved, changed = [], []
    for nid in sorted(set(a.nodes) & set(b.nodes)):
        if parents(a, nid) != parents(b, nid):
            moved.append({"id": nid, "leaf": nid in lb, "from": parents(a, nid), "to": parents(b, nid)})
        diffs = [f for f in FIELDS if getattr(a[nid], f) != getattr(b[nid], f)]
        if a[nid].is_leaf != b[nid].is_leaf:
            diffs.insert(0, "kind")
        if diffs:
            changed.append({"id": nid, "leaf": nid in lb, "fields": diffs})
    weights = sorted(({"id": nid, "before": wa[nid], "after": wb[nid], "delta": wb[nid] - wa[nid]}
                      for nid in la & lb if abs(wb[nid] - wa[nid]) > eps), key=lambda d: (-abs(d["delta"]), d["id"]))
    same_criterion = sum(1 for nid in la & lb if a[nid].criterion == b[nid].criterion)
    return {
        "a": _info(a, version_a),
        "b": _info(b, version_b),
        "added_leaves": [{"id": nid, "parents": parents(b, nid), "weight": wb[nid]} for nid in sorted(lb - la)],
        "removed_leaves": [{"id": nid, "parents": parents(a, nid), "weight": wa[nid]} for nid in sorted(la - lb)],
        "moved_leaves": [m for m in moved if m["leaf"]],
        "changed_leaves": [c for c in changed if c["leaf"]],
        "added_nodes": [{"id": nid, "parents": parents(b, nid)} for nid in sorted(ib - ia)],
        "removed_nodes": [{"id": nid, "parents": parents(a, nid)} for nid in sorted(ia - ib)],
        "moved_nodes": [m for m in moved if not m["leaf"]],
        "changed_nodes": [c for c in changed if not c["leaf"]],
        "weight_changes": weights,
        "unchanged_criteria": same_criterion,
        "identical": tree_fingerprint(a) == tree_fingerprint(b),
    }


def format_diff(d: dict[str, Any], limit: int = 20) -> str:
    """A short human-readable rendering of :func:`diff_trees`."""
    def head(side: str) -> str:
        i = d[side]
        return f"{i['name']} v{i['version']} ({i['leaves']} leaves, {i['source']})"

    out = [f"A: {head('a')}", f"B: {head('b')}"]
    if d["identical"]:
        return "\n".join(out + ["identical"])
    for key, sign in (("added_leaves", "+"), ("removed_leaves", "-")):
        for x in d[key]:
            out.append(f"{sign} leaf {x['id']} (under {', '.join(x['parents']) or '-'}, weight {x['weight']:.5f})")
    for key, sign in (("added_nodes", "+"), ("removed_nodes", "-")):
        for x in d[key]:
            out.append(f"{sign} node {x['id']} (under {', '.join(x['parents']) or '-'})")
    for x in d["moved_leaves"] + d["moved_nodes"]:
        out.append(f"~ moved {x['id']}: {', '.join(x['from'])} -> {', '.join(x['to'])}")
    for x in d["changed_leaves"] + d["changed_nodes"]:
        out.append(f"~ changed {x['id']}: {', '.join(x['fields'])}")
    ws = d["weight_changes"]
    out.append(f"weight changes: {len(ws)} leaves" + (f" (largest {limit} shown)" if len(ws) > limit else ""))
    for x in ws[:limit]:
        out.append(f"  {x['id']}: {x['before']:.5f} -> {x['after']:.5f} ({x['delta']:+.5f})")
    out.append(f"leaves with an unchanged criterion (cached verdicts still valid): {d['unchanged_criteria']}")
    return "\n".join(out)
