"""Reading verdicts out of judge outputs: yes/no probabilities and explain-mode JSON."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

_OBJ = re.compile(r"\{.*?\}", re.DOTALL)
_FENCE = re.compile(r"^```json\s*|\s*```$")


# vLLM writes a logprob of -inf (a token its grammar masked) as -9999.0, since JSON has no infinity.
CLAMPED_LOGPROB = -9999.0
# A logprob is at most 0 (probability 1); float rounding in a server's softmax can leave it a hair
# above. Anything beyond this is no probability: a broken server or gateway (a +800 overflowed exp).
MAX_LOGPROB = 1e-4


def unusable_logprob(lp: float) -> str | None:
    """Why ``lp`` cannot be read as the judge's belief (None when it can): NaN, an infinity, a
    positive value (a probability above 1), or vLLM's -9999.0 stand-in for -inf (at or below it: a
    masked token, not a probability)."""
    if math.isnan(lp):
        return "NaN"
    if math.isinf(lp):
        return "+inf" if lp > 0 else "-inf"
    if lp > MAX_LOGPROB:
        return f"{lp:g} (a positive logprob: a probability above 1)"
    if lp <= CLAMPED_LOGPROB:
        return f"{lp:g} (vLLM's stand-in for -inf: the token was masked)"
    return None


def p_yes_from_logprobs(lp_yes: float | None, lp_no: float | None) -> float | None:
    """Normalise over the two answers: p_yes = e^lp_yes / (e^lp_yes + e^lp_no).

    A missing answer counts as impossible; both missing (or both -inf) gives None.
    """
    ly = -math.inf if lp_yes is None else float(lp_yes)
    ln = -math.inf if lp_no is None else float(lp_no)
    if ly == -math.inf and ln == -math.inf:
        return None
    m = max(ly, ln)
    ey, en = math.exp(ly - m), math.exp(ln - m)
    return ey / (ey + en)


def logprobs_by_token_id(top: Mapping[str, float]) -> dict[int, float]:
    """vLLM returns ``{"token_id:123": logprob}`` when asked for token ids; map to ints."""
    out: dict[int, float] = {}
    for tok, lp in top.items():
        if tok.startswith("token_id:"):
            try:
                out[int(tok.split(":", 1)[1])] = float(lp)
            except ValueError:
                continue
    return out


def parse_explain(text: str) -> tuple[bool, str] | None:
    """Find the last JSON object with a boolean ``criteria_met``; return (met, explanation).

    Tolerates code fences, prose around the object and ``"true"``/``"false"`` strings; returns
    None when no usable object is present (the caller retries, then records a failure).
    """
    candidates = []
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        stripped = stripped[4:] if stripped.lower().startswith("json") else stripped
    candidates.append(stripped)
    candidates.extend(m.group(0) for m in _OBJ.finditer(text))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for cand in reversed(candidates):
        try:
            obj = json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(obj, dict) or "criteria_met" not in obj:
            continue
        met = obj["criteria_met"]
        if isinstance(met, str) and met.strip().lower() in ("true", "false"):
            met = met.strip().lower() == "true"
        if isinstance(met, bool):
            return met, str(obj.get("explanation", ""))
    return None


def parse_explain_reference(text: str) -> tuple[bool, str] | None:
    """The reference HealthBench grader's parse, and nothing more lenient: strip the text, drop a
    leading ```` ```json ```` and a trailing ```` ``` ````, read the rest as ONE JSON value; it must be an
    object whose ``criteria_met`` is a JSON boolean (not the string "true"). None otherwise (the
    caller asks again at the same settings)."""
    try:
        obj = json.loads(_FENCE.sub("", text.strip()))
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("criteria_met"), bool):
        return None
    return obj["criteria_met"], str(obj.get("explanation", ""))


# An explain verdict on vLLM is constrained by this whitespace-free pattern (both backends): vLLM's
# JSON-schema grammar admits any whitespace, and a weak model spends its whole budget on blanks (the
# tiny test model reached max_tokens on most verdicts and was retried; with the pattern its verdicts
# close within the 400-character explanation when max_tokens leaves room for it, 512 by default).
# A control character other than a line break inside the explanation still fails json.loads and is
# retried like any unparseable answer. Changing the pattern changes what a verdict is: change the
# completions backend's "+re" key suffix (reward/judge/http.py) with it.
EXPLAIN_REGEX = r'\{"explanation": "[^"\\\n]{0,400}", "criteria_met": (true|false)\}'


def explain_parser(name: str):
    """``parse_explain`` (robust) or ``parse_explain_reference`` by the judge config's ``parse``."""
    return parse_explain_reference if name == "reference" else parse_explain


def parse_json_object(text: str, required: Sequence[str] = ()) -> dict | None:
    """The last top-level JSON object in ``text`` that has every key in ``required``.

    Tolerates code fences and prose around the object and nested objects inside it (scanned
    with ``json.JSONDecoder.raw_decode``, not a regular expression). Returns None when there
    is no such object; the caller retries, then records a failure.
    """
    decoder = json.JSONDecoder(strict=False)  # a control character inside a string is not fatal
    found: list[dict] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict) and all(k in obj for k in required):
            found.append(obj)
        i = text.find("{", end)
    return found[-1] if found else None
