"""The forced set (leaves active on every prompt) stays small, and everything else is routed.

No encoder: the routers are built and their standing rules checked on prompts whose routing needs
no relevance (the LLM router with a judge that answers no to every relevance question)."""

from __future__ import annotations

import asyncio

import pytest
from rt_fakes import FakeJudge

from reward.judge.templates import URGENCY
from reward.router import LLMTreeRouter
from reward.router.base import (
    DEFAULT_ALWAYS_ON,
    MAX_FORCED,
    REPLY_GUARDS,
    ROUTINE_GUARDS,
    TRIAGE_GUARD_ROUTINE,
    as_conversation,
)
from reward.scoring.variants import RULE_REASONS, effective_weights
from reward.tree import load_tree


@pytest.fixture(scope="module")
def tree():
    return load_tree()


def _no_judge():
    return FakeJudge(lambda template, item: 0.0 if template.name != URGENCY.name else 0.0)


def _route(router, text):
    return asyncio.run(router.route(as_conversation([{"role": "user", "content": text}])))


def test_forced_set_is_at_most_eight_leaves(tree):
    router = LLMTreeRouter(tree, _no_judge())
    forced = router.always_on
    assert len(forced) <= MAX_FORCED
    assert set(DEFAULT_ALWAYS_ON) <= set(forced)
    assert {"sf_red_flags_missed", "sf_dangerous_advice", "sf_dose_above_maximum"} <= set(forced)
    assert TRIAGE_GUARD_ROUTINE in ROUTINE_GUARDS and not set(ROUTINE_GUARDS) & set(forced)
    # a routine prompt with nothing relevant gets the forced set, the reply-side guards (issue 46)
    # and, by the urgency rule, the routine guards (over-escalation of a minor complaint, needless
    # questions), nothing else
    r = _route(router, "What is a good resting heart rate?")
    assert set(r.leaf_ids) == set(forced) | set(ROUTINE_GUARDS) | set(REPLY_GUARDS)
    assert {a.reason for a in r.active if a.leaf_id in REPLY_GUARDS} == {"reply_guard"}
    assert {a.reason for a in r.active
            if a.leaf_id not in set(ROUTINE_GUARDS) | set(REPLY_GUARDS)} == {"always_on"}


def test_universal_leaves_are_routed_not_forced(tree):
    universal = [leaf.id for leaf in tree.leaves if not leaf.conditional]
    assert len(universal) > MAX_FORCED  # the old rule switched these on for every prompt
    r = _route(LLMTreeRouter(tree, _no_judge()), "What is a good resting heart rate?")
    assert not {a.leaf_id for a in r.active if a.reason == "universal"}
    old = _route(LLMTreeRouter(tree, _no_judge(), universal=True), "What is a good resting heart rate?")
    assert len(old.active) > len(r.active) + 5  # the universal leaves that are no reply-side guard


def test_a_cue_leaf_sits_in_the_activated_sub_dag_like_a_routed_one(tree):
    router = LLMTreeRouter(tree, _no_judge())
    r = _route(router, "Is salt bad for me? Please answer in a table.")
    cue = {a.leaf_id for a in r.active if a.reason == "cue"}
    assert cue == {"if_requested_format"}
    assert "cue" not in RULE_REASONS  # scored as a positive leaf, not as a guard
    # its whole path is in the routing's expanded nodes, as for a leaf the walk reached
    assert {"instruction_following", "if_format"} <= set(r.expanded)
    w_cue = effective_weights(tree, r.leaf_ids, "penalty+active", r.expanded)
    w_routed = effective_weights(tree, r.leaf_ids, "penalty+active",
                                 {**r.expanded, "instruction_following": 1.0, "if_format": 1.0})
    assert w_cue["if_requested_format"] == pytest.approx(w_routed["if_requested_format"])


def test_table_salt_switches_on_no_instruction_leaf(tree):
    r = _route(LLMTreeRouter(tree, _no_judge()), "Is table salt worse than sea salt? What about in Chinese medicine?")
    assert not [a for a in r.active if a.reason == "cue"]


def test_a_prompt_not_in_english_switches_on_the_language_leaf(tree):
    r = _route(LLMTreeRouter(tree, _no_judge()), "¿Qué puedo tomar para el dolor de cabeza?")
    assert {a.leaf_id: a.reason for a in r.active}.get("if_same_language") == "cue"


def test_an_urgent_prompt_gets_the_emergency_advice_first_check_and_a_routine_one_does_not(tree):
    """The urgency rule's urgent guard (issue 47): whether emergency advice comes before questions is
    about the reply's order, which relevance to the prompt's topic never reached."""
    pytest.importorskip("sentence_transformers")
    from reward.router import make_router
    from reward.router.base import URGENT_GUARDS

    router = make_router("embedding", tree)
    urgent = _route(router, "My dad suddenly can't move his right arm and his speech is slurred. What do I do?")
    routine = _route(router, "What is a good resting heart rate?")
    assert urgent.urgency >= router.urgency_cutoff > routine.urgency
    assert set(URGENT_GUARDS) <= set(urgent.leaf_ids) and not set(URGENT_GUARDS) & set(routine.leaf_ids)
    assert not set(ROUTINE_GUARDS) - {TRIAGE_GUARD_ROUTINE} & set(urgent.leaf_ids) - set(routine.leaf_ids)
