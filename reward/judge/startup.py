"""Who a served judge is, established once at start-up from every endpoint of its pool.

A verdict may only be served by the judge that made it, so before the first grading request:

1. each endpoint is asked what it serves (``/v1/models``: the entry for the model, its ``root``
   and ``max_model_len``) and how it runs it (:mod:`reward.judge.server_facts`);
2. every endpoint that answers must agree on all of it: one that lists other weights, another
   context length, dtype or vLLM version, or does not list the model at all, stops the run with
   an error naming it (the endpoints in the largest group that agree are the reference). An
   endpoint that does not answer at all is left out of the pool, with a warning: its identity
   cannot be checked, so it grades nothing in this run;
3. the weights the agreed ``root`` names are fingerprinted by content, once
   (:func:`reward.judge.identity.model_fingerprint`);
4. vLLM endpoints answer fixed probes (:func:`reward.judge.signature.check_numbers`, called by
   the backend once its prompts can be built): the logprobs of a fixed text and the answers to a
   few fixed judge items, which follow the weights, dtype and quantization actually served,
   whatever the server reports. Endpoints whose answers differ stop the run, naming the one.

The token-id backend then checks its tokenizer and chat template against the servers
(:mod:`reward.judge.tokenizer_check`); the chat backend asks the servers for the prompt ids
their own template builds for a probe conversation.

Every wait here is bounded by :class:`StartupClock`: the run's deadline when one is in force
(``reward.judge.budget``) and the judge's own ``deadline_s``; each request by a few seconds too.
Nothing here runs per grading request: the hot path stays as cheap as before.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reward.errors import InputError, JudgeDeadlineError
from reward.judge.budget import current_budget

log = logging.getLogger(__name__)
LIST_TIMEOUT_S = 10.0  # one /v1/models request
FACT_TIMEOUT_S = 5.0  # one /version, /metrics, /server_info request


class StartupClock:
    """What is left of the time a judge may spend starting: the run's deadline (when a command
    runs under one) and the judge's own ``deadline_s``, whichever ends first."""

    def __init__(self, deadline_s: float | None = None) -> None:
        self.budget = current_budget()
        self.until = None if deadline_s is None else time.monotonic() + float(deadline_s)
        self.deadline_s = deadline_s

    def left(self) -> float | None:
        lefts = []
        if self.budget is not None:
            lefts.append(self.budget.left())
        if self.until is not None:
            lefts.append(self.until - time.monotonic())
        return min(lefts) if lefts else None

    def seconds(self, cap: float) -> float:
        """``cap``, or less when less is left.

        Raises:
            JudgeDeadlineError: no time is left.
        """
        left = self.left()
        if left is not None and left <= 0:
            allowed = self.budget.seconds if self.budget is not None else self.deadline_s
            raise JudgeDeadlineError(
                f"the judge's start-up did not finish within the deadline of {allowed:g}s (reading what the "
                "server serves, hashing its weights, probing it); raise --deadline, or check the server")
        return cap if left is None else max(0.001, min(cap, left))

    def check(self) -> None:
        self.seconds(math.inf)


@dataclass
class EndpointView:
    """What one endpoint said at start-up."""

    url: str
    name: str
    answered: bool = False
    entry: dict | None = None
    facts: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    def key(self) -> tuple:
        """What must be equal across the endpoints of one pool."""
        e = self.entry or {}
        return e.get("root"), e.get("max_model_len"), tuple(sorted(self.facts.items()))

    def describe(self) -> str:
        e = self.entry or {}
        facts = ", ".join(f"{k}={v}" for k, v in sorted(self.facts.items()))
        return f"root {e.get('root')!r}, max_model_len {e.get('max_model_len')}" + (f", {facts}" if facts else "")


@dataclass
class Established:
    """The agreed identity of a pool: the endpoints kept, the entry, facts, weights' fingerprint."""

    urls: list[str]
    entry: dict | None
    facts: dict[str, str] | None
    weights: str | None
    clock: StartupClock
    views: list[EndpointView]

    @property
    def root(self) -> str | None:
        return str(self.entry["root"]) if self.entry and self.entry.get("root") else None


