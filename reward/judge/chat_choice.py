"""Reading a choice-mode (yes/no) verdict out of a chat API reply.

The reply carries the answer token's ``top_logprobs`` (``[{"token", "logprob"}, ...]``) when the
server honours ``logprobs``. Each listed token is read for the answer word it spells: case,
spaces and punctuation around it do not matter (``" Yes"``, ``"No."`` and ``"yes,"`` count for
their word; ``"Yesterday"`` counts for none). Then:

- both words listed: p_yes is yes / (yes + no), each summed over its spellings;
- one word listed in a FULL list (as many entries as were asked for): the other word ranks below
  every listed token, so its probability is at most the smallest listed one; that bound stands
  in for it, and the verdict's ``explanation`` says so. The result is never exactly 1 or 0;
- one word listed in a SHORTER list (a gateway that cut it, or a single entry): nothing bounds
  the other word, so the item fails with that reason (never a certain verdict);
- neither word listed: the item fails;
- no logprobs at all (a server that ignores the field): the reply's first word decides
  (``"Yes, but..."`` is yes, ``"No."`` is no) with p_yes exactly 1.0 or 0.0, and the
  ``explanation`` says that it is read from the text, not a probability. Any other text fails.

Logprobs that are not probabilities: a listed token at -inf or at vLLM's -9999.0 stand-in for it
was masked (by the choice grammar): it is left out, counts for nothing and bounds nothing. When
only such entries spell one of the answer words, or a logprob is NaN or positive (+inf, +800: a
probability above 1), the reply is a bad reply
(:class:`~reward.judge.replies.BadReply`): the transport retries it, and then the item fails. Such
values are never read as a verdict (an exp(NaN) compared as "not <= 0" read as a certain "yes").
"""

from __future__ import annotations

import math
import re

from reward.judge.parsing import CLAMPED_LOGPROB, MAX_LOGPROB
from reward.judge.replies import BadReply
from reward.judge.types import Verdict

YES_WORDS, NO_WORDS = ("yes",), ("no",)
_WORD = re.compile(r"[^\W\d_]+")  # the first run of letters


def answer_word(token: str, *, prefixes: bool = False) -> str | None:
    """``"yes"``, ``"no"`` or None for one listed token or a reply's text.

    ``prefixes``: the answer was constrained to the two words (vLLM's choice grammar), so a token
    that starts one of them (``y`` of ``yes``) counts for it; unconstrained, only whole words do."""
    m = _WORD.search(str(token))
    if m is None or str(token)[:m.start()].strip(" \t\n\"'`*([{"):
        return None  # no word, or something other than quoting/markup before it
    word = m.group(0).lower()
    yes = word in YES_WORDS or (prefixes and any(w.startswith(word) for w in YES_WORDS))
    no = word in NO_WORDS or (prefixes and any(w.startswith(word) for w in NO_WORDS))
    if yes == no:  # neither, or a prefix of both
        return None
    return "yes" if yes else "no"


def usable_top(top: list[dict], *, prefixes: bool = False) -> list[dict]:
    """The listed tokens that carry a probability: masked ones (-inf, or vLLM's -9999.0) left out.

    Raises:
        BadReply: a logprob is NaN, +inf or not a number, or an answer word is listed only masked.
    """
    out, masked = [], []
    for entry in top or []:
        if not isinstance(entry, dict) or entry.get("logprob") is None:
            continue
        try:
            lp = float(entry["logprob"])
        except (TypeError, ValueError) as exc:
            raise BadReply(f"a logprob in the reply is not a number: {entry!r:.120}") from exc
        if math.isnan(lp) or lp > MAX_LOGPROB:  # NaN, +inf, or a probability above 1
            raise BadReply(f"logprob {lp:g} for {str(entry.get('token'))!r:.40} in the reply (no probability: a "
                           "broken server)")
        if lp <= CLAMPED_LOGPROB:  # -inf or its stand-in: masked by the grammar, probability 0
            masked.append(answer_word(str(entry.get("token", "")), prefixes=prefixes))
            continue
        out.append(entry)
    words = {answer_word(str(e.get("token", "")), prefixes=prefixes) for e in out}
    hidden = sorted({w for w in masked if w} - words)
    if hidden:  # an answer the constraint allows cannot be masked: another tokenizer or a broken server
        raise BadReply(f"the answer word(s) {hidden} are listed only at a masked logprob (-inf or vLLM's "
                       f"{CLAMPED_LOGPROB:g}): no probability to read")
    return out


