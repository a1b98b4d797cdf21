"""A proxy of ours in front of a real server that rewrites chosen answers (issue 39 tests).

Every request is forwarded to ``upstream`` (the real vLLM CPU judge) and its answer passed back,
except that ``rewrite(path, data)`` may return another JSON body for an answer (``data`` is the
parsed JSON, or None when it is not JSON; return None to pass the answer through; a ``_status`` key in
it sets the answer's HTTP status). It stands for
what the real server cannot be made to do on its own: report another root, serve other numbers
behind the same name, answer NaN. ``requests`` counts forwarded requests by path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class RewriteProxy:
    """Start with ``with RewriteProxy(upstream, rewrite) as p: p.url``."""

    def __init__(self, upstream: str, rewrite: Callable[[str, Any], Any] | None = None) -> None:
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.rewrite = rewrite or (lambda path, data: None)
        self.requests: dict[str, int] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def _relay(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                path = self.path.split("?")[0]
                with proxy._lock:
                    proxy.requests[path] = proxy.requests.get(path, 0) + 1
                resp = httpx.request(method, proxy.upstream + self.path, content=body, timeout=120,
                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                raw = resp.content
                try:
                    data = resp.json()
                except ValueError:
                    data = None
                new = proxy.rewrite(path, data)
                status = resp.status_code
                if new is not None:
                    if isinstance(new, dict) and "_status" in new:  # another status too (a busy 503)
                        new = dict(new)
                        status = new.pop("_status")
                    raw = json.dumps(new).encode()  # NaN and Infinity written as a sloppy server would
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", resp.headers.get("content-type", "application/json"))
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._relay("GET")

            def do_POST(self) -> None:
                self._relay("POST")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> RewriteProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def with_root(root: str) -> Callable[[str, Any], Any]:
    """A rewrite reporting every served model's ``root`` as ``root``."""
    def rewrite(path: str, data: Any) -> Any:
        if path.rstrip("/") == "/v1/models" and isinstance(data, dict):
            return {**data, "data": [{**m, "root": root} for m in data.get("data", [])]}
        return None
    return rewrite


def shifted_probe(offset: float) -> Callable[[str, Any], Any]:
    """A rewrite adding ``offset`` to every prompt logprob (the start-up probe's numbers): other
    numerics behind the same name and root, as another dtype, quantization or weights give."""
    def rewrite(path: str, data: Any) -> Any:
        if path.rstrip("/") == "/v1/completions" and isinstance(data, dict):
            for choice in data.get("choices") or []:
                for row in choice.get("prompt_logprobs") or []:
                    for entry in (row or {}).values():
                        entry["logprob"] += offset
            return data
        return None
    return rewrite


def shifted_answers(offset: float) -> Callable[[str, Any], Any]:
    """A rewrite of choice answers only (the prompt logprobs pass unchanged): the first listed answer
    of every top list gets ``offset`` added, as a judge with other weights would answer the same items."""
    def rewrite(path: str, data: Any) -> Any:
        if not path.endswith("completions") or not isinstance(data, dict):
            return None
        for choice in data.get("choices") or []:
            lp = choice.get("logprobs") or {}
            for top in lp.get("top_logprobs") or []:  # completions: {"token_id:N": logprob}
                if isinstance(top, dict) and top:
                    top[sorted(top)[0]] += offset
            for pos in lp.get("content") or []:  # chat: [{"token", "logprob"}]
                entries = [e for e in pos.get("top_logprobs") or [] if e.get("logprob", -9999.0) > -9999.0]
                if entries:
                    entries[0]["logprob"] += offset
        return data
    return rewrite
