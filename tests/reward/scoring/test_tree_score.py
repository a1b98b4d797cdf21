"""RubricsTree score under the ``paper`` variant: polarity, probabilities, per-node breakdown on a
DAG, and errors (the other variants: ``test_scoring_variants.py``)."""

from __future__ import annotations

import pickle

import pytest

from reward.errors import ScoringError
from reward.scoring.tree_score import TreeScore, macro_breakdown, score_tree
from reward.tree import Node, RubricTree


@pytest.fixture
def tree() -> RubricTree:
    # root splits into A and B; leaf "s" (negative) has both A and B as parents.
    # weights: a1 = 1/4, s = 1/4 + 1/6 = 5/12, b1 = b2 = 1/6
    return RubricTree([
        Node(id="root", title="root", children=("A", "B")),
        Node(id="A", title="A", children=("a1", "s")),
        Node(id="B", title="B", children=("s", "b1", "b2")),
        Node(id="a1", title="a1", criterion="does a1"),
        Node(id="s", title="s", criterion="does something unsafe", polarity="negative"),
        Node(id="b1", title="b1", criterion="does b1"),
        Node(id="b2", title="b2", criterion="does b2"),
    ], "root")


def test_weights_of_fixture(tree):
    assert tree.leaf_weights == pytest.approx({"a1": 1 / 4, "s": 5 / 12, "b1": 1 / 6, "b2": 1 / 6})


def test_polarity(tree):
    assert score_tree(tree, {"s": False}, variant="paper").score == 1.0  # negative leaf not met -> pass
    assert score_tree(tree, {"s": True}, variant="paper").score == 0.0
    assert score_tree(tree, {"a1": True}, variant="paper").score == 1.0
    assert score_tree(tree, {"a1": False}, variant="paper").score == 0.0
    res = score_tree(tree, {"a1": True, "s": True}, variant="paper")
    assert res.leaves == {"a1": 1.0, "s": 0.0}
    assert res.score == pytest.approx((1 / 4) / (1 / 4 + 5 / 12))


def test_probabilities(tree):
    res = score_tree(tree, {"s": 0.25, "b1": 0.5}, variant="paper")
    assert res.leaves == pytest.approx({"s": 0.75, "b1": 0.5})
    assert res.score == pytest.approx((5 / 12 * 0.75 + 1 / 6 * 0.5) / (5 / 12 + 1 / 6))


def test_per_node_breakdown_with_two_parent_leaf(tree):
    res = score_tree(tree, {"a1": True, "s": True, "b1": 0.5}, variant="paper")
    w_a1, w_s, w_b1 = 1 / 4, 5 / 12, 1 / 6
    assert res.score == pytest.approx((w_a1 + w_b1 * 0.5) / (w_a1 + w_s + w_b1))  # 0.4
    assert res.score == pytest.approx(0.4)
    assert set(res.nodes) == {"root", "A", "B", "a1", "s", "b1"}  # b2 inactive
    assert res.nodes["A"]["score"] == pytest.approx(w_a1 / (w_a1 + w_s))
    assert res.nodes["A"]["weight"] == pytest.approx(w_a1 + w_s)
    assert res.nodes["A"]["n_active"] == 2
    # the shared leaf counts under both parents
    assert res.nodes["B"]["score"] == pytest.approx(w_b1 * 0.5 / (w_s + w_b1))
    assert res.nodes["B"]["n_active"] == 2
    assert res.nodes["root"]["n_active"] == 3
    assert res.nodes["root"]["score"] == pytest.approx(res.score)
    assert res.nodes["s"] == {"score": 0.0, "weight": pytest.approx(w_s), "n_active": 1}
    assert macro_breakdown(tree, res) == pytest.approx({"A": 0.375, "B": 1 / 7})


def test_macro_breakdown_skips_inactive_branch(tree):
    res = score_tree(tree, {"b1": True, "b2": False}, variant="paper")
    assert macro_breakdown(tree, res) == {"B": 0.5}


def test_result_is_frozen_and_picklable(tree):
    res = score_tree(tree, {"a1": True}, variant="paper")
    assert isinstance(res, TreeScore)
    with pytest.raises((AttributeError, TypeError, ValueError)):
        res.score = 0.0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(res)) == res
    assert res.to_dict()["nodes"]["root"]["n_active"] == 1


@pytest.mark.parametrize("met, match", [
    ({}, "no active leaves"),
    ({"nope": True}, "not a node"),
    ({"A": True}, "not a leaf"),
    ({"a1": 1.5}, r"\[0, 1\]"),
    ({"a1": -0.1}, r"\[0, 1\]"),
    ({"a1": float("nan")}, r"\[0, 1\]"),
    ({"a1": "yes"}, "boolean or a probability"),
    ({"a1": None}, "boolean or a probability"),
])
def test_errors(tree, met, match):
    with pytest.raises(ScoringError, match=match):
        score_tree(tree, met)


def test_score_is_bit_identical_across_processes():
    """Sums run in a fixed order: a rerun (another process, another string-hash seed) gives the
    very same float, so resumed runs and cached rewards agree exactly."""
    import os
    import subprocess
    import sys

    code = ("import random; from reward.tree import load_tree; from reward.scoring import score_tree; "
            "t = load_tree(); r = random.Random(0); "
            "print(repr(score_tree(t, {l.id: r.random() for l in t.leaves}).score))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(1, 6)}
    assert len(outs) == 1, outs
