"""Rule reward for multiple-choice questions (Fathom-Vaidya stage 1).

A completion earns 1.0 when the option it chooses is the key and 0.0 otherwise. The work is in
:func:`extract_choice`, which reads the chosen option letter out of free text; when it cannot (no
answer, an unclosed ``<think>`` block, an ambiguous "A or B") the completion is a *format failure*:
reward 0.0, counted separately so that a trainer or a report can tell "wrong" from "unreadable".

Everything here is pure and stdlib + pydantic, so a TRL or verl adapter is a thin wrapper.

Extraction order (the first rule that yields something decides):

1. explicit answer statements anywhere after the reasoning: ``Answer: C``, ``the answer is (C)``,
   ``Final answer: c``, ``**Answer: C**``, ``\\boxed{C}``, ``\\boxed{\\text{C}}``,
   ``<answer>C</answer>``, or an answer statement naming an option's text. The LAST one wins; if it
   is ambiguous ("A or B") there is no answer.
2. the whole reply is the text of one option.
3. standalone letter lines: a line that is only ``C``, ``(C)``, ``C.``, ``C)``, ``**C**``,
   ``Option C``, or ``C. <the text of option C>``. If they disagree (the options restated), a bare
   letter on the last line decides, else there is no answer.
4. the last line is the text of one option.
5. mentions in the last line: ``(C)``, ``**C**``, ``option C``, ``choice C``; they must agree.

Only letters that are keys of the options count (``A``..``E`` when the options are not given),
and an ``A`` that reads as an article ("A 45-year-old man ...") is not an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from reward.errors import InputError, ScoringError
from reward.jsonl import load_models

DEFAULT_LETTERS: tuple[str, ...] = ("A", "B", "C", "D", "E")

# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


class MCQRow(BaseModel):
    """One multiple-choice question. Extra fields (``meta_info``, ``metamap_phrases``) are ignored.

    ``answer`` is the key's text when the data set carries it; it is informative only, the key is
    ``answer_idx``.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str
    options: dict[str, str] = Field(min_length=2)
    answer_idx: str
    answer: str | None = None

    @field_validator("options")
    @classmethod
    def _letters(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not (len(k) == 1 and "A" <= k <= "Z")]  # MedXpertQA has A..J
        if bad:
            raise ValueError(f"option keys must be capital letters A..Z, got {bad!r}")
        empty = [k for k, text in v.items() if not text.strip()]
        if empty:
            raise ValueError(f"option text is empty for {empty!r}")
        return v

    @field_validator("answer_idx")
    @classmethod
    def _key_is_an_option(cls, v: str, info: ValidationInfo) -> str:
        v = v.strip().upper()
        options = info.data.get("options")
        if options is not None and v not in options:
            raise ValueError(f"answer_idx {v!r} is not one of the option letters {sorted(options)}")
        return v


def load_mcq(path: str | Path) -> list[MCQRow]:
    """Load MCQ rows from JSON Lines; errors name the file, the line and the field."""
    rows = load_models(path, MCQRow)
    if not rows:
        raise InputError("no rows", file=str(path))
    return rows


class MCQResult(BaseModel):
    """The grade of one completion: the extracted ``choice`` (None when unreadable), the reward,
    and whether it was a format failure (no answer could be extracted)."""

    model_config = ConfigDict(frozen=True)

    choice: str | None
    reward: float
    format_failure: bool


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------

