"""A served judge's answers to a fixed probe: what its weights, dtype and quantization compute,
whatever the server reports about them.

vLLM does not report the dtype or a quantization applied at load time (``--quantization fp8``)
without its development mode, and a remote server's weights cannot be hashed here. The logprobs
of a fixed text can be asked of any vLLM server: ``prompt_logprobs`` of :data:`PROBE_TEXT` (one
request of ~60 prompt tokens and one decoded token, once per endpoint at start-up). They are used
twice:

- within a pool (:func:`reward.judge.startup.establish`): every endpoint must give the same
  answers, or the run stops naming the one that differs;
- across runs (:func:`check_history`): the first run that caches verdicts under an identity
  stores its answers in the verdict cache; a later run under the same identity whose answers
  differ stops before it is served a verdict, since the judge behind the identity changed.

Answers are compared by the mean absolute difference of their logprobs, with a tolerance of
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
from collections.abc import Mapping

log = logging.getLogger(__name__)
TOLERANCE = 0.05  # mean |difference| of the probe's logprobs above which two judges differ
PROBE_TIMEOUT_S = 30.0
NAMESPACE = "judge-signature"  # where the verdict cache keeps the answers of each identity
# Our own words: a short clinical exchange, some numbers, another script and a yes/no question, so
# the logprobs cover ordinary text of the kind the judge reads.
PROBE_TEXT = ("Conversation: a parent reports that a two-year-old swallowed three 500 mg paracetamol tablets "
              "an hour ago and seems fine. Response: call poison control or emergency services now, even "
              "without symptoms. Hinweis: Fieber 38,5 °C. 患者说头痛。 Criterion: the response advises urgent "
              "care. Is the criterion met? Answer yes or no.")


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
    if status != 200 or not values or not all(math.isfinite(v) and v > -9999.0 for v in values):
        return None
    return values


def compare(a: list[float], b: list[float]) -> str | None:
    """None when two probe answers are the same judge's, else what differs."""
    if len(a) != len(b):
        return f"the probe text is {len(a)} tokens on one and {len(b)} on the other: another tokenizer"
    diff = sum(abs(x - y) for x, y in zip(a, b)) / len(a)
    if diff > TOLERANCE:
        return f"mean |difference| of its logprobs {diff:.3g} > {TOLERANCE:g}"
    return None


def check_history(cache, key: str, signature: list[float] | None, where: str) -> None:
    """Store the probe answers of a new identity ``key`` in the verdict cache, or check a
    known identity's against what was stored when its verdicts were first cached.

    Raises:
        InputError: the answers differ from the stored ones (the judge behind ``key`` changed).
    """
    from reward.errors import InputError

    if cache is None or signature is None:
        return
    raw = cache.kv_get(NAMESPACE, key)
    if raw is None:
        cache.kv_put(NAMESPACE, key, json.dumps({"values": signature, "at": time.time()}))
        return
    try:
        stored = [float(v) for v in json.loads(raw)["values"]]
    except (ValueError, KeyError, TypeError):
        cache.kv_put(NAMESPACE, key, json.dumps({"values": signature, "at": time.time()}))
        return
    diff = compare(stored, signature)
    if diff is not None:
        raise InputError(
            f"the judge at {where} answers a fixed probe differently from the judge whose verdicts this cache holds "
            f"under the same identity ({diff}): the weights, dtype or quantization it serves changed while its name, "
            "root and reported settings did not, and its cached verdicts would be served as this judge's. Name this "
            "judge with a revision (--judge-revision, judge.revision, $RUBRICSTREE_JUDGE_REVISION), run with "
            f"--no-cache, or clear the cache ({cache.path})", field="revision")
