"""A small, dependency-free guess of whether a user's text is English.

Routers use it twice: a prompt that is not in English is embedded with the multilingual encoder
(the English MiniLM cannot read it), and it switches on the "reply in the user's language"
instruction leaf. The guess reads the script first (a text whose letters are mostly outside the
Latin alphabet is not English) and, for Latin text, counts common function words of English
against those of the other frequent languages of health questions (Spanish, French, German,
Portuguese, Italian, Dutch, Polish, Turkish, Indonesian, Swahili, Tagalog, and Hindi or Urdu
written in Latin letters). A short English
request with a foreign phrase ("en français s'il vous plaît") stays English; the instruction cues
hear the request itself.
"""

from __future__ import annotations

import re
import unicodedata

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
zeer kan mag
w z na do że jest są mam ma mój moja nie jak co kiedy gdzie dlaczego dla bez czy się
ve bir bu şu ne nasıl için ile değil çok var yok
yang dan di ke dari ini itu saya tidak dengan untuk apa bagaimana
na ya kwa ni si wa za katika hii
ang ng sa mga ako ko hindi po ba
hai hain ka ki ke ko mein se aur kya nahi nahin mera meri mere bahut bahot hum aap yeh woh kaise kyun kyon
raha rahi rhi rha hota hoti kar kare karu karna lekin bhi""".split()) - _EN


def _latin_share(text: str) -> tuple[int, int]:
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if ord(ch) < 0x250 or "LATIN" in unicodedata.name(ch, ""):
                latin += 1
    return letters, latin


def is_english(text: str) -> bool:
    """True when ``text`` reads as English (see the module docstring); an empty text is English."""
    letters, latin = _latin_share(text)
    if letters == 0:
        return True
    if latin / letters < 0.6:
        return False
    words = [w.lower() for w in _WORD.findall(text)]
    en = sum(w in _EN for w in words)
    other = sum(w in _OTHER for w in words)
    if en + other < 2:
        return True  # too few function words to tell: a fragment, a list of drug names
    return en >= other


def user_text(conversation) -> str:
    """The user turns of a conversation, joined (what the language guess and the cues read)."""
    return "\n".join(m.content for m in conversation if m.role == "user")


def language_of(text: str) -> str:
    """The language of ``text`` as a report label: ``en`` for English, ``other`` otherwise."""
    return "en" if is_english(text) else "other"