def post_json(url: str, body: Mapping[str, Any], headers: Mapping[str, str], seconds: float) -> tuple[int, Any]:
    """``(status, parsed JSON or None)`` of one bounded POST (see :func:`reward.serving.bounded_request`)."""
    import httpx

    from reward.serving import bounded_request

    with httpx.Client(headers=dict(headers)) as client:
        status, raw = bounded_request(client, "POST", url, seconds=seconds, json=dict(body))
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def _view(url: str, model: str, headers: Mapping[str, str], clock: StartupClock, want_facts: bool) -> EndpointView:
    import httpx

    from reward.judge.server_facts import server_facts
    from reward.serving import bounded_request, redact_url

    view = EndpointView(url=url, name=redact_url(url))
    try:
        with httpx.Client(headers=dict(headers)) as client:
            status, raw = bounded_request(client, "GET", f"{url}/models", seconds=clock.seconds(LIST_TIMEOUT_S))
        data = json.loads(raw)["data"] if status == 200 else None
        if not isinstance(data, list):
            raise ValueError(f"HTTP {status}" if status != 200 else "no model list")
    except JudgeDeadlineError:
        raise
    except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError) as exc:
        view.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return view
    view.answered = True
    view.entry = next((m for m in data if isinstance(m, dict) and m.get("id") == model), None)
    if view.entry is not None and want_facts:
        view.facts = server_facts(url, headers, timeout=FACT_TIMEOUT_S, clock=clock)
    return view


def each_endpoint(fn, items: list) -> list:
    """``[fn(x) for x in items]``, on up to 8 threads (each call waits on the network)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(fn, items))


def _groups(views: list[EndpointView]) -> list[list[EndpointView]]:
    """Endpoints grouped by what they report, the largest group first (ties: list order)."""
    groups: dict[tuple, list[EndpointView]] = {}
    for v in views:
        groups.setdefault(v.key(), []).append(v)
    return sorted(groups.values(), key=lambda g: -len(g))


def refuse_pool(model: str, odd: EndpointView, ref: EndpointView, what: str) -> InputError:
    return InputError(
        f"the judge pool does not agree on who grades: {odd.name} {what}, while {ref.name} serves '{model}' with "
        f"{ref.describe()}. Every endpoint of --judge-url must serve the same judge (same weights, tokenizer, "
        f"dtype and quantization), or verdicts of two judges would mix under one identity: serve the same model "
        f"at {odd.name}, or leave it out of --judge-url", field="url")


def establish(urls: list[str], model: str, headers: Mapping[str, str], *, deadline_s: float | None,
              facts: bool = True) -> Established:
    """Ask every endpoint who it is, check that they agree, and fingerprint the weights.

    Args:
        urls: the pool's ``.../v1`` bases.
        model: the served model name.
        headers: request headers (the API key).
        deadline_s: the judge's own bound on start-up (the run's deadline applies as well).
        facts: also read how each server runs the model (:mod:`reward.judge.server_facts`).

    The endpoints' answers to the fixed probes are compared afterwards, by the backend that knows
    how to ask (:func:`reward.judge.signature.check_numbers`).

    Raises:
        InputError: an endpoint disagrees with the others (named, with what differs).
        JudgeDeadlineError: start-up ran past the deadline.
    """
    from reward.judge.identity import model_fingerprint

    clock = StartupClock(deadline_s)
    # endpoints are asked side by side: a silent one costs one request's bound, not one per endpoint
    views = each_endpoint(lambda u: _view(u, model, headers, clock, facts), urls)
    listed = [v for v in views if v.entry is not None]
    if not listed:
        return Established(urls=list(urls), entry=None, facts=None, weights=None, clock=clock, views=views)
    for v in views:
        if v.answered and v.entry is None:
            raise refuse_pool(model, v, listed[0], f"does not serve '{model}' (it answers, but lists other models)")
    groups = _groups(listed)
    ref = groups[0][0]
    for group in groups[1:]:
        raise refuse_pool(model, group[0], ref, f"serves '{model}' with {group[0].describe()}")
    silent = [v for v in views if not v.answered]
    for v in silent:
        log.warning("judge endpoint %s did not answer at start-up (%s): left out of the pool, since who grades "
                    "there cannot be checked", v.name, v.error)
    kept = [v.url for v in views if v.answered]
    root = ref.entry.get("root") if ref.entry else None
    weights = model_fingerprint(str(root), clock=clock) if root else None
    return Established(urls=kept, entry=ref.entry, facts=ref.facts or None, weights=weights, clock=clock,
                       views=views)
