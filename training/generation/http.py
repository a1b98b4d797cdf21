"""Policy responses from a vLLM/OpenAI-compatible ``/v1/chat/completions`` server.

The server applies the chat template. Requests in flight are bounded by a semaphore; each one is
retried under :class:`reward.serving.RetryPolicy` (timeouts, connection errors, 5xx and 429 are
retried with exponential backoff and jitter; a 4xx such as a too-long prompt is not), and a
request that still fails becomes a :class:`GenOutput` with ``error`` set. The base URL may be
given with or without ``/v1``; the API key comes from an environment variable and is only ever
sent as a header. ``model`` may be the served name or a path the server reports as ``root``.

Time: each attempt is bounded as a whole (httpx's timeout is per read, so a server trickling
bytes could hold it longer) by ``timeout_s`` and by what is left of the run's deadline when a
command runs under one (``reward.judge.budget``, ``--deadline``): a hung policy server stops the
run with :class:`~reward.errors.JudgeDeadlineError` (exit 4) at the deadline, keeping what was
generated, instead of waiting ``timeout_s`` times every retry of every request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from reward.aio import gather_or_cancel
from reward.errors import JudgeDeadlineError
from reward.judge.budget import current_budget
from reward.serving import (
    GENERATE_API_KEY_ENV,
    RetryPolicy,
    auth_headers,
    list_models,
    normalise_url,
    redact_url,
    resolve_served_model,
)
from training.generation.settings import (
    GenerationSettings,
    GenOutput,
    GenRequest,
    OnDone,
    progress,
    prompt_seed,
    split_reasoning,
)

__all__ = ["HTTPGenerator"]


class HTTPGenerator:
    """Responses from an OpenAI-compatible chat endpoint (vLLM ``serve``).

    Args:
        url: the server (``http://host:port`` or ``.../v1``).
        model: the served model name, a path that the server reports as a model's ``root``, or
            None for the first model it lists.
        settings: decoding settings.
        concurrency: requests in flight at most.
        timeout_s: per-request timeout; retry: how failed requests are retried.
        api_key_env: environment variable holding an API key, if the server wants one.
        chat_template_kwargs: extra chat-template options (``settings.thinking`` wins for
            ``enable_thinking``).
        transport: an httpx async transport to send requests through (tests); default httpx's.
    """

    backend = "http"

    def __init__(self, url: str, model: str | None, settings: GenerationSettings, *, concurrency: int = 32,
                 timeout_s: float = 600.0, retry: RetryPolicy | None = None,
                 api_key_env: str = GENERATE_API_KEY_ENV, chat_template_kwargs: dict[str, Any] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base = normalise_url(url)
        self.settings = settings
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy(max_retries=3, backoff_s=2.0, max_backoff_s=30.0)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._api_key_env = api_key_env
        self._transport = transport
        self.model = self._served_name(model)

    def __repr__(self) -> str:  # never show the key
        return f"HTTPGenerator(url={self.base!r}, model={self.model!r})"

    def _served_name(self, model: str | None) -> str:
        sync_transport = None
        if self._transport is not None and isinstance(self._transport, httpx.BaseTransport):
            sync_transport = self._transport
        try:
            models = list_models(self.base, api_key_env=self._api_key_env, timeout_s=30, transport=sync_transport)
        except ValueError as exc:
            raise ValueError(f"cannot list the models served at {self.base}: {exc}") from exc
        if model is None:
            return str(models[0]["id"])
        return resolve_served_model(models, str(model), self.base)

    def _body(self, req: GenRequest) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"model": self.model, "messages": req.messages, "max_tokens": s.max_new_tokens,
                                "temperature": s.temperature}
        if req.n > 1:
            body["n"] = req.n
        if s.temperature > 0:
            body["top_p"] = s.top_p
            if s.top_k:
                body["top_k"] = s.top_k
            body["seed"] = req.seed if req.seed is not None else prompt_seed(s.seed, req.key)
        if req.structured:
            body["structured_outputs"] = req.structured
        template = dict(self.chat_template_kwargs)
        if s.thinking is not None:
            template["enable_thinking"] = s.thinking
        if template:
            body["chat_template_kwargs"] = template
        return body

    def _time_left(self, budget, last: str) -> float:
        """This attempt's timeout: ``timeout_s``, or less when the run's deadline is nearer.

        Raises:
            JudgeDeadlineError: the run's deadline has passed.
        """
        left = None if budget is None else budget.left()
        if left is None:
            return self.timeout_s
        if left <= 0:
            raise JudgeDeadlineError(
                f"the run's deadline of {budget.seconds:g}s passed while waiting on the policy server at "
                f"{redact_url(self.base)} (last failure: {last}); what was generated is kept: rerun to resume, "
                "or raise --deadline")
        return max(0.001, min(self.timeout_s, left))

    async def _one(self, client: httpx.AsyncClient, sem: asyncio.Semaphore, req: GenRequest) -> GenOutput:
        last = "no attempt"
        budget = current_budget()
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(min(self.retry.delay(attempt), self._time_left(budget, last)))
            try:
                async with sem:
                    timeout = self._time_left(budget, last)  # once a slot is free: queued time counts too
                    async with asyncio.timeout(timeout):
                        resp = await client.post(f"{self.base}/chat/completions", json=self._body(req),
                                                 timeout=timeout)
            except (httpx.HTTPError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else f"timeout after {timeout:.3g}s"
                continue
            if resp.status_code != 200:
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if not self.retry.retryable_status(resp.status_code):
                    break
                continue
            try:
                data = resp.json()
                choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
                texts = tuple(c["message"].get("content") or "" for c in choices)
                first = choices[0]
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                last = f"malformed answer: {exc}: {resp.text[:200]}"
                continue
            answer, reasoning = split_reasoning(texts[0])
            reasoning = first["message"].get("reasoning_content") or first["message"].get("reasoning") or reasoning
            usage = data.get("usage") or {}
            return GenOutput(answer, first.get("finish_reason"), usage.get("completion_tokens"), reasoning,
                             samples=texts)
        if budget is not None and budget.left() <= 0:  # the last attempt ran into the deadline: the run stops
            self._time_left(budget, last)
        return GenOutput(None, error=last)

    async def agenerate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Async form of :meth:`generate`."""
        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency)
        bar = progress(len(requests), desc)
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=auth_headers(self._api_key_env),
                                         transport=self._transport) as client:
                async def run(req: GenRequest) -> None:
                    out = await self._one(client, sem, req)
                    on_done(req.key, out)  # in the event loop thread: appends never interleave
                    bar.update(1)

                await gather_or_cancel(run(r) for r in requests)
        finally:
            bar.close()

    def generate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Answer every request, calling ``on_done(key, output)`` as each finishes."""
        asyncio.run(self.agenerate(requests, on_done, desc))

    def close(self) -> None:
        """Nothing to release (clients live only inside :meth:`generate`)."""
