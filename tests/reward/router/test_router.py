"""Routers on a hand-built tree with a fake judge: the walk with conditional relevance, what the
judge is shown, thresholds (lowered on the safety branches only), always-on leaves, multi-parent
joint relevance, tool-call gating, route-once caching and failures; the static router; the
registry."""

from __future__ import annotations

import asyncio
import re

import pytest
from rt_fakes import FakeJudge
from rt_router import CONV, _tree

from reward.judge import Message, VerdictCache
from reward.judge.templates import RELEVANCE, URGENCY
from reward.router import ROUTERS, CachedRouter, LLMTreeRouter, Router, StaticRouter, make_router, register_router
from reward.stages.rubric_reward import RubricReward
from reward.tree import Node, RubricTree

REL = {"A": 0.9, "A2": 0.6, "a1": 0.8, "a21": 0.9, "shared": 1.0, "B": 0.3, "b1": 0.9, "b_safe": 0.0}


def _judge(rel=None, urgency=0.1, fail=(), **kw) -> FakeJudge:
    rel = dict(REL if rel is None else rel)

    def decide(template, item):
        if template.name == URGENCY.name:
            if "urgency" in fail:
                raise RuntimeError("urgency down")
            return urgency
        if template.name == RELEVANCE.name:
            node = _node(item)
            if node in fail:
                raise RuntimeError(f"{node} down")
            return rel[node]
        return 1.0

    return FakeJudge(decide, **kw)




def _node(item) -> str:
    """The candidate node of a relevance question (titles equal ids in these trees)."""
    return re.search(r"^Candidate: ([^:\n]+)", item.criterion, re.MULTILINE).group(1)


def _asked(judge: FakeJudge) -> list[str]:
    return [_node(item) for name, item in judge.calls if name == RELEVANCE.name]


def test_walk_expands_relevant_nodes_only():
    judge = _judge()
    r = LLMTreeRouter(_tree(), judge, threshold=0.5).route_sync(CONV)
    # A (0.9) expanded; B (0.3) not, so b1 is never asked; A2 joint 0.54 expanded;
    # a1 0.72 and shared 0.54 active, a21 0.486 below 0.5.
    assert set(_asked(judge)) == {"A", "B", "a1", "A2", "a21", "shared"}
    assert r.threshold == 0.5
    assert r.leaf_ids == ["a1", "shared", "b_safe"]
    assert r.relevance["a1"] == pytest.approx(0.72)
    assert r.relevance["shared"] == pytest.approx(0.54)
    assert set(r.expanded) == {"A", "A2"}
    assert r.n_judge_calls == 7  # 6 relevance + 1 urgency
    assert r.urgency == pytest.approx(0.1)
    # one batched call per level: the judge saw the levels in order
    assert _asked(judge)[:2] == ["A", "B"]


def test_lower_threshold_activates_more():
    r = LLMTreeRouter(_tree(), _judge(), threshold=0.4).route_sync(CONV)
    assert "a21" in r.leaf_ids


def test_emergency_threshold_when_urgent_on_safety_branches_only():
    judge = _judge(urgency=0.9)
    # B plays the safety branch here
    r = LLMTreeRouter(_tree(), judge, threshold=0.5, emergency_threshold=0.2, safety_roots=["B"]).route_sync(CONV)
    assert r.threshold == 0.5 and r.safety_threshold == 0.2 and r.urgency == pytest.approx(0.9)
    assert "B" in r.expanded and "b1" in r.leaf_ids  # B (0.3) opens under the emergency threshold
    assert r.relevance["b1"] == pytest.approx(0.27)
    assert "a21" not in r.leaf_ids  # 0.486 under A, outside the safety branch: still 0.5
    # the same urgency without a safety branch in the tree lowers nothing
    r = LLMTreeRouter(_tree(), _judge(urgency=0.9), threshold=0.5, emergency_threshold=0.2,
                      safety_roots=["nowhere"]).route_sync(CONV)
    assert "B" not in r.expanded and r.safety_threshold == 0.2


def test_urgency_cutoff_is_configurable():
    r = LLMTreeRouter(_tree(), _judge(urgency=0.6), threshold=0.5, emergency_threshold=0.2,
                      urgency_cutoff=0.7, safety_roots=["B"]).route_sync(CONV)
    assert r.safety_threshold == 0.5 and "B" not in r.expanded