_ANSWER_LEAD = re.compile(
    r"\b(?:final\s+answer|(?:correct|best|right|most\s+appropriate)\s+(?:answer|option|choice|response)"
    r"|answer)\b"
    # the link ("is", ":", "would be") is optional for a letter but required for an option's text
    r"(?P<link>[\s*]*(?:[:=\-\u2013\u2014]|(?:is|would\s+be|should\s+be|will\s+be|must\s+be)\b)"
    r"[\s:=*\-\u2013\u2014]*"
    r"(?:(?:most\s+likely|likely|probably|clearly|definitely|therefore|thus)\b)?[\s:,*]*)?"
    r"[\s*]*(?=(?P<tail>[^\n]*))",
    re.IGNORECASE,
)
_ANSWER_TAG = re.compile(r"<answer>\s*(?P<tail>.*?)\s*</answer>", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\boxed\s*\{")
_LATEX_WRAPPER = re.compile(r"\\(?:boxed|text|textbf|textrm|mathrm|mathbf)\s*\{")
# A letter, optionally introduced by option/choice and wrapped in brackets or bold.
_LETTER_HEAD = re.compile(
    r"(?:(?:either|both|between)\s+)?(?P<intro>(?:option|choice|letter)\s*)?(?P<open>[(\[*]*)\s*(?P<letter>[A-Za-z])"
    r"(?![\w-]|\.\w)(?P<close>\s*[)\]*]*)",
    re.IGNORECASE,
)
_SECOND_LETTER = re.compile(
    r"\s*(?:,|/|&|\bor\b|\band\b|\bvs\.?|\bversus\b)\s*(?:(?:option|choice)\s*)?[(\[*]*\s*(?P<letter>[A-Za-z])"
    r"(?![\w-]|\.\w)",
    re.IGNORECASE,
)
# Words that may follow an answer letter "A"; any other lower-case word makes it an article.
_AFTER_LETTER_OK = {"is", "was", "because", "since", "as", "and", "or", "which", "seems", "appears",
                    "would", "should", "best", "fits", "here", "vs", "versus"}
_ARTICLE_NEXT = re.compile(r"\s+(?P<word>[a-z0-9][\w-]*)")

_STANDALONE = re.compile(r"(?:(?:option|choice)\s+)?[(\[]?(?P<letter>[A-Za-z])[)\]]?[.):]?", re.IGNORECASE)
_LETTER_WITH_TEXT = re.compile(r"[(\[]?(?P<letter>[A-Za-z])(?:[)\]]\s*[.:]?|[.:])\s+(?P<text>.+)")
_WEAK_MENTIONS = (
    re.compile(r"\(\s*(?P<letter>[A-Z])\s*\)"),
    re.compile(r"\*\*\s*\(?(?P<letter>[A-Z])\)?[.)]?\s*\*\*"),
    re.compile(r"\b(?:option|choice)\s*\(?(?P<letter>[A-Za-z])\)?(?![\w-]|\.\w)", re.IGNORECASE),
)

_AMBIGUOUS = object()  # an answer statement that names two different options


def _norm(text: str) -> str:
    """Case-fold, drop markdown/LaTeX decoration and collapse whitespace, for text comparison."""
    text = _LATEX_WRAPPER.sub("", text).replace("}", "").replace("$", "")
    text = re.sub(r"[*_`]", "", text)
    text = " ".join(text.split()).casefold()
    return text.strip(" .,;:!\"'()[]")


def _strip_think(completion: str) -> str | None:
    """Return the text outside the reasoning block, or None when the block never closes."""
    text = completion.rsplit("</think>", 1)[1] if "</think>" in completion else completion
    if "<think>" in text:
        # unclosed: everything after <think> is reasoning; keep only what came before it
        text = text.split("<think>", 1)[0]
        return text if text.strip() else None
    return text


def _is_article(letter: str, rest: str, wrapped: bool) -> bool:
    """True when an ``A``/``a`` reads as the English article ("A 45-year-old man", "a beta-blocker")."""
    if wrapped or letter not in "Aa":
        return False
    m = _ARTICLE_NEXT.match(rest)
    return bool(m) and m.group("word").lower() not in _AFTER_LETTER_OK


def _options_in(text: str, options: dict[str, str] | None) -> set[str]:
    """Letters of the options whose text occurs in ``text`` (nested matches keep the longest)."""
    if not options:
        return set()
    hay = _norm(text)
    if not hay:
        return set()
    found = {}
    for key, opt in options.items():
        needle = _norm(opt)
        if needle and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay):
            found[key] = needle
    # "Aspirin" inside "Aspirin and clopidogrel": the longer option is the one meant
    return {k for k, n in found.items() if not any(n != m and n in m for m in found.values())}


def _resolve(tail: str, keys: set[str], options: dict[str, str] | None) -> str | object | None:
    """What an answer statement's tail names: a letter, ``_AMBIGUOUS`` or None (nothing)."""
    tail = _LATEX_WRAPPER.sub("", tail).replace("}", "").replace("$", "").strip()
    # an option whose text starts with a letter word ("A Western blot will show ...") read in full
    # is that option, not the letter A
    if options:
        head = _norm(tail)
        starts = {k for k, v in options.items()
                  if len(_norm(v).split()) > 1 and re.match(re.escape(_norm(v)) + r"(?!\w)", head)}
        starts = {k for k in starts if not any(k != j and _norm(options[k]) in _norm(options[j]) for j in starts)}
        if len(starts) == 1:
            return starts.pop().upper()
    m = _LETTER_HEAD.match(tail)
    if m and m.group("letter").upper() in keys:
        letter = m.group("letter")
        wrapped = bool(m.group("intro") or m.group("open").strip() or m.group("close").strip())
        rest = tail[m.end("letter"):]
        if not _is_article(letter, rest, wrapped):
            second = _SECOND_LETTER.match(tail, m.end())
            if second:
                other = second.group("letter")
                if (other.upper() in keys and other.upper() != letter.upper()
                        and not _is_article(other, tail[second.end():], False)):
                    return _AMBIGUOUS
            return letter.upper()
    hits = _options_in(tail, options)
    if len(hits) == 1:
        return hits.pop()
    if len(hits) > 1:
        return _AMBIGUOUS
    return None


def _boxed_contents(text: str) -> list[tuple[int, str]]:
    """``(position, content)`` of each ``\\boxed{...}``, with nested braces matched."""
    out = []
    for m in _BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append((m.start(), text[m.end():i - 1]))
    return out


def _standalone_letter(line: str, keys: set[str], options: dict[str, str] | None) -> tuple[str, bool] | None:
    """``(letter, pure)`` when ``line`` is nothing but an answer letter (``pure``) or
    "C. <the text of option C>" (not pure: it may be one line of a restated option list)."""
    bare = re.sub(r"\*\*|__|`", "", re.sub(r"^[\s#>]+", "", line)).strip()
    m = _STANDALONE.fullmatch(bare)
    if m and m.group("letter").upper() in keys:
        return m.group("letter").upper(), True
    m = _LETTER_WITH_TEXT.fullmatch(bare)
    if m and options:
        letter = m.group("letter").upper()
        if letter in keys and _norm(m.group("text")) == _norm(options[letter]):
            return letter, False
    return None


def _text_is_option(text: str, options: dict[str, str] | None) -> str | None:
    """The letter of the one option whose text ``text`` is (normalised), else None."""
    if not options or _norm(text).upper() in {k.upper() for k in options}:
        return None  # a lone option letter is that letter, even where an option's text is a letter
    exact = [k for k, v in options.items() if _norm(v) and _norm(v) == _norm(text)]
    return exact[0].upper() if len(exact) == 1 else None


def extract_choice(completion: str, options: dict[str, str] | None = None) -> str | None:
    """Return the option letter a completion chooses, or None when it chooses none or is ambiguous.

    Args:
        completion: the model's reply; a ``<think>...</think>`` block is ignored (only the text
            after the last ``</think>`` is read) and an unclosed ``<think>`` means no answer.
        options: the question's options (letter -> text). They restrict which letters count and
            let an answer be given by the option's text. Without them, ``A``..``E`` count.
    """
    text = _strip_think(completion)
    if text is None or not text.strip():
        return None
    options = {k.strip().upper(): v for k, v in options.items()} if options else None
    keys = set(options) if options else set(DEFAULT_LETTERS)

    # 1. explicit answer statements; the last one decides
    statements: list[tuple[int, object]] = []
    for m in _ANSWER_LEAD.finditer(text):
        by_text = options if m.group("link") else None
        statements.append((m.start(), _resolve(m.group("tail"), keys, by_text)))
    for m in _ANSWER_TAG.finditer(text):
        statements.append((m.start(), _resolve(m.group("tail"), keys, options)))
    for pos, content in _boxed_contents(text):
        statements.append((pos, _resolve(content, keys, options)))
    resolved = [(pos, r) for pos, r in statements if r is not None]
    if resolved:
        last = max(resolved, key=lambda t: t[0])[1]
        return None if last is _AMBIGUOUS else last  # type: ignore[return-value]

    lines = [ln for ln in text.splitlines() if ln.strip()]
    last_line = lines[-1]

    # 2. the whole reply is an option's text
    by_text = _text_is_option(text, options)
    if by_text:
        return by_text

    # 3. lines that are only a letter
    standalone = [_standalone_letter(ln, keys, options) for ln in lines]
    letters = [s[0] for s in standalone if s]
    if letters:
        if len(set(letters)) == 1:
            return letters[0]
        # disagreeing lines (e.g. the options restated): only a bare letter on the last line decides
        last = standalone[-1]
        return last[0] if last and last[1] else None

    # 4. the last line is an option's text
    by_text = _text_is_option(last_line, options)
    if by_text:
        return by_text

    # 5. mentions in the last line
    mentioned = set()
    for pat in _WEAK_MENTIONS:
        for m in pat.finditer(last_line):
            letter = m.group("letter")
            # "(A)", "**A**" and "option A" are never articles; a lower-case "option a" may be
            if letter.upper() in keys and not (letter == "a" and _is_article(letter, last_line[m.end():], False)):
                mentioned.add(letter.upper())
    if len(mentioned) == 1:
        return mentioned.pop()
    return None


# ---------------------------------------------------------------------------------------------
# Reward
# ---------------------------------------------------------------------------------------------


def grade_mcq(completion: str, answer_idx: str, options: dict[str, str] | None = None) -> MCQResult:
    """Grade one completion against the key ``answer_idx``; see :func:`extract_choice`."""
    choice = extract_choice(completion, options)
    reward = 1.0 if choice is not None and choice == answer_idx.strip().upper() else 0.0
    return MCQResult(choice=choice, reward=reward, format_failure=choice is None)


def mcq_reward(completion: str, answer_idx: str, options: dict[str, str] | None = None) -> float:
    """1.0 when the completion's chosen option is ``answer_idx``, else 0.0 (also when unreadable)."""
    return grade_mcq(completion, answer_idx, options).reward


def score_mcq(rows: Sequence[MCQRow], completions: Sequence[str]) -> dict:
    """Score ``completions[i]`` against ``rows[i]``.

    Returns ``{"accuracy", "format_failures", "rewards"}``: accuracy is the mean reward over all
    rows (an unreadable completion counts as wrong), ``format_failures`` counts completions from
    which no answer could be extracted, and ``rewards`` is in the order of the input.
    """
    if len(rows) != len(completions):
        raise ScoringError(f"{len(rows)} rows but {len(completions)} completions")
    if not rows:
        raise ScoringError("no rows to score")
    results = [grade_mcq(c, r.answer_idx, r.options) for r, c in zip(rows, completions)]
    rewards = [r.reward for r in results]
    return {
        "accuracy": sum(rewards) / len(rewards),
        "format_failures": sum(r.format_failure for r in results),
        "rewards": rewards,
    }
