"""Instruction cues on our phrasing set (labelled before the patterns ran on it) and the language
guess. No model: pure pattern logic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reward.router.cues import CUE_LEAVES, KINDS, cue_leaves, detect
from reward.router.language import is_english
from reward.tree import load_tree

PHRASINGS_FILE = Path(__file__).resolve().parents[3] / "reward" / "data" / "instruction_phrasings.jsonl"
PHRASINGS = [json.loads(line) for line in PHRASINGS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


# The phrasings written in a language other than English, read by us (not by the detector). The
# language leaf applies to every one of them ("If the user writes in a language other than
# English ..."), though the set labels the cue on some only (ph-020..024, 041..045, 084..086, 099 and
# 100 ask for a format, a length, an exclusion or an audience, in Spanish, French, German,
# Portuguese or Chinese): firing on them is right.
NOT_ENGLISH = {"ph-020", "ph-021", "ph-022", "ph-023", "ph-024", "ph-041", "ph-042", "ph-043", "ph-044", "ph-045",
               "ph-049", *(f"ph-0{i}" for i in range(60, 72)), "ph-084", "ph-085", "ph-086", "ph-099", "ph-100",
               "ph-144", "ph-145", "ph-146", "ph-147", "ph-148", "ph-157"}


def _expected(p: dict, kind: str) -> bool:
    return kind in p["cues"] or (kind == "language" and p["id"] in NOT_ENGLISH)


def _prf(kind: str) -> tuple[float, float]:
    tp = sum(kind in detect(p["text"]) and _expected(p, kind) for p in PHRASINGS)
    fp = sum(kind in detect(p["text"]) and not _expected(p, kind) for p in PHRASINGS)
    fn = sum(kind not in detect(p["text"]) and _expected(p, kind) for p in PHRASINGS)
    return tp / (tp + fp), tp / (tp + fn)


def test_the_phrasing_set_is_large_and_covers_every_kind():
    assert len(PHRASINGS) >= 100
    for kind in KINDS:
        assert sum(kind in p["cues"] for p in PHRASINGS) >= 10, kind
    assert sum(not p["cues"] for p in PHRASINGS) >= 30  # phrasings that must not fire


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_heard_in_most_phrasings(kind):
    precision, recall = _prf(kind)
    print(f"\n{kind}: precision {precision:.3f} recall {recall:.3f}")
    assert recall >= 0.9
    assert precision >= 0.85


@pytest.mark.parametrize("text", [
    "Is table salt worse than sea salt?", "What is ginseng used for in Chinese medicine?",
    "The chart at the clinic said my BMI is 31.", "I had a short episode of dizziness.",
    "Is Spanish flu related to bird flu?", "My GP gave me a leaflet with bullet points on diabetes.",
    "Without my glasses I get headaches.", "My kids had chickenpox last week."])
def test_words_that_look_like_cues_do_not_fire(text):
    assert detect(text) == set()


def test_kinds_map_to_leaves_of_the_packaged_tree():
    tree = load_tree()
    for kind, leaves in CUE_LEAVES.items():
        for lid in leaves:
            assert lid in tree and tree[lid].is_leaf, (kind, lid)
    ids = {leaf.id for leaf in tree.leaves}
    assert cue_leaves("Give it to me as JSON, please.", ids) == {"if_requested_format": "format",
                                                                 "if_machine_readable": "format"}
    assert cue_leaves("Explain it like I'm five.", {"if_named_audience"}) == {"if_named_audience": "audience"}


@pytest.mark.parametrize(("text", "english"), [
    ("I have had a headache for three days, what can I take?", True),
    ("Metformin 500 mg, lisinopril 10 mg", True),  # no function words: not enough to tell
    ("¿Qué puedo tomar para el dolor de cabeza?", False),
    ("Est-ce que je peux prendre de l'ibuprofène avec mon traitement ?", False),
    ("Wie lange dauert eine Erkältung normalerweise?", False),
    ("我可以同时吃布洛芬和对乙酰氨基酚吗？", False),
    ("Сколько длится грипп?", False),
])
def test_language_guess(text, english):
    assert is_english(text) is english


@pytest.mark.parametrize(("text", "kinds"), [
    ("I'm a practice nurse. Briefly explain what HbA1c reflects.", {"professional", "length"}),
    ("As a hospital pharmacist I'd like the interaction data.", {"professional"}),
    ("My son is a doctor and says it is nothing.", set()),          # someone else's profession
    ("As a doctor told me, rest is best. How long should I rest?", set()),
    ("I'm a diabetic; what should I eat?", set()),
    ("Please only suggest things I can do at home.", {"exclusion"}),
    ("I only take metformin. Is that enough?", set()),               # "only" that restricts nothing asked
    ("Just give me the gist in a line or two.", {"length"}),
    ("Keep it to things I can do at home.", {"exclusion"}),           # not a length limit
    ("Keep it to two sentences.", {"length"}),
])
def test_professional_and_only_cues(text, kinds):
    assert detect(text) == kinds


def test_a_professional_switches_on_the_register_leaf():
    ids = {leaf.id for leaf in load_tree().leaves}
    assert cue_leaves("I'm an ICU nurse, clinical terms are fine.", ids) == {"cm_professional_register": "professional"}


# a hostile review's phrasings (not in the phrasing set): someone else's profession, a profession
# that is not a health one, reported advice, and "only"/"just" that restricts nothing asked
@pytest.mark.parametrize("text", [
    "I'm a biologist, not a doctor.", "I'm a geologist.", "I am an intern at a bank.", "I'm a resident of Ohio.",
    "I'm a nurse's aide.", "I'm a doctor's receptionist.", "I'm a doctor of philosophy.",
    "As a nurse once told me, rest is best.", "As a doctor friend told me, it will pass.", "As a GP put it, wait and see.",
    "My doctor would only recommend ibuprofen.", "Why do doctors only recommend statins?",
    "They just recommend drinking water.", "We stick to home remedies in our family.",
    "I was told not to take more paracetamol unless it's necessary.", "I only want things to go back to normal.",
    'Rewrite this: "we only recommend a re-check if the fever returns."',
    "I'm a GP patient with asthma.", "I'm a GP practice receptionist.", "I'm a medic alert bracelet wearer.",
    "Ok, just recommend something that works.", "Please just list the side effects.",
])
def test_what_is_not_a_professional_or_an_exclusion(text):
    assert not detect(text) & {"professional", "exclusion"}


@pytest.mark.parametrize("text", ["只要血压正常就可以停药吗？", "我只用过一次这个药", "我是医生的妈妈", "我是医生吗？",
                                  "我不是医生。", "No soy médico, pero tengo una duda.",
                                  "Sólo quiero saber si es grave.", "Só quero saber se é perigoso.",
                                  "Es gibt nur pflanzliche Mittel in unserem Haus."])
def test_other_languages_only_and_professions_that_are_not_the_users(text):
    assert not detect(text) & {"professional", "exclusion"}


@pytest.mark.parametrize(("text", "kind"), [
    ("I’m a nurse on a cardiac ward.", "professional"), ("Soy medico de familia.", "professional"),
    ("Ich bin Krankenschwester.", "professional"), ("I'm an RN.", "professional"),
    ("As an obstetrics resident I have a patient at 32 weeks.", "professional"),
    ("Keep your answer to 150 words.", "length"), ("Keep it to the point.", "length"),
])
def test_more_professionals_and_lengths_are_heard(text, kind):
    assert kind in detect(text)
