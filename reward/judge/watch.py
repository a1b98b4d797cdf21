"""Who grades, watched for the whole run: the start-up probes asked again during it.

Start-up (:mod:`reward.judge.startup`, :func:`reward.judge.signature.check_numbers`) names the
judge once. A served judge can change under a run that outlives it: a server restarted with other
weights (the client rides through the restart on its retries), a replica swapped behind a load
balancer, a rollback. So each endpoint of a vLLM pool is asked the fixed probe items again:

- on a schedule: after ``every_items`` answered requests or ``every_s`` seconds, whichever comes
  first (the next request to that endpoint waits for the probe);
- after every reconnection: an endpoint that failed a request (refused connection, timeout, reset,
  5xx: what a restart looks like) is probed before it grades again;
- after a quiet spell: an endpoint with no request in flight that was sent and answered nothing for
  ``idle_s`` seconds (:data:`PROBE_AFTER_IDLE_S` by default) is probed before it grades again (a
  server restarted between two training steps fails no request the client sees: its kept-alive
  connections are simply opened anew);
- at the end of a run that succeeded: :meth:`IdentityWatch.confirm_end` (a judge's
  ``confirm_identity``, which ``score``, ``eval``, ``judge calibrate`` and ``stress`` call before
  they close the judge) probes each endpoint that graded since its last good probe, side by side,
  so the last stretch is confirmed too. A run that fails closes without it.

The answers are compared with the start-up reference (:func:`reward.judge.signature.differ`, at
the tolerance start-up measured); answers that differ are asked once more (batch noise passes,
another judge differs again). When they differ twice, grading stops at once (:class:`JudgeIdentityChanged`,
which names the endpoint and what differs), nothing more is stored, and every verdict (and JSON
generation) this judge cached since that endpoint's last good probe is quarantined in the cache:
kept and marked, never served again (:meth:`reward.judge.cache.VerdictCache.quarantine_since`:
every row the judge's identity wrote since then, by any process sharing the cache file, JSON
generations and an LLM router's routings included; the probe history stays). An
endpoint that does not answer the probe items fails that attempt (it is set aside and the request
goes elsewhere): no verdict comes from an endpoint whose identity was not confirmed. Each probe
request is sent as any judge request is (:class:`reward.judge.signature.Asking`: the judge's timeout,
every fault retried), so a fault in a probe costs no more than a fault in grading.

Cost: each probe is the few probe items plus the text probe, ``stats.probe_items`` counts them;
at the defaults (every 2,000 items or 300 s) that is 0.2% more requests (``docs/reliability.md``).
Nothing here runs per request but a counter and a clock read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reward.errors import JudgeStopped
from reward.judge import defaults as D

log = logging.getLogger(__name__)
PROBE_WAIT_S = 60.0  # the least one re-probe of one endpoint is given (each request within it is bounded too)
PROBE_AFTER_IDLE_S = D.PROBE_IDLE_S  # an endpoint quiet this long is probed before it grades again (a restart between steps)
CLOCK_SLACK_S = 5.0  # quarantine reaches this far before the last good probe (other processes' clocks)
STORE_GRACE_S = 1.0  # a reply is stored a moment after its request returned: a closed window reaches that far


def probe_wait_s(timeout_s: float) -> float:
    """The most one re-probe may take: :data:`PROBE_WAIT_S`, or room for three of the judge's own
    request timeouts when that is longer (a re-probe that meets a hung request and retries it
    still answers, as a grading request would)."""
    return max(PROBE_WAIT_S, 3.0 * float(timeout_s))


class JudgeIdentityChanged(JudgeStopped):
    """A served judge answered the fixed probes differently during the run: another judge."""

    exit_code = 6


class ProbeUnanswered(Exception):
    """An endpoint did not answer the probe items when it was due: this attempt fails there."""


class IdentityUnconfirmed(JudgeStopped):
    """The end-of-run probe got no answer from an endpoint that graded: who graded its last stretch
    is unknown (what was stored since the last good probe is quarantined)."""

    exit_code = 6


@dataclass
class _EndpointWatch:
    last_good: float
    last_good_wall: float  # the same moment on the wall clock (what the cache's rows are stamped with)
    last_used: float  # the last request sent to it or answered (monotonic), or its last good probe
    items: int = 0
    inflight: int = 0  # requests sent and not yet returned: an endpoint busy with them is not quiet
    suspect: bool = False  # failed a request since its last probe: probed before it grades again
    lock: tuple | None = None  # (event loop, its lock): one probe at a time per endpoint


@dataclass
class WatchStats:
    probes: int = 0
    probe_items: int = 0
    failed_probes: int = 0
    rechecks: int = 0  # probes that differed once and were asked again
    quarantined: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


class IdentityWatch:
    """The re-probing of one judge's endpoints (see the module docstring).

    Args:
        reference: the start-up answers (:class:`reward.judge.signature.Numbers`).
        ask: ``ask(url) -> Numbers | None``, blocking (run in a thread): one endpoint's answers now.
        differ: ``differ(reference, numbers) -> str | None`` (what differs, or None).
        every_items, every_s: the schedule (0 or None: that bound is off; both off: only
            reconnections and quiet spells are probed).
        cache: the verdict cache to quarantine in (None: nothing cached, nothing to quarantine).
        identity: ``identity() -> str``: the judge's identity now (the ``judge`` its cache rows
            carry); None: only the rows this process stored are quarantined.
        idle_s: an endpoint quiet this long is probed before it grades again (0: off).
        items_per_probe: what one probe costs in judge items (for the stats).
        wait_s: the most one probe may take (:func:`probe_wait_s`).
    """

    def __init__(self, reference, ask: Callable[[str], object], differ: Callable[[object, object], str | None], *,
                 urls: list[str], every_items: int | None, every_s: float | None, cache=None,
                 items_per_probe: int = 4, names: dict[str, str] | None = None, wait_s: float = PROBE_WAIT_S,
                 identity: Callable[[], str] | None = None, idle_s: float = PROBE_AFTER_IDLE_S) -> None:
        now, wall = time.monotonic(), time.time()
        self.reference, self.ask, self.differ = reference, ask, differ
        self.wait_s = wait_s
        self.every_items = every_items or 0
        self.every_s = every_s or 0.0
        self.cache = cache
        self.identity = identity
        self.idle_s = idle_s or 0.0
        self.items_per_probe = items_per_probe
        self.names = names or {}
        self.endpoints = {u: _EndpointWatch(last_good=now, last_good_wall=wall, last_used=now) for u in urls}
        self.saved: list[tuple[float, str | None, str]] = []  # (time, namespace, key) since the oldest good probe
        self.broken: str | None = None
        self.stats = WatchStats()

    # ------------------------------------------------------------------ the hot path: counters only
    def due(self, url: str) -> bool:
        w = self.endpoints.get(url)
        if w is None:
            return False
        if w.suspect:
            return True
        if self.every_items and w.items >= self.every_items:
            return True
        now = time.monotonic()
        if self._quiet(w, now):
            return True
        return bool(self.every_s) and now - w.last_good >= self.every_s

    def _quiet(self, w: _EndpointWatch, now: float) -> bool:
        return bool(self.idle_s) and w.inflight == 0 and now - w.last_used >= self.idle_s

    def sending(self, url: str) -> None:
        """A request is about to go to ``url`` (after any probe it was due)."""
        if (w := self.endpoints.get(url)) is not None:
            w.inflight += 1
            w.last_used = time.monotonic()

    def returned(self, url: str) -> None:
        """A request to ``url`` came back (answered or not)."""
        if (w := self.endpoints.get(url)) is not None:
            w.inflight = max(0, w.inflight - 1)
            w.last_used = time.monotonic()

    def answered(self, url: str) -> None:
        if (w := self.endpoints.get(url)) is not None:
            w.items += 1

    def faulted(self, url: str) -> None:
        """A request to ``url`` failed at the transport: a restart looks like this."""
        if (w := self.endpoints.get(url)) is not None:
            w.suspect = True

    def may_store(self) -> bool:
        return self.broken is None

    def stored(self, key: str, namespace: str | None = None) -> None:
        self.saved.append((time.monotonic(), namespace, key))

    def check_broken(self) -> None:
        if self.broken is not None:
            raise JudgeIdentityChanged(self.broken)

    # ------------------------------------------------------------------ the probe
    async def confirm(self, url: str) -> None:
        """Probe ``url`` if it is due (one probe at a time per endpoint).

        Raises:
            JudgeIdentityChanged: its answers differ from the reference (grading stops; what was
                cached since its last good probe is quarantined).
            ProbeUnanswered: it did not answer the probe items (this attempt fails there).
        """
        self.check_broken()
        w = self.endpoints[url]
        async with self._lock(w):
            self.check_broken()
            if not self.due(url):
                return  # another request probed it while this one waited
            idle = self._quiet(w, time.monotonic())
            reason = "reconnection" if w.suspect else "after a quiet spell" if idle else "schedule"
            await self._probe(url, w, reason)

    async def confirm_end(self) -> None:
        """The end of a run that succeeded: probe each endpoint that graded since its last good
        probe, side by side, every probe to its end (each bounded as any probe). A changed answer
        quarantines and raises as during the run. An endpoint that does not answer fails closed:
        who graded its last stretch is unknown, so what was stored since the last good probe is
        quarantined and :class:`IdentityUnconfirmed` raised. Call it on the success path only: a
        failing run closes without it.

        Raises:
            JudgeIdentityChanged: an endpoint answered differently.
            IdentityUnconfirmed: an endpoint that graded did not answer.
        """
        self.check_broken()

        async def one(url: str, w: _EndpointWatch) -> None:
            async with self._lock(w):
                if self.broken is None and w.items:
                    await self._probe(url, w, "end of run")

        due = [(u, w) for u, w in self.endpoints.items() if w.items]
        outcomes = await asyncio.gather(*(one(u, w) for u, w in due), return_exceptions=True)
        self.check_broken()  # a changed answer (its quarantine done in _break)
        for exc in outcomes:
            if isinstance(exc, BaseException) and not isinstance(exc, (ProbeUnanswered, JudgeIdentityChanged)):
                raise exc
        silent = [(w, exc) for (_, w), exc in zip(due, outcomes) if isinstance(exc, ProbeUnanswered)]
        if silent:
            # an endpoint that stopped answering graded nothing after its last request: its window closes there
            moved = self._quarantine(f"the end-of-run probe got no answer ({silent[0][1]})",
                                     [(w, False) for w, _ in silent])
            silent = [exc for _, exc in silent]
            raise IdentityUnconfirmed(
                f"{silent[0]}: who graded the run's last stretch is unknown, so the {moved} verdicts cached since "
                "the last good probe are quarantined (kept, never served) and this run's results since then are not "
                "confirmed. Check the server, then run again (confirmed verdicts come from the cache)")

    @staticmethod
    def _lock(w: _EndpointWatch) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if w.lock is None or w.lock[0] is not loop:  # grade_sync runs each call on a new loop
            w.lock = (loop, asyncio.Lock())
        return w.lock[1]

    async def _probe(self, url: str, w: _EndpointWatch, reason: str) -> None:
        """Ask ``url`` the probes now (its lock held); see :meth:`confirm`."""
        self.stats.probes += 1
        self.stats.probe_items += self.items_per_probe
        self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1
        started, started_wall = time.monotonic(), time.time()
        why = None
        try:
            numbers = await asyncio.wait_for(asyncio.to_thread(self.ask, url), self.wait_s)
        except (TimeoutError, asyncio.TimeoutError):
            numbers, why = None, f"no answer within {self.wait_s:g}s"
        except Exception as exc:  # noqa: BLE001 - a probe that fails confirms nothing
            log.debug("probe of %s failed: %s", url, exc)
            numbers, why = None, f"{type(exc).__name__}: {str(exc)[:160]}"
        if numbers is None or not getattr(numbers, "answers", None):
            self.stats.failed_probes += 1
            w.suspect = True
            why = why or getattr(numbers, "why", None) or "no answers"
            raise ProbeUnanswered(f"{self.names.get(url, url)} did not answer the probe items that confirm who "
                                  f"grades ({reason}; {why})")
        why = self.differ(self.reference, numbers)
        if why is not None:  # asked once more: noise passes, another judge answers differently again
            self.stats.rechecks += 1
            self.stats.probe_items += self.items_per_probe
            try:
                second = await asyncio.wait_for(asyncio.to_thread(self.ask, url), self.wait_s)
            except Exception:  # noqa: BLE001 - no second reading: the first one stands
                second = None
            if second is None or not getattr(second, "answers", None) or self.differ(self.reference, second):
                self._break(url, why)
                self.check_broken()
        w.last_good, w.last_good_wall, w.items, w.suspect = started, started_wall, 0, False
        w.last_used = time.monotonic()
        self._prune()

    def _quarantine(self, reason: str, windows: list[tuple[_EndpointWatch, bool]]) -> int:
        """Quarantine what may have been graded unconfirmed: for each ``(endpoint, open)`` window,
        what was stored since that endpoint's last good probe (to now when ``open``, else to its
        last request: an endpoint that stopped answering graded nothing after it). Every endpoint
        grades under one identity, so a cached row cannot be told by its endpoint: each window
        takes every row of the identity in it (a rolling restart swaps one, then another). A
        failing cache is logged, never raised (the stop that called this still stands)."""
        from reward.judge.cache import SIGNATURE_NAMESPACE as NAMESPACE

        moved = 0
        mono_now, wall_now = time.monotonic(), time.time()
        for w, still_open in windows:
            since = w.last_good
            until = None if still_open else w.last_used + STORE_GRACE_S + CLOCK_SLACK_S
            since_wall = w.last_good_wall
            until_wall = None if until is None else wall_now - (mono_now - until)
            keys = [(ns, k) for t, ns, k in self.saved if t >= since and (until is None or t <= until)]
            try:
                if self.cache is not None and keys:
                    moved += self.cache.quarantine(keys, reason=reason)
                if self.cache is not None and self.identity is not None and hasattr(self.cache, "quarantine_since"):
                    # what other processes sharing the cache stored under this identity in the window (the
                    # probe history stays); a few seconds wider, for clocks that differ between processes
                    moved += self.cache.quarantine_since(self.identity(), since_wall - CLOCK_SLACK_S, reason,
                                                         keep=(NAMESPACE,), until=until_wall)
            except Exception as exc:  # noqa: BLE001 - e.g. a cache locked by another process
                log.error("could not quarantine in the verdict cache (%s: %s): verdicts of the unconfirmed stretch "
                          "may still be served; clear or prune the cache before the next run", type(exc).__name__, exc)
        self.stats.quarantined += moved
        return moved

    def _unconfirmed(self, *named: _EndpointWatch) -> list[tuple[_EndpointWatch, bool]]:
        """The windows to quarantine: the named endpoints' and those of every endpoint that graded
        since its last good probe (one that graded nothing since has nothing unconfirmed)."""
        seen = {id(w) for w in named}
        return [(w, True) for w in named] + [(w, True) for w in self.endpoints.values() if w.items and id(w) not in seen]

    def _break(self, url: str, why: str) -> None:
        name = self.names.get(url, url)
        self.broken = (  # first: a cache error below must not let grading go on
            f"the judge at {name} now answers the fixed probe items differently from the judge this run started with "
            f"({why}): another model or other weights behind the same name, perhaps a restart. Grading stopped")
        moved = self._quarantine(f"the judge at {name} answered the probes differently ({why})",
                                 self._unconfirmed(self.endpoints[url]))
        self.broken += (f"; the {moved} verdicts cached since the last good probe are quarantined (kept in the cache, "
                        "never served). Check which model the server serves, then start the run again (it resumes "
                        "from the cache)")
        log.error("%s", self.broken)

    def _prune(self) -> None:
        oldest = min((w.last_good for w in self.endpoints.values()), default=time.monotonic())
        if self.saved and self.saved[0][0] < oldest:
            self.saved = [x for x in self.saved if x[0] >= oldest]


async def confirm_judges(*judges) -> None:
    """The end-of-run probes of several judges (a reward's judge and its panel's), side by side and
    each to its end, so one judge's stop never cancels another's quarantine; then the first stop:
    another judge before an unconfirmed one before any other error. None entries are skipped."""
    outcomes = await asyncio.gather(*(j.confirm_identity() for j in judges if j is not None), return_exceptions=True)
    errors = [e for e in outcomes if isinstance(e, BaseException)]
    for kind in (JudgeIdentityChanged, IdentityUnconfirmed, BaseException):
        for e in errors:
            if isinstance(e, kind):
                raise e