def test_always_on_leaves_are_active_even_when_irrelevant():
    rel = dict(REL, A=0.0, B=0.0)
    r = LLMTreeRouter(_tree(), _judge(rel), threshold=0.5, always_on=["a21"]).route_sync(CONV)
    assert r.leaf_ids == ["a21", "b_safe"]
    assert {a.reason for a in r.active} == {"always_on"}
    assert all(a.relevance == 0.0 for a in r.active)
    with pytest.raises(ValueError, match="not leaves"):
        LLMTreeRouter(_tree(), _judge(), always_on=["A"])


def test_multi_parent_leaf_takes_the_best_path():
    # shared: via B = 0.3 * 1.0 = 0.3 (reached first, at level 2); via A -> A2 = 0.9 * 0.6 * 1.0 = 0.54
    judge = _judge(urgency=0.9)
    r = LLMTreeRouter(_tree(), judge, emergency_threshold=0.2, safety_roots=["root"]).route_sync(CONV)
    assert r.relevance["shared"] == pytest.approx(0.54)
    # relevance is conditional on the parent, so a leaf is asked once per expanded parent
    assert _asked(judge).count("shared") == 2
    paths = sorted(re.search(r"^Path: (.*)$", item.criterion, re.MULTILINE).group(1)
                   for name, item in judge.calls if name == RELEVANCE.name and _node(item) == "shared")
    assert paths == ["A > A2 > shared", "B > shared"]
    # the other way round: the shallow parent is the better path
    r = LLMTreeRouter(_tree(), _judge(dict(REL, B=0.8, A2=0.5), urgency=0.9),
                      emergency_threshold=0.2, safety_roots=["root"]).route_sync(CONV)
    assert r.relevance["shared"] == pytest.approx(0.8)


def test_the_judge_sees_path_definition_and_criterion():
    judge = _judge()
    LLMTreeRouter(_tree(), judge, threshold=0.5).route_sync(CONV)
    texts = {_node(item): item.criterion for name, item in judge.calls if name == RELEVANCE.name}
    assert texts["a21"] == "Path: A > A2 > a21\nCandidate: a21: about a21\nCriterion: criterion a21"
    assert texts["A2"] == "Path: A > A2\nCandidate: A2: about A2"  # an area has no criterion line
    assert texts["A"] == "Path: A\nCandidate: A: about A"


def test_deeper_better_path_reexpands_without_new_calls():
    # X has a weak shallow parent P (joint 0.55) and a strong deeper one Q (1.0 * 0.9 = 0.9).
    # The walk reaches X first through P (x1 = 0.55 * 0.7 = 0.385, below 0.5), then through Q:
    # X's joint rises to 0.9 and X is expanded again, so x1 = 0.9 * 0.7 = 0.63 becomes active.
    nodes = [Node(id="root", title="root", children=("P", "A")), Node(id="P", title="P", children=("X",)),
             Node(id="A", title="A", children=("Q",)), Node(id="Q", title="Q", children=("X",)),
             Node(id="X", title="X", children=("x1",)), Node(id="x1", title="x1", criterion="c")]
    tree = RubricTree(nodes, root="root")
    judge = _judge({"P": 0.55, "A": 1.0, "Q": 0.9, "X": 1.0, "x1": 0.7})
    r = LLMTreeRouter(tree, judge, threshold=0.5).route_sync(CONV)
    assert r.leaf_ids == ["x1"]
    assert r.relevance["x1"] == pytest.approx(0.63)
    assert r.expanded["X"] == pytest.approx(0.9)
    # X is asked once per parent (given P, given Q); x1 once: re-expanding X asks nothing new
    assert sorted(_asked(judge)) == ["A", "P", "Q", "X", "X", "x1"]


def test_routing_failures_count_as_relevant():
    judge = _judge(fail={"B"})
    r = LLMTreeRouter(_tree(), judge, threshold=0.5).route_sync(CONV)
    assert r.n_failures == 1 and r.failed_nodes == ("B",)
    assert "B" in r.expanded and "b1" in r.leaf_ids  # recall wins
    assert judge.stats.failures == 1


def test_urgency_failure_uses_the_emergency_threshold():
    r = LLMTreeRouter(_tree(), _judge(fail={"urgency"}), threshold=0.5,
                      emergency_threshold=0.2, safety_roots=["B"]).route_sync(CONV)
    assert r.urgency is None and r.safety_threshold == 0.2 and "urgency" in r.failed_nodes
    assert "b1" in r.leaf_ids


def test_context_is_shown_to_the_router():
    judge = _judge()
    LLMTreeRouter(_tree(), judge).route_sync(CONV, context="HbA1c 7.1% on 2024-03-01")
    conv = judge.calls[0][1].conversation
    assert conv[0].role == "context" and "HbA1c" in conv[0].content


