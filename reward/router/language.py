"""Which language a user writes in, from one short sentence on.

Routers use it twice: a prompt that is not in English is embedded with the multilingual encoder
(the English MiniLM cannot read it), and it switches on the "reply in the user's language"
instruction leaf.

The guess comes from ``lingua-language-detector`` (a maintained library built for short text:
n-gram models of many languages, rule-based filters by script), restricted to :data:`LANGUAGES`,
the languages health questions most often come in (a closed set is both faster and more accurate
on a few words than all 75). A count of common function words, English against the other frequent
languages (also Hindi or Urdu written in Latin letters, which lingua does not model), settles the
two cases lingua gets wrong on a handful of words: a short English question it reads as another
Latin-script language ("Can I take paracetamol?"), and romanised Hindi. Without lingua installed
the function-word count decides alone (a text with fewer than two function words is then read as
English).

No routing decision that matters for safety depends on this guess alone: the embedding router
reads short prompts with both encoders, and its critical safety net reads every prompt with both
(``reward.router.embedding``).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

_EN = frozenset("""the a an and or but is are was were be been being i you he she it we they my your his her our
their me him us them this that these those what which who when where why how do does did have has had
not no can could should would will with for from of to in on at by about as if so than then there here
just also very much many any some all more most other after before because been into out up down over
im i'm it's dont don't can't won't please""".split())

_OTHER = frozenset("""el la los las un una unos unas y o pero es son está están estoy tengo tiene mi mis su sus
que qué como cómo cuando cuándo donde dónde por para con sin del al lo le les se me te nos muy más puedo
debo hay ser estar esto eso
le la les un une des et ou mais est sont suis ai avez avons mon ma mes ton ta tes son sa ses que qui
quoi comment quand où pour avec sans dans sur du au aux ce cette ces je tu il elle nous vous ils elles
pas ne très plus peut dois depuis
der die das ein eine einen einem einer und oder aber ist sind bin habe hat mein meine meinen sein seine
ich du er sie es wir ihr mit für von zu im am nicht kein keine sehr wie was wann wo warum kann darf
soll seit auch noch schon
o os as um uma uns umas e ou mas é são estou tenho tem meu minha meus minhas seu sua que como quando
onde por para com sem do da dos das no na nos nas não muito mais posso devo está
il lo gli i uno e o ma è sono ho ha mio mia miei che come quando dove perché per con senza del della
non molto più posso devo
de het een en of maar is zijn ben heb heeft mijn wat hoe wanneer waar waarom voor met zonder niet
zeer kan mag ik wil
w z na do że jest są mam ma mój moja nie jak co kiedy gdzie dlaczego dla bez czy się
ve bir bu şu ne nasıl için ile değil çok var yok
yang dan di ke dari ini itu saya tidak dengan untuk apa bagaimana
na ya kwa ni si wa za katika hii
ang ng sa mga ako ko hindi po ba
hai hain ka ki ke ko mein se aur kya nahi nahin mera meri mere bahut bahot hum aap yeh woh kaise kyun kyon
raha rahi rhi rha hota hoti kar kare karu karna lekin bhi mujhe maine""".split())
# Function words English shares with another language ("me", "no", "a", "is", "in", "so", "die"):
# counted as English in long texts (where lingua decides), never as the proof a short one is English.
_SHARED = _OTHER & _EN | frozenset({"no", "a", "so", "is", "in", "die", "me", "as"})
_OTHER = _OTHER - _EN

# Romanised Hindi/Urdu: lingua models Hindi and Urdu in their own scripts only.
_HINGLISH = frozenset("""hai hain mujhe maine mera meri mere nahi nahin kya aur bahut hum aap yeh woh kaise kyun
kyon raha rahi hota hoti karna lekin bhi""".split())

# ISO 639-1 codes of the languages the detector tells apart (lingua's names for them).
LANGUAGES = ("ENGLISH", "SPANISH", "FRENCH", "GERMAN", "PORTUGUESE", "ITALIAN", "DUTCH", "POLISH", "TURKISH",
             "RUSSIAN", "UKRAINIAN", "ARABIC", "HEBREW", "PERSIAN", "HINDI", "BENGALI", "URDU", "CHINESE",
             "JAPANESE", "KOREAN", "VIETNAMESE", "THAI", "INDONESIAN", "MALAY", "SWAHILI", "TAGALOG", "YORUBA",
             "ROMANIAN", "GREEK", "SWEDISH")

_LINGUA_CODES = frozenset({"en", "es", "fr", "de", "pt", "it", "nl", "pl", "tr", "ru", "uk", "ar", "he", "fa", "hi",
                           "bn", "ur", "zh", "ja", "ko", "vi", "th", "id", "ms", "sw", "tl", "yo", "ro", "el", "sv"})
_lock = threading.Lock()
_detector: object | None = None


def _lingua():
    """The lingua detector over :data:`LANGUAGES` (built once; models load lazily), or None when
    the package is not installed."""
    global _detector
    with _lock:
        if _detector is None:
            try:
                from lingua import Language, LanguageDetectorBuilder
            except ImportError:
                _detector = False
            else:
                _detector = LanguageDetectorBuilder.from_languages(*(getattr(Language, n) for n in LANGUAGES)).build()
        return _detector or None


def lingua_available() -> bool:
    """Whether the lingua detector is installed (part of a router's config: it changes routings)."""
    return _lingua() is not None


def _latin_share(text: str) -> tuple[int, int]:
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if ord(ch) < 0x250 or "LATIN" in unicodedata.name(ch, ""):
                latin += 1
    return letters, latin


