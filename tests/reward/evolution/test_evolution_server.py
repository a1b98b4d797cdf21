"""Evolution against the real vLLM judge server: the llm matcher, the llm router and the llm
drafter. The tiny random model's answers are meaningless; these tests check the wiring (requests
reach the server, answers are used or fall back visibly, reruns come from the cache)."""

from __future__ import annotations

import pytest
from rt_paths import TESTS_DIR

from reward.evolution.coverage import RouterSpec, make_router, measure
from reward.evolution.encoder import CachedEncoder
from reward.evolution.matchers import make_matcher
from reward.healthbench.schema import load_healthbench
from reward.tree import load_tree

FIXTURE = TESTS_DIR / "fixtures" / "evolution_rows.jsonl"


@pytest.mark.server
async def test_llm_matcher_and_router_on_the_server(judge_url):
    from reward.judge import VerdictCache, make_judge

    judge = make_judge(judge_url=judge_url, cache=VerdictCache())
    try:
        tree, enc = load_tree(), CachedEncoder()
        rows = load_healthbench(FIXTURE)[:2]
        matcher = make_matcher("llm", enc, judge=judge, shortlist=3)
        res = await measure(rows, tree, make_router(RouterSpec(), tree, encoder=enc), matcher)
        asked = judge.stats.requests
        assert asked > 0 and res.judge_failures == 0
        sims = matcher.similarities(tree, [i.criterion for i in res.items])
        ids = [leaf.id for leaf in tree.leaves]
        for it, row in zip(res.items, sims):  # the judge only confirms shortlisted leaves
            top = {ids[j] for j in row.argsort()[::-1][:3] if row[j] >= matcher.floor}
            assert set(it.matched) <= top
        again = await measure(rows, tree, make_router(RouterSpec(), tree, encoder=enc), matcher)
        assert judge.stats.requests == asked  # every verdict from the durable cache
        assert [i.matched for i in again.items] == [i.matched for i in res.items]
        llm = await measure(rows[:1], tree, make_router(RouterSpec(name="llm"), tree, encoder=enc, judge=judge),
                            make_matcher("embedding", enc))
        assert judge.stats.requests > asked and llm.settings["router"] == "llm"
    finally:
        await judge.aclose()


@pytest.mark.server
async def test_llm_drafter_on_the_server(judge_url):
    from reward.evolution.propose import ProposeSettings, propose
    from reward.judge import VerdictCache, make_judge

    judge = make_judge(judge_url=judge_url, cache=VerdictCache())
    try:
        tree, enc = load_tree(), CachedEncoder()
        rows = load_healthbench(FIXTURE)
        doc = await propose(rows, tree, RouterSpec(), make_matcher("embedding", enc), enc, judge=judge,
                            settings=ProposeSettings(drafter="llm", max_proposals=3))
        assert doc.proposals and judge.stats.requests >= len(doc.proposals)
        for p in doc.proposals:
            # either the judge's draft was used (parent among the shortlisted nodes) or the offline
            # draft was kept and the proposal says why
            assert p.drafted_by == "llm" or p.note.startswith("llm draft unusable")
            assert p.parents[0] in {a["id"] for a in p.placement_alternatives}
            assert p.node.id not in tree and p.predicted is not None
    finally:
        await judge.aclose()