# ---------------------------------------------------------------------- route once
async def test_in_memory_cache_routes_each_prompt_once():
    judge = _judge()
    router = CachedRouter(LLMTreeRouter(_tree(), judge))
    first = await router.route(CONV)
    n = len(judge.calls)
    again = await router.route(CONV)
    assert len(judge.calls) == n and again.cached and not first.cached
    assert again.leaf_ids == first.leaf_ids
    # concurrent requests for one prompt share one computation
    other = (Message(role="user", content="another question"),)
    results = await asyncio.gather(*(router.route(other) for _ in range(5)))
    urgency_calls = [c for c in judge.calls if c[0] == URGENCY.name]
    assert len(urgency_calls) == 2
    assert sum(not r.cached for r in results) == 1
    assert router.stats == {"routing_hits_memory": 5, "routing_hits_durable": 0, "routing_misses": 2}


async def test_durable_cache_serves_a_second_router(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    judge1 = _judge()
    r1 = await CachedRouter(LLMTreeRouter(_tree(), judge1), cache).route(CONV)
    assert judge1.calls
    judge2 = _judge()  # a fresh process: no memory, no verdict cache, same durable store
    router2 = CachedRouter(LLMTreeRouter(_tree(), judge2), cache)
    r2 = await router2.route(CONV)
    assert judge2.calls == [] and r2.cached and r2.leaf_ids == r1.leaf_ids
    assert router2.hits_durable == 1
    # another threshold is another routing
    judge3 = _judge()
    await CachedRouter(LLMTreeRouter(_tree(), judge3, threshold=0.3), cache).route(CONV)
    assert judge3.calls


async def test_failed_routing_is_not_stored_durably(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    await CachedRouter(LLMTreeRouter(_tree(), _judge(fail={"B"})), cache).route(CONV)
    judge = _judge()
    r = await CachedRouter(LLMTreeRouter(_tree(), judge), cache).route(CONV)
    assert judge.calls and not r.cached and r.n_failures == 0


async def test_a_group_of_rollouts_is_routed_once_per_prompt():
    judge = _judge()
    reward = RubricReward(_tree(), LLMTreeRouter(_tree(), judge), judge)
    prompts = [[{"role": "user", "content": f"question {k}"}] for k in range(2)]
    rollouts = [{"id": f"p{k}-r{j}", "prompt": prompts[k], "completion": f"answer {j}"}
                for k in range(2) for j in range(4)]
    await reward.score(rollouts)
    assert len([c for c in judge.calls if c[0] == URGENCY.name]) == 2
    per_prompt = len([c for c in judge.calls if c[0] == RELEVANCE.name]) / 2
    assert per_prompt == 6  # the same walk as test_walk_expands_relevant_nodes_only
    assert reward.stats["prompts_routed"] == 2 and reward.stats["routing_judge_calls"] == 14
    # a second batch of the same prompts routes nothing
    n = len(judge.calls)
    await reward.score(rollouts[:3])
    assert not [c for c in judge.calls[n:] if c[0] in (URGENCY.name, RELEVANCE.name)]


# ---------------------------------------------------------------------- static router
def test_static_router_all_leaves_and_tag_filters():
    tree = _tree()
    assert StaticRouter(tree).route_sync(CONV).leaf_ids == ["a1", "a21", "shared", "b1", "b_safe"]
    r = StaticRouter(tree, axes=["accuracy"]).route_sync(CONV)
    assert r.leaf_ids == ["a1", "shared", "b_safe"]
    assert [a.reason for a in r.active] == ["static", "static", "always_on"]
    r = StaticRouter(tree, scenarios="health_data", include_always_on=False).route_sync(CONV)
    assert r.leaf_ids == ["a21", "shared"]
    assert StaticRouter(tree, themes=["communication"], include_always_on=False).route_sync(CONV).leaf_ids == ["b1"]
    # filters combine with AND
    assert StaticRouter(tree, axes=["accuracy"], scenarios=["symptoms"],
                        include_always_on=False).route_sync(CONV).leaf_ids == ["a1"]
    with pytest.raises(ValueError, match="unknown axes"):
        StaticRouter(tree, axes=["kindness"])
    with pytest.raises(ValueError, match="select no leaf"):
        StaticRouter(tree, themes=["nothing_like_this"])
    r = StaticRouter(tree).route_sync(CONV)
    assert r.n_judge_calls == 0 and r.threshold is None
    assert sum(a.weight for a in r.active) == pytest.approx(1.0)


# ---------------------------------------------------------------------- registry
def test_registry_refuses_duplicates_and_builds_by_name():
    assert {"llm", "embedding", "static"} <= set(ROUTERS)
    saved = dict(ROUTERS)
    try:
        with pytest.raises(ValueError, match="already registered"):
            @register_router("static")
            class Again(StaticRouter):
                pass

        @register_router("test-only")
        class Mine(Router):
            async def route(self, conversation, context=None, tool_calls=None):
                raise NotImplementedError

        assert ROUTERS["test-only"] is Mine and Mine.name == "test-only"
        assert isinstance(make_router("static", _tree()), StaticRouter)
        with pytest.raises(ValueError, match="unknown router"):
            make_router("nope", _tree())
    finally:
        ROUTERS.clear()
        ROUTERS.update(saved)
    assert "test-only" not in ROUTERS


def test_threshold_validation():
    with pytest.raises(ValueError, match="threshold"):
        LLMTreeRouter(_tree(), _judge(), threshold=1.5)


# ---------------------------------------------------------------------- tool calls and rounds
def _tool_tree() -> RubricTree:
    """root -> A, T (needs tool calls);  A -> a1, both;  T -> t1, both."""
    return RubricTree([
        Node(id="root", title="root", children=("A", "T")),
        Node(id="A", title="A", definition="about A", children=("a1", "both")),
        Node(id="T", title="T", definition="about T", children=("t1", "both"), needs_tool_calls=True),
        Node(id="a1", title="a1", criterion="criterion a1"),
        Node(id="t1", title="t1", criterion="criterion t1"),
        Node(id="both", title="both", criterion="criterion both"),
    ], root="root")


def test_tool_gated_branch_is_walked_only_with_tool_calls():
    rel = {"A": 0.0, "T": 1.0, "a1": 1.0, "t1": 1.0, "both": 1.0}
    router = LLMTreeRouter(_tool_tree(), _judge(rel), threshold=0.5)
    assert router.tool_gated() == {"T", "t1"}  # 'both' stays reachable through A
    judge = _judge(rel)
    r = LLMTreeRouter(_tool_tree(), judge, threshold=0.5).route_sync(CONV)
    assert "T" not in _asked(judge) and r.leaf_ids == [] and not r.with_tool_calls
    judge = _judge(rel)
    r = LLMTreeRouter(_tool_tree(), judge, threshold=0.5).route_sync(CONV, tool_calls=[{"name": "labs"}])
    assert r.leaf_ids == ["t1", "both"] and r.with_tool_calls
    # static: the gated leaves drop out without tool calls
    assert StaticRouter(_tool_tree()).route_sync(CONV).leaf_ids == ["a1", "both"]
    assert StaticRouter(_tool_tree()).route_sync(CONV, tool_calls=[{}]).leaf_ids == ["a1", "t1", "both"]


async def test_routing_key_depends_on_the_presence_of_tool_calls_only():
    router = CachedRouter(LLMTreeRouter(_tool_tree(), _judge({"A": 1, "T": 1, "a1": 1, "t1": 1, "both": 1})))
    assert router.key(CONV) == router.key(CONV, None, [])
    assert router.key(CONV, None, [{"name": "x"}]) == router.key(CONV, None, [{"name": "y"}])
    assert router.key(CONV) != router.key(CONV, None, [{"name": "x"}])
    plain, tools = await router.route(CONV), await router.route(CONV, None, [{"name": "x"}])
    assert "t1" not in plain.leaf_ids and "t1" in tools.leaf_ids


def test_routing_key_changes_with_the_instruction_cues(monkeypatch):
    # a routing stored before a cue pattern changed must not be reused: the cue leaves are part of it
    from reward.router import cues

    router = CachedRouter(LLMTreeRouter(_tool_tree(), _judge({"A": 1})))
    before = router.key(CONV)
    monkeypatch.setitem(cues.PATTERNS, "professional", (*cues.PATTERNS["professional"], r"\bi heal people\b"))
    cues.fingerprint.cache_clear()
    try:
        assert router.key(CONV) != before
    finally:
        monkeypatch.undo()
        cues.fingerprint.cache_clear()
    assert router.key(CONV) == before


def test_rounds_and_calls_of_a_scripted_walk():
    # round 1: A, B (+ urgency);  round 2: a1, A2;  round 3: a21, shared  -> 6 + 1 calls, 3 rounds
    r = LLMTreeRouter(_tree(), _judge(), threshold=0.5).route_sync(CONV)
    assert (r.n_judge_calls, r.n_rounds) == (7, 3)
    # everything relevant: every edge asked once, still one round per level; the always-on leaf
    # b_safe is active anyway, so it is never asked about
    judge = _judge({k: 1.0 for k in REL})
    r = LLMTreeRouter(_tree(), judge, threshold=0.5).route_sync(CONV)
    assert (r.n_judge_calls, r.n_rounds) == (9, 3)  # 8 of the 9 edges + urgency
    assert "b_safe" not in _asked(judge) and "b_safe" in r.leaf_ids


def test_universal_and_context_leaves_are_active_without_being_asked():
    tree = RubricTree([
        Node(id="root", title="root", children=("A", "D")),
        Node(id="A", title="A", definition="about A", children=("a1", "u1")),
        Node(id="D", title="D", definition="data", children=("d1",), with_context=True),
        Node(id="a1", title="a1", criterion="If x, criterion a1."),
        Node(id="u1", title="u1", criterion="Criterion u1.", conditional=False),
        Node(id="d1", title="d1", criterion="If data, criterion d1."),
    ], root="root")
    judge = _judge({"A": 0.0, "D": 0.0, "a1": 0.0, "u1": 0.0, "d1": 0.0})
    r = LLMTreeRouter(tree, judge, threshold=0.5, universal=True).route_sync(CONV)
    assert [(a.leaf_id, a.reason) for a in r.active] == [("u1", "universal")]
    r = LLMTreeRouter(tree, _judge({"A": 0, "D": 0, "a1": 0, "u1": 0, "d1": 0}),
                      threshold=0.5, universal=True).route_sync(CONV, context="HbA1c 7.1%")
    assert [(a.leaf_id, a.reason) for a in r.active] == [("u1", "universal"), ("d1", "context")]
    assert "u1" not in _asked(judge)
    # the default: a universal leaf is routed like any other (asked, here answered no)
    assert LLMTreeRouter(tree, _judge({"A": 0, "D": 0, "a1": 0, "u1": 0, "d1": 0}),
                         threshold=0.5).route_sync(CONV).leaf_ids == []


def test_cue_leaves_are_active_when_a_user_turn_states_the_instruction():
    tree = RubricTree([
        Node(id="root", title="root", children=("F",)),
        Node(id="F", title="F", definition="format", children=("table", "other")),
        Node(id="table", title="table", criterion="If the user asks for a table, uses one.", cues=(r"\btable\b",)),
        Node(id="other", title="other", criterion="If y, criterion other."),
    ], root="root")
    zero = {"F": 0.0, "table": 0.0, "other": 0.0}
    judge = _judge(zero)
    asked = (Message(role="user", content="Explain AF as a TABLE please."),)
    r = LLMTreeRouter(tree, judge, threshold=0.5).route_sync(asked)
    assert [(a.leaf_id, a.reason) for a in r.active] == [("table", "cue")]
    assert "table" not in _asked(judge)
    # no match: a word inside another word, or the word in the assistant's turn only
    for conv in [(Message(role="user", content="Is a vegetable diet ok? I take a tablet daily."),),
                 (Message(role="user", content="hi"), Message(role="assistant", content="here is a table"))]:
        assert LLMTreeRouter(tree, _judge(zero), threshold=0.5).route_sync(conv).leaf_ids == []


async def test_rollouts_with_tool_calls_route_the_agentic_branch_and_show_the_calls():
    rel = {"A": 1.0, "T": 1.0, "a1": 1.0, "t1": 1.0, "both": 1.0}
    judge = _judge(rel)
    tree = _tool_tree()
    reward = RubricReward(tree, LLMTreeRouter(tree, judge), judge)
    prompt = [{"role": "user", "content": "what were my labs?"}]
    calls = [{"name": "get_labs", "arguments": {"days": 30}}]
    routings = await reward.route([{"id": "plain", "prompt": prompt, "completion": "a"},
                                   {"id": "agent", "prompt": prompt, "completion": "b", "tool_calls": calls}])
    by_tools = {key[2]: r for key, r in routings.items()}
    assert "t1" not in by_tools[False].leaf_ids and "t1" in by_tools[True].leaf_ids
    n = len(judge.calls)
    await reward.score([{"id": "agent", "prompt": prompt, "completion": "b", "tool_calls": calls}])
    graded = [item for name, item in judge.calls[n:] if name not in (RELEVANCE.name, URGENCY.name)]
    assert graded and all(item.conversation[-1].role == "tool_calls" and "get_labs" in item.conversation[-1].content
                          for item in graded)
