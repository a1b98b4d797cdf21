"""Instruction cues: hear the user's instructions on form (format, length, language, exclusions,
audience) in any common phrasing, and switch on the instruction-following leaves they call for;
and hear a user who says they are a health professional ("I'm a practice nurse", "je suis
médecin"), which switches on the clinician-register leaf. A restriction stated as "only ..."
("only suggest things I can do at home") is an exclusion.

An instruction has no topic, so an embedding of the prompt does not find it: "in a table please"
sits nowhere near "If the user requests a format ... uses that format". A cue is a request shape,
not a keyword: a format noun counts when it follows "in/as/into (a)" or a request verb ("give me
a table", "put it in a grid", "as JSON"), never alone ("table salt", "the chart at the clinic");
a language counts when a reply is asked for in it ("answer in German", "she only reads
Portuguese", "en français") or when the user writes in it (:func:`reward.router.language.is_english`),
not as an adjective ("in Chinese medicine", "German measles"). Patterns cover English and the
common forms in Spanish, French, German, Portuguese and Chinese.

Measured on ``reward/data/instruction_phrasings.jsonl`` (phrasings of our own, labelled before the
patterns were run on them): see ``docs/routing.md`` and ``tests/reward/router/test_cues.py``.

Each kind maps to leaves (:data:`CUE_LEAVES`); a tree without those leaves gets none. The
taxonomy's own ``cues`` (regular expressions on a leaf) still work alongside these.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence

from reward.router.language import is_english

KINDS = ("format", "length", "language", "exclusion", "audience", "professional")

CUE_LEAVES: dict[str, tuple[str, ...]] = {
    "format": ("if_requested_format",),
    "length": ("if_length_limit",),
    "language": ("if_same_language",),
    "exclusion": ("if_respects_exclusions",),
    "audience": ("if_named_audience", "if_reading_level"),
    # the user says they are a health professional: the reply is expected in a clinician's register
    "professional": ("cm_professional_register",),
}
# machine-readable formats also switch on the leaf that checks the output parses
MACHINE_READABLE = re.compile(r"\b(json|csv|xml|yaml)\b", re.IGNORECASE)

_NUM = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of)"
_LANGS = (r"(?:english|spanish|french|german|portuguese|italian|chinese|mandarin|cantonese|japanese|korean|"
          r"arabic|hindi|urdu|bengali|punjabi|russian|polish|vietnamese|tagalog|turkish|dutch|swahili|persian|"
          r"farsi|greek|hebrew|thai|indonesian|ukrainian|romanian|somali|amharic|tamil|gujarati)")
# "in Chinese medicine", "in French cuisine": a language used as an adjective
_ADJ_USE = (r"(?!\s+(?:medicine|food|foods|cuisine|herbs?|herbal|culture|diet|style|people|population|"
            r"patients|hospitals?|doctors?|measles|flu|encephalitis|guidelines?|studies|research))")
_FORMAT_NOUN = (r"(?:tables?|charts?|grids?|lists?|checklists?|bullets?|bullet[- ]points?|bulleted|numbered|"
                r"columns|headings?|sections|json|csv|markdown|q\s?&\s?a|point form|step[- ]by[- ]step|"
                r"points,? one per line|flowchart|timeline)")
_REQUEST_VERB = (r"(?:give|put|make|write|format|present|lay|show|break|use|summari[sz]e|organi[sz]e|draw|"
                 r"answer|reply|respond|list|arrange|structure|set out|turn)")
_AUDIENCE = (r"(?:\d+[- ]?(?:year|yr)[- ]?olds?|child|children|kids?|son|daughter|teen(?:ager)?s?|grand(?:mother|"
             r"father|ma|pa|parents?)|mother|mum|mom|father|dad|parents?|patients?|colleagues?|nurses?|"
             r"caregivers?|carers?|students?|class|husband|wife|partner|team|staff|residents?|family|"
             r"doctor|gp|clinicians?|pharmacist|boss|employer|school|teacher|elderly|lay (?:person|reader))")
# health professions, the medical "-ologists" by name ("biologist", "astrologist" are not);
# a resident or intern "of Ohio" or "at a bank" is not one
_CLINICIAN = (r"(?:nurse|doctor|physician|gp|general\s+practitioner|pharmacist|paramedic|emt|medic|midwife|"
              r"clinician|surgeon|dentist|physiotherapist|physio|occupational\s+therapist|dietitian|dietician|"
              r"optometrist|radiographer|anaesthetist|anesthetist|registrar|house\s+officer|rn|"
              r"(?:resident|intern)(?!\s+(?:of|at|in|for|with)\b)|(?:junior|foundation)\s+doctor|"
              r"(?:medical|nursing|pharmacy)\s+student|nurse\s+practitioner|physician\s+assistant|"
              r"(?:cardi|onc|neur|gastroenter|dermat|endocrin|nephr|pulmon|rheumat|haemat|hemat|radi|path|ur|"
              r"gynaec|gynec|an(?:a)?esthesi|immun|ophthalm|audi|psych|epidemi|toxic|pharmac|hepat|neonat|"
              r"allergi|infecti)ologist|psychiatrist|paediatrician|pediatrician|obstetrician|"
              r"health\s*care\s+(?:worker|professional|assistant)|hcp)")
# what follows a profession that is not the user's own: a possessive ("a nurse's aide"), "of"
# ("a doctor of philosophy"), or a reporting verb soon after ("as a doctor friend told me")
_NOT_SELF = (r"(?!['’]s\b|\s+(?:of|patients?|receptionist|practice|surgery|appointment|alert|visit)\b|"
             r"[^.,;:!?\n]{0,25}\b(?:told|tells|said|says|explained|advised|recommended|suggested|warned|"
             r"mentioned|put\s+it|would|once)\b)")

# where a request starts: a sentence, "please", or (for "only") after a comma
_REQUEST_START = r"(?:^|[.!?;:\n]\s*|\bplease\s+|,\s*)"

PATTERNS: dict[str, tuple[str, ...]] = {
    "format": (
        rf"\b(?:in|as|into|in the form of)\s+(?:an?\s+|the\s+)?(?:\w+\s+)?{_FORMAT_NOUN}\b",
        rf"\b{_REQUEST_VERB}\b[^.?!\n]{{0,40}}\b{_FORMAT_NOUN}\b",
        r"\btabulate\b",
        r"\b(?:table|list|chart|bullet points)\s*,?\s*(?:please|pls)\b",
        r"\b(?:en\s+(?:forma\s+de\s+)?(?:una\s+)?(?:tabla|lista)|con\s+viñetas|(?:hazme|haz|dame)\s+una\s+(?:tabla|lista)|en\s+puntos)\b",
        r"\b(?:sous\s+forme\s+de\s+(?:tableau|liste)|en\s+(?:tableau|liste)|à\s+puces|fais(?:-moi)?\s+un\s+tableau)\b",
        r"\b(?:als\s+(?:tabelle|liste|stichpunkte|aufzählung)|in\s+(?:einer\s+)?tabelle|in\s+stichpunkten)\b",
        r"\b(?:em\s+(?:forma\s+de\s+)?(?:uma\s+)?(?:tabela|lista)|em\s+t[oó]picos)\b",
        r"(?:用表格|列成表|表格形式|列表|分点|要点形式)",
    ),
    "length": (
        rf"\b(?:max(?:imum)?(?:\s+of)?|at most|no more than|not more than|under|below|less than|fewer than|within|"
        rf"up to|(?:a\s+)?limit\s+of|limit"
        rf"(?:ed)?\s+(?:it\s+|this\s+|your\s+(?:answer|reply|response)\s+)?to|keep\s+(?:it\s+)?(?:to|under|within|"
        rf"below)|in|at least|only)\s+{_NUM}\s*[- ]?(?:words?|sentences?|lines?|paragraphs?|bullet[- ]?points?|"
        rf"bullets|points|characters|tips)\b",
        r"\b\d+\s*(?:words?|sentences?|lines?|characters)\s*(?:max(?:imum)?|tops|or (?:less|fewer)|limit)\b",
        rf"\b{_NUM}\s+(?:key\s+|main\s+)?(?:points|tips|sentences|lines|bullets|words|things)\s+(?:only|max(?:imum)?|at most)\b",
        rf"\b(?:top|just|only)\s+{_NUM}\s+(?:key\s+|main\s+)?(?:tips|points|things|reasons|bullets|steps)\b",
        r"\b(?:be\s+(?:brief|concise|short)|briefly|keep\s+(?:it|this|the\s+answer|your\s+answer|the\s+reply)\s+"
        r"(?:short|brief|concise|simple|under|below|to\s+(?:a\s+minimum|a\s+(?:line|sentence|paragraph)\b|\d+|"
        r"one\b|two\b|three\b|four\b|five\b|a\s+few\b|a\s+couple\b|the\s+point\b|the\s+essentials\b))|short\s+(?:answer|version|reply|response)|make\s+it\s+"
        r"(?:short|shorter|concise|brief)|concise(?:ly)?|tl;?\s?dr|in\s+a\s+(?:line|sentence|nutshell|paragraph)|"
        r"a\s+line\s+or\s+two|one[- ]word\s+answer|summari[sz]e\s+(?:it\s+|this\s+)?in|short\s+and\s+sweet|"
        r"the\s+gist)\b",
        r"\b(?:respuesta\s+corta|breve(?:mente)?|en\s+pocas\s+palabras|m[aá]ximo\s+\d+\s+(?:palabras|frases|líneas)|"
        r"en\s+(?:una|dos|tres|\d+)\s+(?:frases?|líneas?))\b",
        r"\b(?:bri[eè]vement|en\s+(?:une|deux|trois|\d+)\s+phrases?|phrases?\s+maximum|réponse\s+courte|"
        r"en\s+quelques\s+mots|fais\s+court)\b",
        r"\b(?:ganz\s+kurz|kurz\s+(?:antworten|erklären|zusammenfassen)|höchstens\s+\w+\s+(?:sätze|wörter|zeilen)|"
        r"in\s+(?:einem|zwei|drei|\d+)\s+sätzen|erklär\w*\s+(?:mir\s+)?kurz)\b",
        r"\b(?:em\s+poucas\s+palavras|resposta\s+curta|resumidamente|brevemente|no\s+máximo\s+\d+\s+(?:palavras|frases))\b",
        r"(?:简短|简单回答|一句话|不超过\s*\d+\s*字|简要|简单说)",
    ),
    "language": (
        rf"\b(?:in|into)\s+(?:plain\s+|simple\s+)?{_LANGS}\b{_ADJ_USE}",
        rf"\b(?:reply|respond|answer|write|translate|say|put|explain|speaks?|reads?|understands?)\b[^.?!\n]{{0,40}}"
        rf"\b{_LANGS}\b{_ADJ_USE}",
        r"\b(?:only|just)\s+(?:speaks?|reads?|understands?)\s+\w+",
        r"\ben\s+(?:français|espagnol|anglais|allemand|portugais|italien|chinois|arabe)\b",
        r"\ben\s+(?:español|inglés|francés|portugués|alemán|italiano|chino|catalán)\b",
        r"\bauf\s+(?:deutsch|englisch|spanisch|französisch|türkisch|italienisch)\b",
        r"\bem\s+(?:português|inglês|espanhol|francês)\b",
        r"(?:用(?:中文|英文|英语|汉语|普通话|粤语)|说中文)",
    ),
    "exclusion": (
        r"\b(?:don'?t|do\s+not|please\s+don'?t|no\s+need\s+to|never)\s+(?:suggest|recommend|mention|include|tell\s+me|"
        r"bring\s+up|give\s+me|list|talk\s+about|go\s+into|offer|propose)\b",
        r"\bwithout\s+(?:mentioning|suggesting|recommending|including|using|any|discussing|bringing)\b",
        r"\b(?:other\s+than|apart\s+from|aside\s+from|besides|except(?:\s+for)?)\b[^.?!\n]{0,50},?\s*"
        r"(?:what|which|how|any|are\s+there|is\s+there|can|could|anything)\b",
        r"\bno\s+(?:medications?|medicines?|drugs?|pills?|tablets?|surgery|supplements?|meds)\b\s*(?:options|please|,|\.|!|$)",
        r"\bi\s+(?:don'?t|do\s+not)\s+want\s+(?:any|anything|to\s+take|medication|medicine|pills|drugs)\b",
        r"\b(?:exclud(?:e|ing)|leave\s+(?:out|\w+\s+out)|skip\s+(?:the|any|all)|not\s+interested\s+in|"
        r"avoid\s+(?:recommending|suggesting|mentioning|including)|nothing\s+with)\b",
        r"\b(?:sin\s+(?:medicamentos|pastillas|fármacos|medicinas)|no\s+me\s+(?:recomiendes|sugieras|digas)|excepto)\b",
        r"\b(?:sans\s+(?:médicaments?|traitement|médicament)|ne\s+(?:me\s+)?(?:propose|conseille|suggère|parle)\s+pas)\b",
        r"\b(?:ohne\s+(?:medikamente|tabletten|arzneimittel)|keine\s+(?:medikamente|tabletten)\s+bitte)\b",
        r"\bsem\s+(?:remédios?|medicamentos?|medicação)\b",
        r"(?:不要(?:推荐|建议|提)|不吃药)",
        # a constraint stated as what the user cannot have (issue 47: "nothing that makes me drowsy"
        # routed no instruction leaf): "nothing that ...", "non-drowsy", "I can't take X" (not "I can't
        # take it anymore"), in the same languages
        r"\bnothing\s+(?:that|which)\s+(?:makes?|causes?|would|will|might|could|contains?|has|interacts?)\b",
        r"\bnon[- ]?drowsy\b",
        r"\bi\s+(?:can'?t|cannot|can\s+not|am\s+not\s+allowed\s+to|must\s+not|mustn'?t)\s+(?:take|have|use|eat|drink)\s+"
        r"(?!it\b|this\b|that\b|anymore\b|any\s+more\b|much\b|the\s+pain\b)\w+",
        r"\bnada\s+que\s+(?:me\s+)?(?:d[eéê]|cause|provoque|contenga|tenga|contenha)\b",
        r"\bno\s+puedo\s+(?:tomar|usar|comer)\b|\bnão\s+posso\s+(?:tomar|usar|comer)\b",
        r"\brien\s+qui\s+(?:fasse|donne|provoque|contienne)\b|\bje\s+ne\s+peux\s+pas\s+(?:prendre|utiliser|manger)\b",
        r"\bnichts,?\s+was\s+(?:müde|schläfrig|\w+\s+macht)\b|\bich\s+(?:darf|kann)\s+kein(?:e|en)?\s+\w+\s+(?:nehmen|essen)\b",
        r"(?:不要(?:让我|会让我)|不能(?:吃|用|服用))",
        # a restriction stated as "only ...": what the user allows, the rest excluded
        # (a request: at the start of a sentence, after "please" or a comma; not "we only
        # recommend a re-check" inside a message to rewrite, nor "my doctor would only recommend")
        rf"{_REQUEST_START}only\s+(?:suggest|recommend|mention|include|list|give\s+me|tell\s+me\s+about)\b",
        # "just" restricts only with a kind named ("just recommend natural options"), not "just
        # list the side effects"
        rf"{_REQUEST_START}just\s+(?:suggest|recommend|mention|include|list)\s+(?:\w+\s+){{0,2}}?"
        r"(?:natural|home|herbal|non-\w+|lifestyle|diet(?:ary)?|plant-based|over-the-counter|otc|drug-free)\b",
        r"\b(?:i|we)\s+(?:only|just)\s+want\s+(?:\w+[\s-]+){0,3}?(?:options|remedies|advice|ideas|suggestions|"
        r"approaches|treatments|changes|methods|tips)\b(?!\s+to\b)",
        r"\bkeep\s+it\s+to\s+(?:\w+\s+){0,3}?(?:things|options|remedies|changes|treatments)\b",
        r"\b(?:suggest|recommend|send\s+me|refer\s+me|tell\s+me\s+to)\b[^.?!\n]{0,80}\bunless\s+(?:it['’]?s|it\s+is)\s+"
        r"(?:really\s+|truly\s+|absolutely\s+|strictly\s+)?(?:necessary|needed|essential|unavoidable)\b",
        r"\b(?:s[oó]lo|solamente|únicamente)\s+(?:recomi[eé]nda(?:me)?|sugi[eé]re(?:me)?|dime|quiero\s+(?:remedios|"
        r"opciones|consejos|tratamientos|cosas\s+que))\b",
        r"\b(?:seulement|uniquement)\s+des\s+(?:solutions|remèdes|conseils|options)\b",
        r"\b(?:empfiehl|empfehlen\s+sie|nenne|nennen\s+sie)\s+(?:mir\s+)?(?:bitte\s+)?nur\b",
        r"\b(?:só|somente|apenas)\s+(?:quero\s+(?:remédios|opções|dicas|tratamentos)|remédios\s+caseiros|opções)\b",
        r"(?:只(?:推荐|建议)|只想要(?:在家|天然|非药物|食疗))",
    ),
    "audience": (
        rf"\b(?:explain|write|put|make|draft|say|tell|describe|word|phrase|adapt|rewrite)\b[^.?!\n]{{0,60}}\b(?:for|to)"
        rf"\s+(?:(?:my|a|an|our|the|his|her|their)\s+(?:\w+\s+){{0,2}})?{_AUDIENCE}\b",
        rf"\btell\s+(?:my|our)\s+(?:\w+\s+)?{_AUDIENCE}\b",
        rf"\b(?:version|summary|leaflet|handout|explanation)\s+for\s+(?:(?:my|a|an|our|the)\s+)?(?:\w+\s+)?{_AUDIENCE}\b",
        r"\b(?:like|as\s+if)\s+(?:i'?m|i\s+am|to)\s+(?:a\s+)?(?:five|5|\d+|a\s+child|a\s+kid|child|kid)\b",
        r"\b(?:\w+[- ]grade|reading|grade\s+\d+)\s+(?:reading\s+)?level\b",
        r"\b(?:so|that|such\s+that)\s+(?:a|my|an)\s+(?:\w+\s+)?(?:child|kid|teen(?:ager)?|\d+[- ]year[- ]old)\s+"
        r"(?:could|can|would|will)\s+understand",
        r"\bunderstandable\s+(?:for|to)\b",
        r"\b(?:simple|easy|plain)\s+(?:words|language|terms|english)\b|\blay(?:man|person)?'?s?\s+terms\b",
        r"\bexpl[ií]ca(?:selo|lo|le|me)?\b[^.?!\n]{0,40}\ba\s+(?:mi|un|una)\s+(?:hij[oa]|niñ[oa]|abuel[oa]|madre|padre|paciente)",
        r"\b(?:comme\s+(?:à|a)\s+un\s+enfant|pour\s+(?:un|une|mon|ma)\s+(?:enfant|fils|fille|patient|patiente|grand-mère|grand-père))\b",
        r"\b(?:für\s+(?:ein|mein|meine|meinen)\s+(?:kind|sohn|tochter|oma|opa|patienten)|wie\s+für\s+ein\s+kind)\b",
        r"\bpara\s+(?:o\s+|a\s+)?(?:meu|minha|uma|um)\s+(?:filho|filha|criança|avó|avô|paciente)\b",
        r"(?:给(?:孩子|小孩|老人)|小孩(?:子)?能听懂|通俗易懂)",
    ),
    "professional": (
        # a self-description ("I'm a practice nurse", "as an ICU nurse", "I work as a midwife"),
        # not a mention of someone else's profession ("my daughter is a nurse", "as my doctor said")
        rf"\b(?:i['’]?m|i\s+am|as|speaking\s+as|i\s+work\s+as|working\s+as)\s+(?:an?\s+)(?:[\w-]+\s+){{0,2}}?"
        rf"{_CLINICIAN}\b{_NOT_SELF}",
        r"\b(?:clinical|medical|technical|professional)\s+(?:terms|terminology|language|jargon|detail)\s+"
        r"(?:is|are)\s+(?:fine|ok(?:ay)?|welcome)\b|\b(?:technical|clinical)\s+terms\s+welcome\b",
        r"(?<!no )\bsoy\s+(?:una?\s+)?(?:enfermer[oa]|m[ée]dic[oa]|doctora?|farmac[ée]utic[oa]|matrona|param[ée]dico|"
        r"estudiante\s+de\s+medicina)\b",
        r"\bje\s+suis\s+(?:une?\s+)?(?:m[ée]decin|infirmi(?:er|[èe]re)|pharmacien(?:ne)?|sage-femme|interne|"
        r"[ée]tudiante?\s+en\s+m[ée]decine)\b",
        r"\bich\s+bin\s+(?:ein(?:e)?\s+)?(?:arzt|ärztin|krankenpfleger(?:in)?|krankenschwester|pflegekraft|"
        r"apotheker(?:in)?|hebamme|medizinstudent(?:in)?|notfallsanitäter(?:in)?)\b",
        r"\bsou\s+(?:uma?\s+)?(?:m[ée]dic[oa]|enfermeir[oa]|farmac[êe]utic[oa]|parteira|estudante\s+de\s+medicina)\b",
        r"(?:(?<!不)我是(?:一名)?(?:医生|护士|药剂师|药师|医学生|助产士)(?!的|吗))",
    ),
}

_COMPILED = {k: tuple(re.compile(p, re.IGNORECASE) for p in ps) for k, ps in PATTERNS.items()}


@functools.cache
def fingerprint() -> str:
    """Hash of the patterns and the leaves they switch on: part of the routing cache key, so a
    routing stored before a pattern changed is not reused."""
    payload = json.dumps([PATTERNS, CUE_LEAVES, MACHINE_READABLE.pattern], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def detect(text: str) -> set[str]:
    """The instruction kinds (:data:`KINDS`) that ``text`` (the user's turns) states."""
    found = {k for k, rx in _COMPILED.items() if any(r.search(text) for r in rx)}
    if text.strip() and not is_english(text):
        found.add("language")
    return found


def cue_leaves(text: str, leaf_ids: Sequence[str] | set[str]) -> dict[str, str]:
    """Leaf id -> the cue kind that switched it on, for the leaves of ``leaf_ids`` that ``text`` calls for."""
    out: dict[str, str] = {}
    available = set(leaf_ids)
    for kind in sorted(detect(text)):
        for lid in CUE_LEAVES[kind]:
            if lid in available:
                out.setdefault(lid, kind)
        if kind == "format" and MACHINE_READABLE.search(text) and "if_machine_readable" in available:
            out.setdefault("if_machine_readable", kind)
    return out
