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
is not compared) against a tolerance set from measurement (``benchmarks/probe_tolerance.py``,
``benchmarks/results/probe_tolerance.json``): on the vLLM CPU server in float32 the same weights
answer exactly alike alone, with 32 other requests in flight and after a restart (difference 0),
while one tensor of the tiny model changed by 1% (relative noise) moves the text probe by 2.3e-5
and the answers by 6.7e-6 on average, and by 0.1% moves them by 2.3e-6 and 7e-7. The floor
:data:`TOLERANCE` (1e-5) sits between the same weights and the 1% change; a 0.1% change of one
tensor is below it. Where the same weights are noisier (GPUs in bfloat16: batch shapes change the
reductions), each start-up measures that noise by asking the reference endpoint again, the items
side by side this time, and the tolerance becomes :data:`NOISE_FACTOR` times the noise when that
is larger (:func:`probe_tolerance`); a change smaller than that is not seen, and the run says so in
its log. The widening stops at :data:`NOISE_CEILING`: an endpoint whose two readings differ by more
cannot be told from two judges behind one address (a gateway alternating between them would
otherwise widen the tolerance past its own difference) and is left out of the pool like one that
did not answer. Below the ceiling that hole stays: two judges alternating behind one address whose
probes differ by less than it pass as one noisy judge. Values that are no probabilities (NaN, infinities, positive values, vLLM's -9999.0) give
no signature.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reward.judge.cache import SIGNATURE_NAMESPACE
from reward.judge.types import JudgeItem, Message
from reward.serving import RetryPolicy

log = logging.getLogger(__name__)
TOLERANCE = 1e-5  # the floor: mean |difference| of the probe's logprobs above which two judges differ
NOISE_FACTOR = 5.0  # the tolerance is at least this many times the same-weights noise measured at start-up
# the most same-weights noise an endpoint may show (mean |difference| of the probe's logprobs between two
# readings): the tolerance never widens past NOISE_FACTOR x this (0.05, the fixed tolerance of before)
NOISE_CEILING = 0.01
PROBE_TIMEOUT_S = 30.0  # the least one start-up probe request is given (the judge's timeout_s when longer)
PROBE_ATTEMPTS = 3  # the fewest attempts one probe request gets (the judge's own retries when more)
NAMESPACE = SIGNATURE_NAMESPACE  # where the verdict cache keeps the answers of each identity
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
    why: str | None = None  # why the judge items gave no answers (not stored)

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


class ProbeFault(Exception):
    """A probe request that failed after its attempts, or that retrying cannot fix."""


@dataclass(frozen=True)
class Asking:
    """How each probe request is sent: as the judge sends any request (:mod:`reward.judge.transport`),
    so that the probe is no weaker link than grading. Each attempt is bounded by ``timeout_s`` (and
    by the probe's clock); every fault grading retries is retried, at the same endpoint (the probe
    asks who grades *there*), with the judge's backoff, at least :data:`PROBE_ATTEMPTS` times and
    as often as grading retries: timeouts, refused or reset connections, 5xx, 429, a 200 that is no
    JSON or whose body the reader rejects (:class:`~reward.judge.replies.BadReply`). A status that
    names the request (a 400: a server without ``prompt_logprobs``) is not retried.

    Before, one fault in any of the probe's requests failed the whole probe: through a proxy
    injecting 20% faults, a re-probe after a reconnection failed about half the time and a rollout
    lost its score after five such attempts, where its grading requests alone would have passed."""

    timeout_s: float = PROBE_TIMEOUT_S
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_retries=PROBE_ATTEMPTS - 1, backoff_s=1.0))

    @property
    def attempts(self) -> int:
        return max(PROBE_ATTEMPTS, self.retry.attempts)

    def post(self, url: str, body: Mapping[str, Any], headers: Mapping[str, str], clock,
             read: Callable[[Any], Any] | None = None) -> Any:
        """``read(json)`` of a POST of ``body`` to ``url`` (the full URL), with the retries above.

        Raises:
            ProbeFault: the last fault, after the last attempt (or a status retrying cannot fix).
            JudgeDeadlineError: the clock ran out.
        """
        import httpx

        from reward.judge.replies import BadReply
        from reward.judge.startup import post_json
        from reward.judge.transport import read_reply
        from reward.serving import redact_url

        last, attempt = "no attempt", 0
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(clock.seconds(self.retry.delay(attempt)))  # raises at the deadline
            seconds = clock.seconds(self.timeout_s)
            try:
                status, data = post_json(url, body, headers, seconds)
            except (httpx.TimeoutException, TimeoutError):
                last = f"timeout after {seconds:.3g}s"
                continue
            except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:  # resets, bad gzip, too large
                last = f"{type(exc).__name__}: {str(exc)[:160]}"
                continue
            if status != 200:
                last = f"HTTP {status}: {str(data)[:200]}"
                if not self.retry.retryable_status(status):
                    break  # the request is at fault: asking again gives the same answer
                continue
            if data is None:
                last = "HTTP 200 without a JSON body"
                continue
            try:
                return read_reply(read, data)
            except BadReply as exc:
                last = f"bad reply: {exc}"
        raise ProbeFault(f"{last} (after {attempt + 1} attempts at {redact_url(url)})")


