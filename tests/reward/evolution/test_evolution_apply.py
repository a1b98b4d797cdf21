"""Apply, refusals, versioned writing, diff, and what the verdict cache keeps across versions."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from rt_evolution import leaf

from reward.evolution.apply import apply_proposals
from reward.evolution.diff import diff_trees
from reward.evolution.proposals import NodeDraft, Proposal
from reward.evolution.taxonomy_io import read_header, write_new_version
from reward.tree import default_taxonomy_path, load_tree
from reward.tree.schema import ChangelogEntry


def test_refuses_cycle_duplicate_and_unreachable_with_reasons():
    tree = load_tree()
    props = [
        leaf("p1", "ev_travel_clinic", ["ms_global_health"]),
        leaf("p2", "sf_chest_pain_emergency", ["ms_global_health"]),          # duplicate of a shipped leaf
        leaf("p3", "ev_travel_clinic", ["cm_clarity"]),                        # duplicate of p1's new leaf
        Proposal(id="p4", decision="accept", kind="add_edge", target="safety",
                 parents=["sf_emergency_escalation"]),                         # safety would contain itself
        Proposal(id="p5", decision="accept", kind="move", target="ms_dx_neurology",
                 from_parent="ms_diagnosis", to_parent="ms_dx_neurology"),     # its own parent
        leaf("p6", "ev_orphan", []),                                            # no parent: unreachable
        Proposal(id="p7", decision="accept", kind="add_node", parents=[], children=["ms_neuro_tia"],
                 node=NodeDraft(id="ev_group", title="Group")),                # an unreachable internal node
        leaf("p8", "ev_rejected", ["ms_global_health"], decision="reject"),
    ]
    res = apply_proposals(tree, props)
    assert res.applied == ["p1"]
    why = {r.proposal: r.reason for r in res.refused}
    assert set(why) == {"p2", "p3", "p4", "p5", "p6", "p7"}
    assert "duplicate id" in why["p2"] and "sf_chest_pain_emergency" in why["p2"]
    assert "duplicate id" in why["p3"]
    assert "cycle" in why["p4"] and "cycle" in why["p5"]
    assert "not reachable" in why["p6"] and "ev_orphan" in why["p6"]
    assert "not reachable" in why["p7"] and "ev_group" in why["p7"]
    assert "ev_rejected" not in res.tree and "ev_travel_clinic" in res.tree
    assert sum(res.tree.leaf_weights.values()) == pytest.approx(1.0)


def test_new_version_keeps_layout_bumps_version_and_logs_changes(tmp_path):
    tree = load_tree()
    props = [leaf("p1", "ev_travel_clinic", ["ms_global_health", "context_seeking"]),
             Proposal(id="p2", decision="accept", kind="move", target="ms_neuro_tia",
                      from_parent="ms_dx_neurology", to_parent="ms_dx_cardiovascular")]
    res = apply_proposals(tree, props)
    entry = ChangelogEntry(version=2, date="2026-11-30", summary="test", changes=res.changes)
    out = tmp_path / "v2.yaml"
    new, kept = write_new_version(None, tree, res.nodes, entry, out)
    assert kept
    text = out.read_text()
    assert "# RubricsTree medical taxonomy" in text  # the shipped file's comments survive
    header = read_header(out)
    assert header.version == 2 and header.changelog[-1].changes == res.changes
    assert len(new.leaves) == len(tree.leaves) + 1
    assert set(new.parents["ev_travel_clinic"]) == {"ms_global_health", "context_seeking"}
    assert sum(new.leaf_weights.values()) == pytest.approx(1.0)
    # applying again on v2 appends a second changelog entry and bumps to 3
    res3 = apply_proposals(new, [leaf("p1", "ev_second", ["cm_clarity"])])
    _, kept3 = write_new_version(out, new, res3.nodes, ChangelogEntry(version=3, changes=res3.changes),
                                  tmp_path / "v3.yaml")
    shipped = [e.version for e in read_header(tree.source).changelog]  # the shipped file's own entries
    assert kept3 and [e.version for e in read_header(tmp_path / "v3.yaml").changelog] == shipped + [2, 3]

    d = diff_trees(tree, new, version_a=1, version_b=2)
    assert [x["id"] for x in d["added_leaves"]] == ["ev_travel_clinic"]
    assert d["moved_leaves"] == [{"id": "ms_neuro_tia", "leaf": True, "from": ["ms_dx_neurology"],
                                  "to": ["ms_dx_cardiovascular"]}]
    assert not d["removed_leaves"] and not d["changed_leaves"]
    changed = {w["id"]: w for w in d["weight_changes"]}
    assert changed["ms_neuro_tia"]["delta"] != 0 and "sf_chest_pain_emergency" in changed  # a new sibling dilutes
    assert d["unchanged_criteria"] == len(tree.leaves)
    back = diff_trees(new, tree)
    assert [x["id"] for x in back["removed_leaves"]] == ["ev_travel_clinic"]


@pytest.mark.parametrize("nodes_last", [True, False])
def test_other_layouts_are_edited_or_rewritten(tmp_path, nodes_last):
    """Block-style YAML (as yaml.safe_dump writes it) is edited in place; a layout the editor does
    not know (here: a key after ``nodes``) is written afresh, with the same content."""
    doc = yaml.safe_load(default_taxonomy_path().read_text())
    order = ["version", "name", "root", "nodes"] if nodes_last else ["nodes", "version", "name", "root"]
    src = tmp_path / "in.yaml"
    src.write_text("# hand-written header\n" + yaml.safe_dump({k: doc[k] for k in order}, sort_keys=False))
    tree = load_tree(src)
    res = apply_proposals(tree, [leaf("p1", "ev_x", ["cm_clarity"])])
    new, kept = write_new_version(src, tree, res.nodes, ChangelogEntry(version=2, changes=res.changes),
                                  tmp_path / "out.yaml")
    assert kept is nodes_last
    assert ("# hand-written header" in (tmp_path / "out.yaml").read_text()) is nodes_last
    assert "ev_x" in new and "ev_x" in new["cm_clarity"].children
    assert read_header(tmp_path / "out.yaml").version == 2
    assert [n.model_dump() for n in new.nodes.values()] == [n.model_dump() for n in res.nodes]


def test_unchanged_leaves_keep_their_cached_verdicts_after_apply():
    """The verdict key is (judge model, mode, template, conversation, response, criterion, points):
    no taxonomy fingerprint, so a leaf whose criterion did not change is still a cache hit."""
    from rt_fakes import FakeJudge

    from reward.judge import VerdictCache
    from reward.router import StaticRouter
    from reward.stages.rubric_reward import Rollout, RubricReward

    cache = VerdictCache()
    tree = load_tree()
    new = apply_proposals(tree, [leaf("p1", "ev_travel_clinic", ["ms_global_health"]),
                                 leaf("p2", "ev_second", ["cm_clarity"])]).tree
    rollouts = [Rollout(id=f"r{k}", prompt=[{"role": "user", "content": "Going to Ghana, which vaccines?"}],
                        completion=f"answer {k}") for k in range(2)]
    j1 = FakeJudge(lambda t, it: 0.9, cache=cache)
    asyncio.run(RubricReward(tree, StaticRouter(tree), j1).score(rollouts))
    graded = j1.stats.cache_misses  # every active leaf of both rollouts (agentic ones need tool calls)
    assert graded == j1.stats.requests > 2 * 100
    j2 = FakeJudge(lambda t, it: 0.9, cache=cache)
    scores = asyncio.run(RubricReward(new, StaticRouter(new), j2).score(rollouts))
    assert j2.stats.cache_hits == graded
    assert j2.stats.cache_misses == j2.stats.requests == 2 * 2  # only the two new leaves were graded
    assert all(s.score is not None for s in scores)


def test_llm_routing_after_apply_asks_only_about_new_nodes():
    """A routing is keyed by the whole tree's fingerprint, so every prompt is routed again after an
    apply; but the router's relevance questions are verdicts keyed by the node's text, so only the
    new nodes cost judge requests."""
    from rt_fakes import FakeJudge

    from reward.judge import VerdictCache
    from reward.router import CachedRouter, LLMTreeRouter

    cache = VerdictCache()
    judge = FakeJudge(lambda t, it: 0.1 if "urgency" in t.name else 0.9, cache=cache)
    tree = load_tree()
    new = apply_proposals(tree, [leaf("p1", "ev_travel_clinic", ["ms_global_health"])]).tree
    conv = [{"role": "user", "content": "Which vaccines do I need for Ghana?"}]
    old_routing = CachedRouter(LLMTreeRouter(tree, judge), cache).route_sync(conv)
    first = judge.stats.requests
    assert first > 100
    new_routing = CachedRouter(LLMTreeRouter(new, judge), cache).route_sync(conv)
    assert not new_routing.cached  # the routing itself was recomputed for the new tree
    assert judge.stats.requests - first == 1  # ... asking the judge about the one new leaf only
    assert set(new_routing.leaf_ids) == set(old_routing.leaf_ids) | {"ev_travel_clinic"}
