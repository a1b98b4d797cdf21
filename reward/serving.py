"""Talking to OpenAI-compatible servers (vLLM): base URLs, API keys, served models, retries.

One place for what every HTTP client of the project (the judge, policy generation, benchmarks)
needs before and around its requests:

- :func:`normalise_url` / :func:`split_urls`: ``http://host:port``, ``.../v1`` and ``.../v1/``
  name one server; a comma-separated list (``--judge-url a,b``) becomes a list of ``.../v1``
  bases, blanks (a trailing comma) ignored.
- :func:`api_key` / :func:`auth_headers`: the key is read from an environment variable and
  only ever put in a header, never in a message or a ``repr``.
- :func:`list_models` / :func:`first_served_model` / :func:`resolve_served_model`: ask
  ``GET /v1/models``; the first endpoint that answers decides (a dead replica listed first
  does not stop a client that routes around it).
- :class:`RetryPolicy`: bounded retries with exponential backoff and jitter, and which HTTP
  statuses are worth retrying at all.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "GENERATE_API_KEY_ENV",
    "UnreachableServerError",
    "JUDGE_API_KEY_ENV",
    "NO_RETRY_STATUSES",
    "RetryPolicy",
    "api_key",
    "auth_headers",
    "bounded_request",
    "first_served_model",
    "list_models",
    "normalise_url",
    "resolve_served_model",
    "server_root",
    "split_urls",
]

JUDGE_API_KEY_ENV = "RUBRICSTREE_JUDGE_API_KEY"
GENERATE_API_KEY_ENV = "RUBRICSTREE_GENERATE_API_KEY"
# a bad request (a prompt longer than the context, a wrong model name, no key) stays bad
NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 422})


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for logs, errors and reports."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def normalise_url(url: str) -> str:
    """Accept ``http://host:port``, ``.../v1`` or ``.../v1/`` (spaces around ignored); return the
    ``.../v1`` base."""
    url = url.strip().rstrip("/")
    if not url:
        raise ValueError("an empty server URL")
    return url if url.endswith("/v1") else url + "/v1"


def is_local_url(url: str) -> bool:
    """Whether ``url`` names this machine or a private network (loopback, RFC 1918, link-local,
    ``localhost``, a bare host name without dots): a server someone runs, not a hosted API."""
    import ipaddress
    from urllib.parse import urlparse

    host = (urlparse(url if "//" in url else f"http://{url}").hostname or "").lower()
    if host in ("localhost", "") or "." not in host and ":" not in host:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith((".local", ".internal", ".lan", ".localhost"))
    return ip.is_loopback or ip.is_private or ip.is_link_local


def server_root(url: str) -> str:
    """The server itself, without ``/v1`` (where vLLM serves ``/metrics`` and ``/health``)."""
    return normalise_url(url)[: -len("/v1")]


def split_urls(urls: str | Iterable[str]) -> list[str]:
    """One URL, a comma-separated list or a list of URLs -> normalised ``.../v1`` bases; empty
    entries (``"a,b,"``) are dropped, and no entries at all is an error."""
    parts = urls.split(",") if isinstance(urls, str) else [p for u in urls for p in str(u).split(",")]
    out = [normalise_url(p) for p in parts if p.strip()]
    if not out:
        raise ValueError(f"no server URL in {urls!r}")
    return out


def api_key(env: str) -> str:
    """The API key held by environment variable ``env`` ("" when unset)."""
    return os.environ.get(env, "")


def auth_headers(env: str) -> dict[str, str]:
    """``{"Authorization": "Bearer ..."}`` when ``env`` holds a key, else no headers."""
    key = api_key(env)
    return {"Authorization": f"Bearer {key}"} if key else {}


MAX_META_BYTES = 16 << 20  # a server's /v1/models, /metrics or /tokenize answer: never more than this


def bounded_request(client, method: str, url: str, *, seconds: float, max_bytes: int = MAX_META_BYTES,
                    **kw: Any) -> tuple[int, bytes]:
    """``(status, body)`` of one request that takes at most about ``seconds`` in all.

    httpx's timeout bounds each read, so a server that trickles bytes (or a proxy that keeps the
    connection alive) could hold an ordinary request for ever; here the body is read in chunks
    and the clock is checked after each one. A body over ``max_bytes`` is refused.

    Raises:
        httpx.TimeoutException: the request took longer than ``seconds``.
        ValueError: the body is larger than ``max_bytes``.
        httpx.HTTPError: any other transport error.
    """
    import time

    import httpx

    until = time.monotonic() + seconds
    with client.stream(method, url, timeout=seconds, **kw) as resp:
        body = bytearray()
        for chunk in resp.iter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise ValueError(f"the answer of {redact_url(url)} is larger than {max_bytes} bytes")
            if time.monotonic() > until:
                raise httpx.ReadTimeout(f"the answer of {redact_url(url)} took more than {seconds:.3g}s")
        return resp.status_code, bytes(body)


class UnreachableServerError(ValueError):
    """No endpoint answered at all (connection refused, DNS, timeout): the URL is wrong or nothing
    runs there. A ``ValueError``, as every bad judge setting is."""


def list_models(urls: str | Iterable[str], *, api_key_env: str = JUDGE_API_KEY_ENV,
                timeout_s: float = 10.0, transport: Any = None) -> list[dict[str, Any]]:
    """The ``data`` of ``GET /v1/models`` from the first endpoint that answers with a non-empty
    list (each entry has ``id`` and, with vLLM, ``root``: the model path or hub id).

    Raises:
        ValueError: no endpoint answered; the message names each endpoint and its error.
    """
    import json

    import httpx

    errors, unreachable = [], 0
    headers = auth_headers(api_key_env)
    with httpx.Client(timeout=timeout_s, headers=headers, transport=transport) as client:
        for base in split_urls(urls):
            try:
                status, body = bounded_request(client, "GET", f"{base}/models", seconds=timeout_s)
                if status != 200:
                    raise ValueError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
                data = json.loads(body)["data"]
                if not isinstance(data, list) or not data:
                    raise ValueError("the server lists no model")
                return [m for m in data if isinstance(m, dict)]
            except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
                unreachable += isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                errors.append(f"{redact_url(base)}: {type(exc).__name__}: {exc}".replace(base, redact_url(base)))
    if errors and unreachable == len(errors):
        raise UnreachableServerError(f"no server answers at {'; '.join(errors)}: is it running, and is the URL right?")
    raise ValueError(f"cannot list the served models ({'; '.join(errors)})")


def first_served_model(urls: str | Iterable[str], *, api_key_env: str = JUDGE_API_KEY_ENV,
                       transport: Any = None) -> str:
    """The first model listed by the first endpoint that answers.

    Raises:
        ValueError: no endpoint answered (pass the served model name instead).
    """
    try:
        return str(list_models(urls, api_key_env=api_key_env, transport=transport)[0]["id"])
    except UnreachableServerError:
        raise
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{exc}; pass the served model name") from exc


def resolve_served_model(models: list[Mapping[str, Any]], model: str, where: str) -> str:
    """``model`` if a served id, else the one served model whose ``root`` is ``model`` (a path).

    Raises:
        ValueError: neither (names what the server does serve).
    """
    ids = [m.get("id") for m in models]
    if model in ids:
        return model
    by_root = [str(m["id"]) for m in models if m.get("root") == model]
    if len(by_root) == 1:
        return by_root[0]
    raise ValueError(f"the server at {where} does not serve '{model}' (it serves {ids}); "
                     "pass the served model name as --model")


class RetryPolicy(BaseModel):
    """How often and how patiently an HTTP client retries a failed request.

    Attempt ``k`` (1-based retry) waits ``min(max_backoff_s, backoff_s * 2**(k-1))`` times a
    uniform jitter factor in ``[0.5, 1.5]``. Statuses in :data:`NO_RETRY_STATUSES` are not
    retried; timeouts, connection errors and 5xx/429 are.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(3, ge=0, description="retries after the first attempt")
    backoff_s: float = Field(0.5, ge=0.0, description="first retry's base wait, seconds")
    max_backoff_s: float = Field(30.0, ge=0.0, description="longest base wait, seconds")

    @property
    def attempts(self) -> int:
        return self.max_retries + 1

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 = the first retry)."""
        if retry <= 0:
            return 0.0
        base = min(self.max_backoff_s, self.backoff_s * 2 ** (retry - 1))
        return base * (rng or random).uniform(0.5, 1.5)

    @staticmethod
    def retryable_status(status: int) -> bool:
        return status not in NO_RETRY_STATUSES