def startup_asking(judge) -> Asking:
    """How the start-up probe sends its requests for ``judge`` (a served backend): with the judge's
    retries, each attempt given :data:`PROBE_TIMEOUT_S`, or the judge's ``timeout_s`` when longer
    (nothing is graded yet, and the first requests a server computes can be slow). During the run a
    probe request is bounded by ``timeout_s`` alone, as every judge request (:func:`start_watch`)."""
    return Asking(timeout_s=max(PROBE_TIMEOUT_S, float(judge.timeout_s)), retry=judge.retry)


def probe_signature(url: str, model: str, headers: Mapping[str, str], clock,
                    asking: Asking | None = None) -> list[float] | None:
    """The logprobs of :data:`PROBE_TEXT`'s tokens as the endpoint ``url`` computes them, or
    None when it does not answer the probe (not vLLM, a fault after the retries of ``asking``):
    nothing is then compared."""
    from reward.errors import JudgeDeadlineError
    from reward.judge.replies import completion_choice

    def read(data) -> list[float] | None:
        rows = completion_choice(data).get("prompt_logprobs")
        if rows is None:  # a server that does not compute them: nothing to compare, nothing to retry
            return None
        return [float(next(iter(row.values()))["logprob"]) for row in rows if row]

    body = {"model": model, "prompt": PROBE_TEXT, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    try:
        values = (asking or Asking()).post(f"{url}/completions", body, headers, clock, read)
    except JudgeDeadlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe that fails compares nothing; grading reports its own faults
        log.debug("no probe answer from %s: %s", url, exc)
        return None
    return values if usable(values) else None


def usable(values: list[float] | None) -> bool:
    """Logprobs a judge computed, not stand-ins or garbage (none NaN, infinite, positive or at
    vLLM's -9999.0: :func:`~reward.judge.parsing.unusable_logprob`)."""
    from reward.judge.parsing import unusable_logprob

    return bool(values) and all(unusable_logprob(v) is None for v in values)


def compare(a: list[float], b: list[float], tolerance: float = TOLERANCE) -> str | None:
    """None when two answers to one probe are the same judge's, else what differs."""
    if len(a) != len(b):
        return f"{len(a)} values against {len(b)}: another tokenizer"
    diff = mean_abs(a, b)
    if diff > tolerance:
        return f"mean |difference| of the logprobs {diff:.3g} > {tolerance:.3g}"
    return None


def mean_abs(a: list[float], b: list[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b)) / max(1, len(a))


def differ(a: Numbers, b: Numbers, tolerance: float = TOLERANCE) -> str | None:
    """What differs between two endpoints' answers (only the probes both answered are compared)."""
    for part in ("text", "answers"):
        x, y = getattr(a, part), getattr(b, part)
        if x and y and (why := compare(x, y, tolerance)):
            return f"{'a fixed text' if part == 'text' else 'fixed judge items'}: {why}"
    return None


def noise(a: Numbers, b: Numbers) -> float:
    """The largest mean |difference| of two readings of the same endpoint (0 when they agree)."""
    out = 0.0
    for part in ("text", "answers"):
        x, y = getattr(a, part), getattr(b, part)
        if x and y and len(x) == len(y):
            out = max(out, mean_abs(x, y))
    return out


def probe_tolerance(measured_noise: float) -> float:
    """The tolerance for a server whose same weights were seen to differ by ``measured_noise``."""
    return max(TOLERANCE, NOISE_FACTOR * measured_noise)


Answers = Callable[[str, object, Asking], "list[float] | None"]  # answers(url, clock, asking)


def ask_probes(url: str, model: str, headers: Mapping[str, str], answers: Answers, clock,
               asking: Asking | None = None) -> Numbers:
    """One endpoint's answers to the probes, each request sent as ``asking`` says (retried like a
    judge request: a busy server's 503, a reset, a slow gateway): :class:`Numbers` whose
    ``answers`` are None when it did not answer the judge items (``why`` says why)."""
    asking = asking or Asking()
    text = probe_signature(url, model, headers, clock, asking)
    got, why = _answers_or_why(answers, url, clock, asking)
    return Numbers(text, got, why=why)


def check_numbers(known, model: str, headers: Mapping[str, str], answers: Answers, cache, key: str,
                  asking: Asking | None = None) -> ProbeResult | None:
    """Ask every endpoint of ``known`` (a vLLM pool: one whose entry names a ``root``) the probes,
    leave out an endpoint that does not answer the probe items (each request retried as ``asking``
    says: it fails closed, since who grades there cannot be checked), refuse a pool whose
    endpoints answer differently (naming the odd one: the largest group of agreeing endpoints is
    the reference), and check the answers against those stored with the identity ``key`` in
    ``cache`` (:func:`check_history`).

    ``answers(url, clock, asking)``: the backend's answer logprobs for :data:`PROBE_ITEMS` at ``url``.
    ``asking``: how each probe request is sent (:class:`Asking`; the backend's retries, and a
    timeout of at least :data:`PROBE_TIMEOUT_S` at start-up).
    ``key``: the judge's full identity (its prompt ids' settings included: the answers depend on
    them); the history is kept per key and per :func:`probe_version`.

    Returns:
        the endpoints kept and the reference answers (for the watch during the run,
        :mod:`reward.judge.watch`); None for a pool with no ``root`` (a hosted API: nothing to
        compare).

    Raises:
        InputError: an endpoint answers differently from the others, or from the stored answers.
        JudgeUnavailableError: no endpoint answered the probe items.
    """
    from reward.errors import JudgeUnavailableError
    from reward.judge.startup import each_endpoint, refuse_pool

    if known is None or not known.root:
        return None  # a hosted API's numbers vary from call to call: nothing to compare
    listed = [v for v in known.views if v.entry is not None and v.url in known.urls]
    asking = asking or Asking()
    got = each_endpoint(lambda v: ask_probes(v.url, model, headers, answers, known.clock, asking), listed)
    have = [(v, n) for v, n in zip(listed, got) if n.answers]
    # the same weights' noise here: each endpoint asked again, text and items side by side (another batch)
    again = each_endpoint(lambda vn: reread(vn[0].url, model, headers, answers, known.clock, asking), have)
    noises = [noise(n, m) if m is not None else 0.0 for (_, n), m in zip(have, again)]
    for (v, _), m in zip(have, again):
        if m is None:  # its noise is unknown: the tolerance stays at what the others measured
            log.warning("judge endpoint %s did not answer the probe a second time: its batch noise is not measured "
                        "(two judges alternating behind it would not be seen at start-up)", v.name)
    for (_, n), x in zip(have, noises):
        if x > NOISE_CEILING:  # two readings this far apart: not one judge we could know again
            n.answers, n.why = None, (f"two readings of the probe differ by {x:.3g} (mean |difference| of the "
                                      f"logprobs), above the ceiling {NOISE_CEILING:g}: two judges behind one "
                                      "address, or a server too noisy to be identified")
    noises = [x for x in noises if x <= NOISE_CEILING]
    have = [(v, n) for v, n in have if n.answers]
    measured = max(noises, default=0.0)
    tolerance = probe_tolerance(measured)
    if tolerance > TOLERANCE:
        log.warning("the judge's probe answers vary by %.3g between two readings of the same server (batch noise): "
                    "a weight change smaller than the tolerance %.3g is not seen by the probe", measured, tolerance)
    for v, n in zip(listed, got):
        if not n.answers:
            log.warning("judge endpoint %s answers /v1/models but not the fixed probe items (%s): left out of the "
                        "pool, since who grades there cannot be checked", v.name, n.why)
    if not have:
        whys = "; ".join(f"{v.name}: {n.why}" for v, n in zip(listed, got))
        raise JudgeUnavailableError(
            f"no endpoint of the judge pool answered the fixed probe items that check who grades (each request "
            f"asked up to {asking.attempts} times; {whys}): the run cannot know which judge it would be graded by. "
            "Check the server (a 503 while it loads, a gateway that drops logprobs, the judge's tokenizer), then "
            "start again")
    groups: list[list[tuple]] = []
    for v, n in have:
        home = next((g for g in groups if differ(g[0][1], n, tolerance) is None), None)
        if home is None:
            groups.append([(v, n)])
        else:
            home.append((v, n))
    groups.sort(key=lambda g: -len(g))
    ref_view, ref = groups[0][0]
    for group in groups[1:]:
        odd_view, odd = group[0]
        raise refuse_pool(model, odd_view, ref_view, f"answers fixed probes differently ({differ(ref, odd, tolerance)}): "
                          "other weights, dtype or quantization behind the same name and root")
    check_history(cache, f"{key}|probe-{probe_version()}", ref, ", ".join(v.name for v, _ in have), tolerance)
    return ProbeResult(urls=[v.url for v, _ in have], reference=ref, tolerance=tolerance, noise=measured)


@dataclass
class ProbeResult:
    """What the start-up probes established: the endpoints that answered them, and their answers."""

    urls: list[str]
    reference: Numbers
    tolerance: float = TOLERANCE
    noise: float = 0.0


def probe_version() -> str:
    """What the probes ask (the text, the items and the template they are rendered with): stored
    answers are compared only with answers to the same questions."""
    import hashlib

    from reward.judge.templates import CHOICE

    parts = [PROBE_TEXT, CHOICE.version, *(it.model_dump_json() for it in PROBE_ITEMS)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _answers_or_why(answers: Answers, url: str, clock, asking: Asking) -> tuple[list[float] | None, str | None]:
    """``(answers, None)``, or ``(None, why not)``: a fault (after its retries), no reply, or values
    that are no probabilities (masked answer ids: a tokenizer other than the server's; NaN: a broken
    server)."""
    from reward.errors import JudgeDeadlineError

    try:
        values = answers(url, clock, asking)
    except JudgeDeadlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe that fails compares nothing
        log.debug("no answers to the probe items from %s: %s", url, exc)
        return None, (str(exc) if isinstance(exc, ProbeFault) else f"{type(exc).__name__}: {exc}")[:400]
    if not values:
        return None, "no usable reply (an error status, or the answer tokens missing from its logprobs)"
    if not usable(values):
        return None, ("its answer logprobs are no probabilities (masked at vLLM's -9999, NaN or positive): a judge "
                      "tokenizer other than the server's, or a broken server")
    return values, None


def reread(url: str, model: str, headers: Mapping[str, str], answers: Answers, clock,
           asking: Asking) -> Numbers | None:
    """A second reading of one endpoint, its text probe and its items sent side by side (another
    batch than the first reading's); None when it does not answer."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        text = pool.submit(probe_signature, url, model, headers, clock, asking)
        got, _ = _answers_or_why(answers, url, clock, asking)
        return Numbers(text.result(), got) if got else None


def check_history(cache, key: str, numbers: Numbers | None, where: str, tolerance: float = TOLERANCE) -> None:
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
    diff = differ(stored, numbers, tolerance)
    if diff is not None:
        raise InputError(
            f"the judge at {where} answers fixed probes differently from the judge whose verdicts this cache holds "
            f"under the same identity ({diff}): the weights, dtype or quantization it serves changed while its name, "
            "root and reported settings did not, and its cached verdicts would be served as this judge's. Name this "
            "judge with a revision (--judge-revision, judge.revision, $RUBRICSTREE_JUDGE_REVISION), run with "
            f"--no-cache, or clear the cache ({cache.path})", field="revision")
    if (numbers.text and not stored.text) or (numbers.answers and not stored.answers):
        cache.kv_put(NAMESPACE, key, Numbers(stored.text or numbers.text, stored.answers or numbers.answers).as_json())


def start_watch(judge, probed: ProbeResult | None, model: str, *, cooldown_s: float, every_items: int | None,
                every_s: float | None, idle_s: float | None = None):
    """After the start-up probes of a served judge: its pool cut to the endpoints that answered
    them, and the :class:`~reward.judge.watch.IdentityWatch` that asks them again during the run
    (None for a pool with nothing to compare: a hosted API)."""
    from reward.judge.endpoints import EndpointPool
    from reward.judge.startup import StartupClock
    from reward.judge.watch import IdentityWatch, probe_wait_s

    if probed is None:
        return None
    if probed.urls != [ep.url for ep in judge.pool.endpoints]:
        judge.pool = EndpointPool(probed.urls, cooldown_s=cooldown_s)  # endpoints that did not answer: left out
    headers, answers = judge._headers, judge._probe_answers
    # during the run a probe request is one of the judge's requests: its timeout and retries
    asking = Asking(timeout_s=judge.timeout_s, retry=judge.retry)
    wait_s = probe_wait_s(judge.timeout_s)

    def ask(url: str) -> Numbers:
        return ask_probes(url, model, headers, answers, StartupClock(wait_s), asking)

    return IdentityWatch(probed.reference, ask, lambda a, b: differ(a, b, probed.tolerance), urls=probed.urls,
                         every_items=every_items, every_s=every_s, wait_s=wait_s,
                         cache=judge.cache, items_per_probe=len(PROBE_ITEMS) + 1,
                         names={ep.url: ep.name for ep in judge.pool.endpoints},
                         identity=lambda: judge.model_id,  # read when it breaks: the "+re" suffix comes later
                         idle_s=idle_s or 0.0)  # None or 0: off, as the schedule's bounds
