"""The one retry loop of every served judge (token-id completions in ``http.py``, chat in ``chat.py``).

A request is retried at the very same body, across the endpoints of the pool, with exponential
backoff and jitter (:class:`reward.serving.RetryPolicy`), for every fault: timeouts, refused or
reset connections, bad gzip and other decoding errors, 5xx, 429 (waiting what ``Retry-After``
asks, capped), a 200 that is not JSON, and a 200 whose body the caller's ``read`` rejects
(:class:`~reward.judge.replies.BadReply`). A 4xx that names the request is not retried, except
when the backend can drop an unsupported field and ask again (``_on_refused``).

Time: each attempt is bounded as a whole by ``timeout_s`` (httpx's own timeout is per read, so a
server trickling bytes could hold a request far longer) and by what is left of the deadline in
force (``reward.judge.budget``); the circuit breaker stops the run when every endpoint has stopped
answering. Error texts never carry an API key or URL credentials.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from reward.errors import JudgeUnavailableError
from reward.judge.budget import current_budget
from reward.judge.endpoints import Endpoint, EndpointPool
from reward.judge.loop_client import LoopBoundClient
from reward.judge.replies import BadReply
from reward.judge.watch import ProbeUnanswered
from reward.serving import RetryPolicy

log = logging.getLogger(__name__)
RETRY_AFTER_STATUSES = (429, 503)


class RequestFailed(Exception):
    """A request that failed after its retries, or that retrying cannot fix (the reason is redacted)."""


def retry_after_seconds(headers: httpx.Headers, now: float | None = None) -> float | None:
    """The wait a 429/503 asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date. None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def read_reply(read: Callable[[Any], Any] | None, data: Any) -> Any:
    """``read(data)``, any fault in reading a reply's fields (a number out of range, a type the
    reader did not expect) raised as :class:`BadReply`: one bad reply costs one retried, then
    failed, item, never the run."""
    if read is None:
        return data
    try:
        return read(data)
    except BadReply:
        raise
    except (ArithmeticError, LookupError, TypeError, AttributeError, ValueError) as exc:
        raise BadReply(f"unreadable reply ({type(exc).__name__}: {str(exc)[:160]})") from exc


