"""Path queries of the scoring variants run in linear time (issue 39): a valid 83-node
diamond-shaped taxonomy (layers of two nodes, each linked to both nodes of the next) has 2**40
root-to-leaf paths, and listing them made ``score`` hang. The weights are now computed from the
edges on the chosen paths; on the packaged taxonomy they are exactly those of the old path
enumeration (kept below as the reference), on many routings."""

from __future__ import annotations

import random
from itertools import pairwise

from reward.scoring.variants import active_weights, best_path_nodes, best_paths, effective_weights
from reward.tree.graph import RubricTree
from reward.tree.loader import load_tree
from reward.tree.schema import Node


# ------------------------------------------------------------------ the old code, as the reference
def _old_paths(tree, leaf_id):
    if leaf_id == tree.root:
        return [(leaf_id,)]
    out = []
    for parent in tree.parents[leaf_id]:
        out.extend(p + (leaf_id,) for p in _old_paths(tree, parent))
    return out


def _old_best_paths(tree, leaf_id, opened):
    paths = _old_paths(tree, leaf_id)
    cover = [sum(n in opened for n in p[:-1]) for p in paths]
    return [p for p, c in zip(paths, cover) if c == max(cover)]


def _old_active_weights(tree, active, activated=None):
    active = list(dict.fromkeys(active))
    paths = {lid: _old_paths(tree, lid) for lid in active}
    edges = set()
    if not activated:
        chosen = paths
    else:
        opened = set(activated) | {tree.root}
        chosen, pending = {}, []
        for lid, ps in paths.items():
            full = [p for p in ps if all(n in opened for n in p[:-1])]
            if full or len(ps) == 1:
                chosen[lid] = full or ps
            else:
                pending.append(lid)
        opened |= {n for ps in chosen.values() for p in ps for n in p[:-1]}
        for lid in pending:
            chosen[lid] = _old_best_paths(tree, lid, opened)
    for ps in chosen.values():
        for p in ps:
            edges.update(pairwise(p))
    kids = {}
    for parent, child in edges:
        kids.setdefault(parent, []).append(child)
    w = {tree.root: 1.0}
    for nid in tree.topological_order:
        if nid not in w or nid not in kids:
            continue
        share = w[nid] / len(kids[nid])
        for child in tree[nid].children:
            if (nid, child) in edges:
                w[child] = w.get(child, 0.0) + share
    return {lid: w.get(lid, 0.0) for lid in active}


def _diamond(levels: int) -> RubricTree:
    """root -> {a1, b1} -> {a2, b2} -> ... -> {a<levels>, b<levels>} -> two leaves."""
    nodes = [Node(id="root", title="root", children=("a1", "b1"))]
    for i in range(1, levels + 1):
        kids = (f"a{i + 1}", f"b{i + 1}") if i < levels else ("leaf1", "leaf2")
        nodes += [Node(id=f"{x}{i}", title=f"{x}{i}", children=kids) for x in "ab"]
    nodes += [Node(id="leaf1", title="l1", criterion="Says hello."),
              Node(id="leaf2", title="l2", criterion="Says goodbye.", polarity="negative")]
    return RubricTree(nodes, "root")


def _routings(tree, rng, n):
    internal = [nid for nid, node in tree.nodes.items() if not node.is_leaf and nid != tree.root]
    leaves = [leaf.id for leaf in tree.leaves]
    for _ in range(n):
        active = rng.sample(leaves, rng.randint(1, min(40, len(leaves))))
        k = rng.choice([0, 1, 3, len(internal) // 4, len(internal) // 2])
        yield active, rng.sample(internal, k) if k else None


def test_the_packaged_taxonomy_gets_exactly_the_weights_of_the_path_enumeration():
    tree = load_tree()
    multi = [leaf.id for leaf in tree.leaves if tree.path_counts[leaf.id] > 1]
    assert multi, "the packaged taxonomy has leaves under several parents: the case that matters"
    rng = random.Random(39)
    for active, activated in _routings(tree, rng, 300):
        active = active + rng.sample(multi, min(3, len(multi)))
        assert active_weights(tree, active, activated) == _old_active_weights(tree, active, activated)
        opened = set(activated or ()) | {tree.root}
        for lid in multi:
            assert best_paths(tree, lid, opened) == _old_best_paths(tree, lid, opened)


def test_small_diamonds_agree_with_the_enumeration_on_every_routing():
    tree = _diamond(6)  # 2**6 paths per leaf: small enough to list
    assert tree.path_counts["leaf1"] == 2 ** 6
    rng = random.Random(7)
    for active, activated in _routings(tree, rng, 200):
        assert active_weights(tree, active, activated) == _old_active_weights(tree, active, activated)
        opened = set(activated or ()) | {tree.root}
        assert best_paths(tree, "leaf1", opened) == _old_best_paths(tree, "leaf1", opened)


def test_the_83_node_diamond_is_scored_without_listing_its_paths():
    tree = _diamond(40)
    assert len(tree.nodes) == 83 and tree.path_counts["leaf1"] == 2 ** 40
    # no routing information: every path counts, so the weights are the tree's auto-weights
    assert active_weights(tree, ["leaf1", "leaf2"]) == {"leaf1": 0.5, "leaf2": 0.5}
    # a routing that opened one side of every layer: one path of 42 edges is the best-covered one
    opened = {f"a{i}" for i in range(1, 41)}
    assert best_path_nodes(tree, "leaf1", opened | {"root"}) == opened | {"root"}
    assert effective_weights(tree, ["leaf1", "leaf2"], "severity", activated=opened) == {"leaf1": 0.5, "leaf2": 0.5}
