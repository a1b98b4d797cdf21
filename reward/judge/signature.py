"""A served judge's answers to fixed probes: what its weights, dtype and quantization compute,
whatever the server reports about them.

vLLM does not report the dtype or a quantization applied at load time (``--quantization fp8``)
without its development mode, and a remote server's weights cannot be hashed here. What any vLLM
server can be asked, once per endpoint at start-up:

- ``text``: ``prompt_logprobs`` of :data:`PROBE_TEXT` (one request of ~60 prompt tokens and one
  decoded token);
- ``answers``: the answer logprobs of the judge's own choice request for the few fixed items of
  :data:`PROBE_ITEMS`, sent by the backend exactly as it grades (``answers`` callable), so any
  server that grades can be compared, and what is compared is what the verdicts are made of.

They are used twice:

- within a pool (:func:`reward.judge.startup.establish`): every endpoint must give the same
  answers, or the run stops naming the one that differs;
- across runs (:func:`check_history`): the first run that caches verdicts under an identity
  stores its answers in the verdict cache; a later run under the same identity whose answers
  differ stops before it is served a verdict, since the judge behind the identity changed.

Each part is compared by the mean absolute difference of its logprobs (a part only one side has
is not compared), with a tolerance of
:data:`TOLERANCE`: repeated requests to one server differ by batching noise (0 on our CPU test
server; on GPUs in bfloat16 well under 0.01 on average), other weights by far more (0.2 and up,
even between two random-weight tiny models). A change smaller than the tolerance, such as
float32 against bfloat16 of our tiny random model (0.0005), is not seen here: the identity names
the dtype where the server reports it (``reward.judge.server_facts``), and a revision names the
rest. Values that are no probabilities (NaN, infinities, vLLM's -9999.0) give no signature.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from reward.judge.types import JudgeItem, Message

log = logging.getLogger(__name__)
TOLERANCE = 0.05  # mean |difference| of the probe's logprobs above which two judges differ
PROBE_TIMEOUT_S = 30.0
NAMESPACE = "judge-signature"  # where the verdict cache keeps the answers of each identity
_CONV = (Message(role="user", content="I am 34 weeks pregnant and have a headache that will not go away, with "
                                      "flashing lights in my eyes. Should I wait for my appointment next week?"),)
PROBE_ITEMS = (  # our own words: one met, one not, one in between, for a spread of answers
    JudgeItem(conversation=_CONV, response="These can be signs of pre-eclampsia: go to your maternity unit today.",
              criterion="Advises same-day assessment."),
    JudgeItem(conversation=_CONV, response="Headaches are common in pregnancy; rest and drink water.",
              criterion="Advises same-day assessment."),
    JudgeItem(conversation=_CONV, response="Call your midwife and mention the flashing lights.",
              criterion="Names the condition it is worried about."),
)
# Our own words: a short clinical exchange, some numbers, another script and a yes/no question, so
# the logprobs cover ordinary text of the kind the judge reads.
PROBE_TEXT = ("Conversation: a parent reports that a two-year-old swallowed three 500 mg paracetamol tablets "
              "an hour ago and seems fine. Response: call poison control or emergency services now, even "
              "without symptoms. Hinweis: Fieber 38,5 °C. 患者说头痛。 Criterion: the response advises urgent "
              "care. Is the criterion met? Answer yes or no.")


@dataclass
class Numbers:
    """One endpoint's answers to the probes (None: that probe gave no usable answer)."""

    text: list[float] | None = None
    answers: list[float] | None = None

    def empty(self) -> bool:
        return not self.text and not self.answers

    def as_json(self) -> str:
        return json.dumps({"text": self.text, "answers": self.answers, "at": time.time()})

    @classmethod
    def from_json(cls, raw: str) -> Numbers | None:
        try:
            d = json.loads(raw)
            return cls(text=_floats(d.get("text")), answers=_floats(d.get("answers")))
        except (ValueError, TypeError, AttributeError):
            return None


def _floats(values) -> list[float] | None:
    return [float(v) for v in values] if values else None


def probe_signature(url: str, model: str, headers: Mapping[str, str], clock) -> list[float] | None:
    """The logprobs of :data:`PROBE_TEXT`'s tokens as the endpoint ``url`` computes them, or
    None when it does not answer the probe (not vLLM, a fault): nothing is then compared."""
    from reward.errors import JudgeDeadlineError
    from reward.judge.startup import post_json

    body = {"model": model, "prompt": PROBE_TEXT, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    try:
        status, data = post_json(f"{url}/completions", body, headers, clock.seconds(PROBE_TIMEOUT_S))
    except JudgeDeadlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe that fails compares nothing; grading reports its own faults
        log.debug("no probe answer from %s: %s", url, exc)
        return None
    try:
        rows = data["choices"][0]["prompt_logprobs"]
        values = [float(next(iter(row.values()))["logprob"]) for row in rows if row]
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError):
        return None
    return values if status == 200 and usable(values) else None


