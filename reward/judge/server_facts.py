"""What a vLLM server reports about HOW it runs its model, beyond ``/v1/models``: the part of a
served judge's identity that the weights alone do not decide.

Two servers of the same weights at another dtype or quantization grade differently, so these go
into the identity (:func:`reward.judge.identity.served_model_id`) and the verdict-cache key.
What vLLM 0.32 reports without special settings (checked on the test server):

- ``/version``: the vLLM version;
- ``/metrics``, the ``vllm:cache_config_info`` labels: the KV-cache dtype (``cache_dtype``,
  ``auto`` = the model's dtype), the Mamba state dtypes, and, where the cache's size is given in
  bytes (the CPU backend always gives it), its bytes per token (``kv_bytes_per_token``), which
  follows the model's dtype when the cache dtype is ``auto`` (1024 at float32 and 512 at
  bfloat16 for our test model);
- NOT the model's dtype (``--dtype``) nor a quantization applied at load time
  (``--quantization fp8`` on unquantized weights). A quantization stored in the checkpoint
  (``quantization_config`` in its ``config.json``) is covered by the content fingerprint of the
  ``root`` folder where it is readable here.

A server started with ``VLLM_SERVER_DEV_MODE=1`` also answers ``/server_info``, whose
``model_config`` gives ``dtype`` and ``quantization``: both are then part of the identity. Without
it, name what the server cannot tell with a judge ``revision`` (e.g. ``bf16-fp8``). An endpoint
that answers none of these (a hosted API) contributes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

CACHE_LABELS = ("cache_dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype")
# one labelled line of the Prometheus text is all we read: a regular expression, not a parser dependency
_LABEL = re.compile(r'(\w+)="([^"]*)"')


class _Reply:
    def __init__(self, body: bytes) -> None:
        self.text = body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.text)


def _get(client, url: str, seconds: float):
    from reward.serving import bounded_request

    try:
        status, body = bounded_request(client, "GET", url, seconds=seconds)
    except Exception:  # noqa: BLE001 - any transport trouble: the fact is simply not known
        return None
    return _Reply(body) if status == 200 else None


def _kv_bytes_per_token(labels: Mapping[str, str]) -> str | None:
    try:
        size, tokens = int(labels["kv_cache_memory_bytes"]), int(labels["kv_cache_size_tokens"])
    except (KeyError, ValueError):
        return None
    return str(round(size / tokens)) if size > 0 and tokens > 0 else None  # a whole number: the blocks divide it


def _model_config(info: Any) -> Mapping[str, Any]:
    cfg = info.get("vllm_config") if isinstance(info, Mapping) else None
    cfg = cfg.get("model_config") if isinstance(cfg, Mapping) else None
    return cfg if isinstance(cfg, Mapping) else {}


def server_facts(url: str, headers: Mapping[str, str] | None = None, timeout: float = 5.0,
                 transport=None, clock=None) -> dict[str, str]:
    """``{"vllm": version, "cache_dtype": ..., "dtype": ..., "quantization": ...}``, each only
    when the server reports it (see the module docstring); ``{}`` for a server that says nothing.

    Each request takes at most ``timeout`` seconds in all, and no more than ``clock`` leaves
    (:class:`reward.judge.startup.StartupClock`, which raises when start-up has run out of time)."""
    import httpx

    from reward.serving import server_root

    def seconds() -> float:
        return clock.seconds(timeout) if clock is not None else timeout

    base = server_root(url)
    facts: dict[str, str] = {}
    with httpx.Client(headers=dict(headers or {}), timeout=timeout, transport=transport) as client:
        resp = _get(client, f"{base}/version", seconds())
        if resp is not None:
            try:
                version = resp.json().get("version")
            except (ValueError, AttributeError):
                version = None
            if version:
                facts["vllm"] = str(version)
        if not facts:  # not vLLM: no more to ask
            return facts
        resp = _get(client, f"{base}/metrics", seconds())
        if resp is not None:
            for line in resp.text.splitlines():
                if line.startswith("vllm:cache_config_info{"):
                    labels = dict(_LABEL.findall(line))
                    facts.update({k: labels[k] for k in CACHE_LABELS if k in labels})
                    if (per_token := _kv_bytes_per_token(labels)) is not None:
                        facts["kv_bytes_per_token"] = per_token
                    break
        resp = _get(client, f"{base}/server_info?config_format=json", seconds())
        if resp is not None:
            try:
                model_cfg = _model_config(resp.json())
            except ValueError:
                model_cfg = {}
            for key in ("dtype", "quantization"):
                if key in model_cfg:
                    facts[key] = str(model_cfg[key]).removeprefix("torch.")
    return dict(sorted(facts.items()))


def facts_suffix(facts: Mapping[str, str] | None) -> str:
    """The facts as part of an identity string (``[k=v,...]``; empty for none)."""
    if not facts:
        return ""
    return "[" + ",".join(f"{k}={v}" for k, v in sorted(facts.items())) + "]"
