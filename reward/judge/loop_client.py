"""The HTTP client of a served judge, bound to the event loop that uses it.

An ``httpx.AsyncClient``'s connections and an ``asyncio.Semaphore`` belong to the event loop that
made them: a later ``asyncio.run`` (``grade_sync`` twice, ``score_sync``, ``route_sync``) must get
its own, else its first request fails with "Event loop is closed". Both served backends (token-id
completions and chat) hold their client through this mixin.
"""

from __future__ import annotations

import asyncio

import httpx


class LoopBoundClient:
    """Mixin: ``_ensure_client()`` returns a client (and ``self._sem``) for the running loop.

    The host class sets ``concurrency``, ``timeout_s``, ``_headers`` and ``_transport`` and calls
    :meth:`_init_client_state` in its constructor.
    """

    concurrency: int
    timeout_s: float
    _headers: dict[str, str]
    _transport: httpx.AsyncBaseTransport | None

    def _init_client_state(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _ensure_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            self._client = httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=self._headers,
                                             transport=self._transport)
            self._sem = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._client

    async def confirm_identity(self) -> None:
        """At the end of a run that succeeded: the identity watch's end-of-run probe of every
        endpoint that graded since its last good probe (``reward.judge.watch``).

        Raises:
            JudgeIdentityChanged: the judge proved to be another (what it stored since its last
                good probe is quarantined).
        """
        watch = getattr(self, "watch", None)
        if watch is not None:
            await watch.confirm_end()

    async def aclose(self) -> None:
        """Close the client if it belongs to the running loop; forget it either way."""
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._loop = None