def sums_from_top(top: list[dict], *, prefixes: bool = False) -> tuple[float, float, list[float]]:
    """(p of yes spellings, p of no spellings, the probabilities of every other listed token);
    the list is read through :func:`usable_top` (which may raise BadReply)."""
    py = pn = 0.0
    others: list[float] = []
    for entry in usable_top(top, prefixes=prefixes):
        p = math.exp(float(entry["logprob"]))
        word = answer_word(str(entry.get("token", "")), prefixes=prefixes)
        if word == "yes":
            py += p
        elif word == "no":
            pn += p
        else:
            others.append(p)
    return py, pn, others


def p_yes_from_top(top: list[dict], *, prefixes: bool = False) -> float | None:
    """p_yes when both answer words are in the list (yes / (yes + no)), else None."""
    py, pn, _ = sums_from_top(top, prefixes=prefixes)
    if py <= 0.0 or pn <= 0.0:
        return None
    return py / (py + pn)


def choice_verdict(data: dict, *, requested: int, prefixes: bool = False) -> Verdict:
    """The verdict of one chat choice reply (see the module docstring for every case).

    Raises:
        BadReply: a logprob that is no probability (NaN, +inf, an answer only masked): the
            transport retries such a reply (``ChatJudge`` reads replies through this)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        return Verdict.failed(f"no choice in the judge's answer: {str(data)[:200]}")
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    top = None
    if isinstance(logprobs, dict):
        try:
            top = logprobs["content"][0]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            top = None
    if not top:
        text = ""
        try:
            text = str((choice.get("message") or {}).get("content") or "")
        except AttributeError:
            pass
        word = answer_word(text)
        if word is None:
            return Verdict.failed(f"no logprobs in the judge's answer and its text is not yes/no: {text[:200]!r}")
        return Verdict(met=word == "yes", p_yes=1.0 if word == "yes" else 0.0, mode="choice",
                       explanation=f"no logprobs in the reply: p_yes {1.0 if word == 'yes' else 0.0:g} read from "
                                   f"its text {text[:60]!r}, not a probability")
    py, pn, others = sums_from_top(top, prefixes=prefixes)
    listed = [str(e.get("token")) for e in top if isinstance(e, dict)][:8]
    if py <= 0.0 and pn <= 0.0:
        return Verdict.failed(f"neither answer word (yes/no) is in the judge's top logprobs: {listed}")
    if py > 0.0 and pn > 0.0:
        p = py / (py + pn)
        return Verdict(met=p >= 0.5, p_yes=p, mode="choice")
    have, missing = ("yes", "no") if py > 0.0 else ("no", "yes")
    n = len(usable_top(top, prefixes=prefixes))  # masked entries are not listed probabilities
    if n < requested or not others:
        return Verdict.failed(f"only '{have}' is in the judge's top logprobs ({n} of the {requested} tokens asked "
                              f"for: {listed}); nothing bounds the probability of '{missing}'")
    bound = min(others)
    p = py / (py + bound) if have == "yes" else bound / (bound + pn)
    return Verdict(met=p >= 0.5, p_yes=p, mode="choice",
                   explanation=f"'{missing}' is not among the {n} listed tokens: its probability is taken at its "
                               f"bound, the smallest listed ({bound:.3g})")
