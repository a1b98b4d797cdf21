"""Under the ``severity`` variant no further failure raises the score: on one routing (what a GRPO
group shares), turning any passing leaf into a failing one never scores higher, whichever fault
groups, acts and catch-all are routed. Hard verdicts and soft ones (a pass value lowered); seeded
random routings over the shipped taxonomy's fault groups. Tolerance abs 1e-12 (exact arithmetic
up to float rounding of a product of a few dozen factors)."""

from __future__ import annotations

import random

import pytest

from reward.scoring import score_tree
from reward.tree import load_tree


@pytest.fixture(scope="module")
def tree():
    return load_tree()


def _routing(tree, rng):
    groups = list(tree.faults.values())
    ids = {m for g in rng.sample(groups, 3) for m in g.members}
    ids |= set(rng.sample([leaf.id for leaf in tree.leaves], 6))
    ids |= {leaf.id for leaf in tree.leaves if leaf.catch_all}
    return sorted(ids)


def _met(tree, lid, passes: float) -> float:
    return passes if tree[lid].polarity == "positive" else 1.0 - passes


@pytest.mark.parametrize("soft", [False, True])
def test_a_further_failure_never_raises_the_score(tree, soft):
    rng = random.Random(11 if soft else 7)
    checked = 0
    for _ in range(300):
        ids = _routing(tree, rng)
        passes = {lid: (rng.random() if soft else float(rng.random() < 0.6)) for lid in ids}
        before = score_tree(tree, {lid: _met(tree, lid, p) for lid, p in passes.items()}).score
        for lid in ids:
            if passes[lid] == 0.0:
                continue
            worse = dict(passes, **{lid: passes[lid] * rng.random() if soft else 0.0})
            after = score_tree(tree, {k: _met(tree, k, p) for k, p in worse.items()}).score
            assert after <= before + 1e-12, (lid, passes, before, after)
            checked += 1
    assert checked > 1000