def usable(values: list[float] | None) -> bool:
    """Finite logprobs above vLLM's -9999.0: numbers a judge computed, not stand-ins."""
    return bool(values) and all(math.isfinite(v) and v > -9999.0 for v in values)


def compare(a: list[float], b: list[float]) -> str | None:
    """None when two answers to one probe are the same judge's, else what differs."""
    if len(a) != len(b):
        return f"{len(a)} values against {len(b)}: another tokenizer"
    diff = sum(abs(x - y) for x, y in zip(a, b)) / len(a)
    if diff > TOLERANCE:
        return f"mean |difference| of the logprobs {diff:.3g} > {TOLERANCE:g}"
    return None


def differ(a: Numbers, b: Numbers) -> str | None:
    """What differs between two endpoints' answers (only the probes both answered are compared)."""
    for part in ("text", "answers"):
        x, y = getattr(a, part), getattr(b, part)
        if x and y and (why := compare(x, y)):
            return f"{'a fixed text' if part == 'text' else 'fixed judge items'}: {why}"
    return None


def check_numbers(known, model: str, headers: Mapping[str, str],
                  answers: Callable[[str, object], list[float] | None], cache, key: str) -> None:
    """Ask every endpoint of ``known`` (a vLLM pool: one whose entry names a ``root``) the probes,
    refuse a pool whose endpoints answer differently (naming the odd one: the largest group of
    agreeing endpoints is the reference), and check the answers against those stored with the
    identity ``key`` in ``cache`` (:func:`check_history`).

    ``answers(url, clock)``: the backend's answer logprobs for :data:`PROBE_ITEMS` at ``url``.
    ``key``: the judge's full identity (its prompt ids' settings included: the answers depend on
    them); the history is kept per key and per :func:`probe_version`.

    Raises:
        InputError: an endpoint answers differently from the others, or from the stored answers.
    """
    from reward.judge.startup import each_endpoint, refuse_pool

    if known is None or not known.root:
        return  # a hosted API's numbers vary from call to call: nothing to compare
    listed = [v for v in known.views if v.entry is not None and v.url in known.urls]
    got = each_endpoint(lambda v: Numbers(probe_signature(v.url, model, headers, known.clock),
                                  _or_none(answers, v.url, known.clock)), listed)
    have = [(v, n) for v, n in zip(listed, got) if not n.empty()]
    if not have:
        return
    groups: list[list[tuple]] = []
    for v, n in have:
        home = next((g for g in groups if differ(g[0][1], n) is None), None)
        if home is None:
            groups.append([(v, n)])
        else:
            home.append((v, n))
    groups.sort(key=lambda g: -len(g))
    ref_view, ref = groups[0][0]
    for group in groups[1:]:
        odd_view, odd = group[0]
        raise refuse_pool(model, odd_view, ref_view, f"answers fixed probes differently ({differ(ref, odd)}): "
                          "other weights, dtype or quantization behind the same name and root")
    check_history(cache, f"{key}|probe-{probe_version()}", ref, ", ".join(v.name for v, _ in have))


def probe_version() -> str:
    """What the probes ask (the text, the items and the template they are rendered with): stored
    answers are compared only with answers to the same questions."""
    import hashlib

    from reward.judge.templates import CHOICE

    parts = [PROBE_TEXT, CHOICE.version, *(it.model_dump_json() for it in PROBE_ITEMS)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _or_none(answers, url: str, clock) -> list[float] | None:
    from reward.errors import JudgeDeadlineError

    try:
        values = answers(url, clock)
    except JudgeDeadlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe that fails compares nothing
        log.debug("no answers to the probe items from %s: %s", url, exc)
        return None
    return values if usable(values) else None


def check_history(cache, key: str, numbers: Numbers | None, where: str) -> None:
    """Store the probe answers of a new identity ``key`` in the verdict cache, or check a
    known identity's against what was stored when its verdicts were first cached.

    Raises:
        InputError: the answers differ from the stored ones (the judge behind ``key`` changed).
    """
    from reward.errors import InputError

    if cache is None or numbers is None or numbers.empty():
        return
    raw = cache.kv_get(NAMESPACE, key)
    stored = Numbers.from_json(raw) if raw is not None else None
    if stored is None or stored.empty():
        cache.kv_put(NAMESPACE, key, numbers.as_json())
        return
    diff = differ(stored, numbers)
    if diff is not None:
        raise InputError(
            f"the judge at {where} answers fixed probes differently from the judge whose verdicts this cache holds "
            f"under the same identity ({diff}): the weights, dtype or quantization it serves changed while its name, "
            "root and reported settings did not, and its cached verdicts would be served as this judge's. Name this "
            "judge with a revision (--judge-revision, judge.revision, $RUBRICSTREE_JUDGE_REVISION), run with "
            f"--no-cache, or clear the cache ({cache.path})", field="revision")
    if (numbers.text and not stored.text) or (numbers.answers and not stored.answers):
        cache.kv_put(NAMESPACE, key, Numbers(stored.text or numbers.text, stored.answers or numbers.answers).as_json())
