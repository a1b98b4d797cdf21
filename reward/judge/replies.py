"""Checking a judge reply's body before anything is read out of it.

A server (or a proxy, or a sick replica) can answer HTTP 200 with a body that is not a valid
completion: ``null``, ``[]``, no ``choices``, no logprobs, non-numeric usage, NaN logprobs. Such a
reply is a *protocol fault* (:class:`BadReply`): the transport retries it at the very same
settings on another endpoint and counts it against the endpoint it came from. It is never a
model answer: only a well-formed completion whose text does not parse is the model's fault
(and only that may be resampled). Every backend (completions, chat) reads replies through these
helpers, so the rules are the same everywhere.

Data flow: parsed JSON body -> ``completion_choice`` -> ``choice_p_yes`` / ``completion_text``;
``usage_counts`` reads token counters tolerantly (bad counters are not worth a retry).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from reward.judge.parsing import logprobs_by_token_id, p_yes_from_logprobs, unusable_logprob


class BadReply(Exception):
    """A reply body that is not a usable completion (a protocol fault, not a model answer)."""


def completion_choice(data: Any) -> Mapping[str, Any]:
    """The first choice of a completions reply; BadReply when the body has none."""
    if not isinstance(data, Mapping):
        raise BadReply(f"reply body is {type(data).__name__}, not an object: {str(data)[:120]!r}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise BadReply(f"reply without choices: {str(data)[:200]!r}")
    return choices[0]


def finite_p_yes(p: Any) -> float:
    """``p`` as a probability in [0, 1]; BadReply for NaN, infinity or anything else."""
    try:
        p = float(p)
    except (TypeError, ValueError) as exc:
        raise BadReply(f"p_yes is not a number: {p!r}") from exc
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        raise BadReply(f"non-finite or out-of-range p_yes {p!r} (NaN/inf logprobs)")
    return p


def choice_p_yes(data: Any, yes_id: int, no_id: int) -> float:
    """p_yes from a choice-mode reply with top logprobs keyed ``token_id:N``.

    BadReply when logprobs are missing, an answer's logprob is NaN, an infinity or vLLM's -9999.0
    stand-in for -inf (:func:`~reward.judge.parsing.unusable_logprob`), or either answer token is
    absent: each of these would otherwise turn into a silent "no" (or "yes"). Both ids were asked
    for (``logprob_token_ids``, or the choice constraint that leaves only the two answers), so a
    reply with one of them comes from a server or gateway that ignored the request: p_yes read
    from it would be 0.0 or 1.0 whatever the judge thought.
    """
    choice = completion_choice(data)
    try:
        top = choice["logprobs"]["top_logprobs"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise BadReply(f"no logprobs in the reply: {str(data)[:200]!r}") from exc
    if not isinstance(top, Mapping):
        raise BadReply(f"top logprobs is not an object: {str(top)[:120]!r}")
    by_id = logprobs_by_token_id(top)
    lp_yes, lp_no = by_id.get(yes_id), by_id.get(no_id)
    for word, lp in (("yes", lp_yes), ("no", lp_no)):
        why = None if lp is None else unusable_logprob(lp)
        if why:  # both answers are allowed by the constraint: neither may be masked or broken
            raise BadReply(f"non-finite or clamped logprob of '{word}' in the reply: {why}; yes={lp_yes!r} "
                           f"no={lp_no!r} (a judge "
                           "tokenizer other than the server's, whose answer ids the choice grammar masks, or a "
                           "broken server)")
    if lp_yes is None or lp_no is None:
        which = "neither answer token is" if lp_yes is None and lp_no is None else \
            f"only one of the two answer tokens (yes={yes_id}, no={no_id}) is"
        raise BadReply(f"{which} in the reply's logprobs (the server ignored logprob_token_ids and the "
                       f"choice constraint?): {str(top)[:120]!r}")
    p = p_yes_from_logprobs(lp_yes, lp_no)
    if p is None:
        raise BadReply("both answer tokens have logprob -inf in the reply")
    return finite_p_yes(p)


def answer_logprobs(data: Any, yes_id: int, no_id: int) -> list[float]:
    """``[logprob of yes, logprob of no]`` of a choice-mode reply, checked as :func:`choice_p_yes`
    checks it (BadReply for the same faults): the identity probe's reading of a reply."""
    choice_p_yes(data, yes_id, no_id)
    by_id = logprobs_by_token_id(completion_choice(data)["logprobs"]["top_logprobs"][0])
    return [float(by_id[yes_id]), float(by_id[no_id])]


def completion_text(data: Any) -> tuple[str, str | None]:
    """(text, finish_reason) of a generation reply; BadReply when the text is missing."""
    choice = completion_choice(data)
    text = choice.get("text")
    if text is None and isinstance(choice.get("message"), Mapping):  # chat-completions shape
        text = choice["message"].get("content")
    if not isinstance(text, str):
        raise BadReply(f"reply without text: {str(choice)[:200]!r}")
    reason = choice.get("finish_reason")
    return text, reason if isinstance(reason, str) else None


def usage_counts(data: Any) -> tuple[int, int, int]:
    """(prompt, completion, cached) token counts; anything missing or non-numeric counts 0."""
    usage = data.get("usage") if isinstance(data, Mapping) else None
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")), \
        _count(details.get("cached_tokens"))


def _count(x: Any) -> int:
    if isinstance(x, bool):
        return 0
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0
    return int(v) if math.isfinite(v) and v >= 0 else 0
