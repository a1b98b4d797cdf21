"""Which wire API a judge URL speaks: ``completions`` (vLLM, token ids rendered here) or
``chat`` (any OpenAI-compatible ``/v1/chat/completions``: hosted graders, vLLM too).

``auto`` decides once, before the judge is built, with one rule: a server whose ``/v1/models``
lists the served model with vLLM's ``root`` field is vLLM, and gets the token-id backend (exact
prompt ids, shared prefixes); anything else (a hosted API, another server, a listing that fails
on a non-loopback host) gets the chat backend. A loopback server that cannot be listed keeps the
token-id backend, whose own error then says what is wrong. A server that is vLLM but whose
tokenizer is not available here needs ``--judge-api chat`` (documented, not guessed).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlparse

JudgeAPI = Literal["completions", "chat", "auto"]
API_CHOICES = ("completions", "chat", "auto")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def is_loopback(url: str) -> bool:
    return (urlparse(url if "//" in url else f"http://{url}").hostname or "") in LOOPBACK


def list_models(url: str, api_key: str = "", timeout: float = 10.0, strict: bool = False) -> list[dict] | None:
    """The server's ``/v1/models`` entries, or None when it cannot be listed.

    Raises:
        UnreachableServerError: with ``strict``, when nothing accepts a connection at ``url``
            (without it, None: a judge built anyway reports each failed call).
    """
    import json

    import httpx

    from reward.serving import UnreachableServerError, bounded_request, normalise_url, redact_url

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(headers=headers) as client:  # bounded in total time: a trickling server cannot hold it
            status, raw = bounded_request(client, "GET", f"{normalise_url(url)}/models", seconds=timeout)
        data = json.loads(raw) if status == 200 else None
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        if not strict:
            return None
        raise UnreachableServerError(f"no server answers at {redact_url(url)} ({type(exc).__name__}: {exc}): "
                                     "is it running, and is the URL right?") from exc
    except (httpx.HTTPError, ValueError):
        return None
    try:
        models = data["data"]
        return [m for m in models if isinstance(m, dict)] if isinstance(models, list) else None
    except (httpx.HTTPError, KeyError, TypeError, ValueError):
        return None


def resolve_judge_api(urls: list[str], api: str = "auto", api_key: str = "") -> str:
    """``completions`` or ``chat`` for these endpoints (see the module docstring).

    Raises:
        ValueError: ``api`` is not one of completions, chat, auto.
    """
    if api not in API_CHOICES:
        raise ValueError(f"--judge-api must be one of {', '.join(API_CHOICES)}, got '{api}'")
    if api != "auto":
        return api
    models = list_models(urls[0], api_key)
    if models is None:
        return "completions" if is_loopback(urls[0]) else "chat"
    return "completions" if any(m.get("root") for m in models) else "chat"


def chat_served_model(urls: list[str], api_key: str = "") -> str:
    """The model to ask over the chat API when none is named: the server's only model. A hosted
    API lists many, and picking the first would grade with an arbitrary model."""
    models = list_models(urls[0], api_key, strict=True)
    ids = [str(m.get("id")) for m in models or [] if m.get("id")]
    if len(ids) == 1:
        return ids[0]
    listed = f"it lists {len(ids)} models" if models is not None else "its models cannot be listed"
    raise ValueError(f"name the judge model for {urls[0]} ({listed}): pass --served-model, "
                     "e.g. gpt-4.1-2025-04-14")


def chat_judge_if_chosen(urls: list[str], judge_api: str, served_model: str | None, config, cache,
                         kwargs: dict):
    """A :class:`~reward.judge.chat.ChatJudge` when ``judge_api`` resolves to chat, else None
    (``make_judge`` then builds the token-id backend). ``kwargs`` are the judge's options."""
    from reward.judge.chat import API_KEY_ENV, ChatJudge, api_key_for

    key = api_key_for(urls, kwargs.get("api_key_env") or API_KEY_ENV)
    if resolve_judge_api(urls, judge_api, key) != "chat":
        return None
    return ChatJudge(urls, served_model or chat_served_model(urls, key), config=config, cache=cache, **kwargs)


def served_judge_identity(judge_url: str, judge_api: str = "auto", served_model: str | None = None,
                          api_key_env: str | None = None) -> dict[str, str]:
    """``{"backend": "chat"|"http", "model": name}`` of a served judge, without building it (an
    evaluation records who grades before it loads the judge, and re-scores without it)."""
    from reward.judge.chat import API_KEY_ENV, api_key_for
    from reward.serving import JUDGE_API_KEY_ENV, first_served_model

    urls = [u.strip() for u in judge_url.split(",")]
    key = api_key_for(urls, api_key_env or API_KEY_ENV)
    if resolve_judge_api(urls, judge_api, key) == "chat":
        return {"backend": "chat", "model": served_model or chat_served_model(urls, key)}
    return {"backend": "http", "model": served_model or first_served_model([urls[0]], api_key_env=api_key_env or JUDGE_API_KEY_ENV)}