class ServedTransport(LoopBoundClient):
    """Mixin of the served backends: :meth:`_request` with retries, deadline and circuit breaker.

    The host sets ``pool`` (:class:`EndpointPool`), ``retry`` (:class:`RetryPolicy`),
    ``timeout_s``, ``max_retry_after_s``, ``circuit_breaker``, ``stats`` and what
    :class:`LoopBoundClient` needs, and may override :meth:`_on_refused` and :meth:`_redact`.
    """

    pool: EndpointPool
    retry: RetryPolicy
    max_retry_after_s: float = 120.0
    circuit_breaker: int = 0

    def _redact(self, text: str) -> str:
        """``text`` without secrets (the host adds its API key)."""
        for ep in self.pool.endpoints:
            text = text.replace(ep.url, ep.name)
        return text

    def _on_refused(self, resp: httpx.Response, body: dict) -> bool:
        """A non-retryable status: True when the body was changed and is worth sending again."""
        return False

    def _breaker(self) -> None:
        if self.pool.all_silent(self.circuit_breaker):
            names = ", ".join(e.name for e in self.pool.endpoints)
            raise JudgeUnavailableError(
                f"the judge stopped answering: {self.circuit_breaker} requests in a row got no answer (timeout "
                f"or refused connection) from every endpoint ({names}); the run stops here and keeps what was "
                "graded. Check the judge server, then rerun to resume from the cache")

    async def _request(self, path: str, body: dict, read: Callable[[Any], Any] | None = None) -> Any:
        """POST ``body`` to ``path`` of an endpoint; return ``read(json)`` (the JSON by default).

        Raises:
            RequestFailed: after the last attempt, for a request retrying cannot fix, or at a
                grading call's own deadline.
            JudgeDeadlineError: the run's deadline passed.
            JudgeUnavailableError: the circuit breaker opened.
        """
        client = self._ensure_client()
        budget = current_budget()
        last, avoid, wait = "no attempt", None, 0.0
        for attempt in range(self.retry.max_retries + 1):
            left = None if budget is None else budget.left()
            if attempt:
                self.stats.retries += 1
                pause = max(wait, self.retry.delay(attempt))
                await asyncio.sleep(pause if left is None else max(0.0, min(pause, left)))
                left = None if budget is None else budget.left()
            wait = 0.0
            if left is not None and left <= 0:
                err = budget.expired(self._redact(last))
                raise err if not isinstance(err, TimeoutError) else RequestFailed(str(err))
            async with self._sem:
                self._breaker()  # a request queued behind hung ones must not wait its turn to hang too
                # Pick the endpoint once a slot is free, not while queued: a queued request that
                # counted as outstanding would make least-outstanding balancing round-robin.
                ep: Endpoint = self.pool.acquire(avoid=avoid)
                ok = dead = unanswered = False
                restart_like = True  # a fault a restart produces (not a malformed body from a live server)
                left = None if budget is None else budget.left()
                timeout = self.timeout_s if left is None else max(0.001, min(self.timeout_s, left))
                watch = getattr(self, "watch", None)
                try:
                    if watch is not None:
                        watch.check_broken()
                        if watch.due(ep.url):  # on schedule, after a reconnection or a quiet spell: who grades here?
                            await watch.confirm(ep.url)
                        watch.sending(ep.url)
                    try:
                        async with asyncio.timeout(timeout):
                            resp = await client.post(f"{ep.url}{path}", json=body, timeout=timeout)
                    finally:
                        if watch is not None:
                            watch.returned(ep.url)
                    self.stats.requests += 1
                    if resp.status_code == 200:
                        data = resp.json()
                        value = read_reply(read, data)
                        ok = True
                        self.stats.by_endpoint[ep.name] = self.stats.by_endpoint.get(ep.name, 0) + 1
                        if watch is not None:
                            watch.answered(ep.url)
                        return value
                    last = f"HTTP {resp.status_code} from {ep.name}: {resp.text[:300]}"
                    asked = retry_after_seconds(resp.headers) if resp.status_code in RETRY_AFTER_STATUSES else None
                    if asked is not None:
                        wait = min(asked, self.max_retry_after_s)  # a busy server, not a broken one
                    elif not self.retry.retryable_status(resp.status_code):
                        ok = True  # the endpoint answered properly; the request is at fault
                        if not self._on_refused(resp, body):
                            raise RequestFailed(self._redact(last))  # a bad request stays bad
                    else:
                        dead = True
                except ProbeUnanswered as exc:  # its identity could not be confirmed: nothing graded there
                    dead = True
                    last = str(exc)
                except (httpx.TimeoutException, TimeoutError):
                    dead = unanswered = True
                    last = f"timeout after {timeout:.3g}s at {ep.name}"
                except BadReply as exc:
                    dead, restart_like = True, False
                    last = f"bad reply from {ep.name}: {exc}"
                except ValueError as exc:  # JSON or text decoding of the body
                    dead, restart_like = True, False
                    last = f"HTTP 200 from {ep.name} without a JSON body ({type(exc).__name__}): {exc}"[:300]
                except httpx.ConnectError as exc:
                    dead = unanswered = True
                    last = f"{type(exc).__name__} at {ep.name}: {exc}"
                except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:  # resets, bad gzip, ...
                    dead = True
                    last = f"{type(exc).__name__} at {ep.name}: {exc}"
                finally:
                    self.pool.release(ep, ok=ok, dead=dead, unanswered=unanswered)
                    if watch is not None and restart_like and (dead or unanswered or wait):
                        watch.faulted(ep.url)  # a restart looks like this: probe it before it grades again
            avoid = ep.url
            log.debug("judge attempt %d failed: %s", attempt + 1, self._redact(last))
            if unanswered:
                self._breaker()
        raise RequestFailed(self._redact(last) + f" (after {self.retry.max_retries + 1} attempts)")