# Scripts and the language a health question written in them is most likely in: the fallback for
# the scripts the detector has no model of (it read Tamil, Telugu, Amharic, Khmer, ... as English).
# A script shared by several languages maps to the most common one; the multilingual encoder reads
# them all, so what matters is that such a text is never taken for English.
SCRIPT_LANGUAGES = {
    "TAMIL": "ta", "TELUGU": "te", "ETHIOPIC": "am", "KHMER": "km", "SINHALA": "si", "GURMUKHI": "pa",
    "GUJARATI": "gu", "KANNADA": "kn", "MALAYALAM": "ml", "MYANMAR": "my", "GEORGIAN": "ka", "ARMENIAN": "hy",
    "LAO": "lo", "ORIYA": "or", "TIBETAN": "bo", "MONGOLIAN": "mn", "THAANA": "dv", "SYRIAC": "syr",
    "DEVANAGARI": "hi", "BENGALI": "bn", "ARABIC": "ar", "HEBREW": "he", "CYRILLIC": "ru", "GREEK": "el",
    "THAI": "th", "HANGUL": "ko", "HIRAGANA": "ja", "KATAKANA": "ja", "CJK": "zh",
}


def dominant_script(text: str) -> tuple[str | None, float]:
    """The script most of ``text``'s non-Latin letters are written in (a key of
    :data:`SCRIPT_LANGUAGES`, from each character's Unicode name) and its share of all letters;
    ``(None, 0.0)`` for a text in Latin letters only."""
    counts: dict[str, int] = {}
    letters = 0
    for ch in text:
        if not ch.isalpha() and unicodedata.category(ch) not in ("Mn", "Mc", "Lo"):
            continue
        letters += 1
        if ord(ch) < 0x250:
            continue
        name = unicodedata.name(ch, "")
        for script in SCRIPT_LANGUAGES:
            if name.startswith(script) or f" {script} " in f" {name} ":
                counts[script] = counts.get(script, 0) + 1
                break
    if not counts or not letters:
        return None, 0.0
    script = max(counts, key=counts.get)
    if script in ("HIRAGANA", "KATAKANA") or (script == "CJK" and ("HIRAGANA" in counts or "KATAKANA" in counts)):
        script = "HIRAGANA"  # Japanese mixes kana with kanji
    return script, counts.get(script, 0) / letters if script != "HIRAGANA" else sum(
        counts.get(k, 0) for k in ("HIRAGANA", "KATAKANA", "CJK")) / letters


def _function_words(text: str) -> tuple[int, int, int]:
    """(English, other-language, romanised Hindi) function words in ``text``."""
    words = [w.lower() for w in _WORD.findall(text)]
    return sum(w in _EN for w in words), sum(w in _OTHER for w in words), sum(w in _HINGLISH for w in words)


# The detector's confidence from which it overrules a short text's English function word (on three
# words lingua rarely passes 0.35 for a wrong language: "Be brief." NL 0.31, "Me too." NL 0.27).
SURE_SHORT = 0.4


@lru_cache(maxsize=4096)
def language_of(text: str) -> str:
    """The ISO 639-1 code of the language of ``text`` (see the module docstring): ``en`` for an
    empty text or one without letters, ``hi`` for romanised Hindi, ``und`` for a non-Latin text the
    detector cannot place."""
    letters, latin = _latin_share(text)
    if letters == 0:
        return "en"
    script, share = dominant_script(text)
    if script is not None and share >= 0.3 and SCRIPT_LANGUAGES[script] not in _LINGUA_CODES:
        return SCRIPT_LANGUAGES[script]  # a script the detector has no model of: never English
    en, other, hinglish = _function_words(text)
    if latin / letters >= 0.6 and hinglish >= 2 and hinglish > en:
        return "hi"
    det = _lingua()
    n_words = len(_WORD.findall(text))
    if latin / letters >= 0.6 and n_words < 2:
        return "en" if other <= en else "und"  # one word ("ok", "HbA1c 6.7%") tells no n-gram model much
    if det is None:
        if latin / letters < 0.6:
            return "und"
        return "en" if en + other < 2 or en >= other else "und"
    values = det.compute_language_confidence_values(text)
    if not values:
        return "und"
    own = sum(w.lower() in _EN and w.lower() not in _SHARED for w in _WORD.findall(text))
    if latin / letters >= 0.6 and n_words <= 3 and own >= 1 and other == 0 and (
            values[0].language.iso_code_639_1.name == "EN" or values[0].value < SURE_SHORT):
        # "Be brief.": an English function word no other language has ("me", "no" do not count:
        # "Me duele.", "No respiro."), and the detector not sure of another language
        return "en"
    if en + other == 0 and values[0].value < 0.3:
        return "en"  # no function word of any language and no clear guess: drug names, values ("Metformin 500 mg")
    code = values[0].language.iso_code_639_1.name.lower()
    if code != "en" and latin / letters >= 0.6 and en >= 2 and other == 0:
        return "en"  # a short English question lingua took for another Latin-script language
    if code == "en" and script is not None and share >= 0.3:
        return SCRIPT_LANGUAGES[script]  # mostly another script: whatever the n-grams said, not English
    return code


def is_english(text: str) -> bool:
    """True when ``text`` reads as English (:func:`language_of`); an empty text is English."""
    return language_of(text) == "en"


def user_text(conversation) -> str:
    """The user turns of a conversation, joined (what the language guess and the cues read)."""
    return "\n".join(m.content for m in conversation if m.role == "user")
