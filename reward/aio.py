"""The asyncio helpers the concurrent steps share.

- :func:`gather_or_cancel`: ``asyncio.gather`` lets the other awaitables run on when one fails: a
  failed run would then half finish in the background (more requests, more appended records)
  while its error is reported.
- :class:`SingleFlight`: concurrent requests for one key share one computation (the routing and
  the applicability questions of a prompt whose rollouts are scored one by one, as verl's
  ``compute_score`` does). Written here because asyncio has no such primitive and the one rule
  that matters (a waiter is not cancelled with the request it waited on) is a few lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


async def gather_or_cancel(aws: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await all of ``aws`` concurrently; return their results in order. When one raises (or the
    caller is cancelled), cancel the others, wait until they have stopped, and raise."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:  # stop the others: the step must fail, not half-finish
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _cancelled_itself() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+; on 3.10 a waiter cannot tell
    return cancelling is None or cancelling() > 0


class SingleFlight(Generic[T]):
    """Concurrent calls of :meth:`run` with one key share one computation.

    The first caller computes; the others wait for its result (or its exception). When the first
    caller is cancelled, those waiting are not: the next of them computes in its place (Python
    3.11+, where a task can tell its own cancellation from the one it waited on; on 3.10 the
    waiters are cancelled with it). A result is not kept once the computation ends (memoising is
    the caller's choice).
    """

    def __init__(self) -> None:
        self._inflight: dict[Hashable, asyncio.Future[T]] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._inflight

    async def run(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``(result, shared)``: ``shared`` is True when another caller's computation gave it."""
        while (fut := self._inflight.get(key)) is not None:
            try:
                return await asyncio.shield(fut), True
            except asyncio.CancelledError:
                if not fut.cancelled() or _cancelled_itself():
                    raise
                # the caller that computed was cancelled, not this one: compute here instead
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            out = await compute()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(out)
        return out, False
