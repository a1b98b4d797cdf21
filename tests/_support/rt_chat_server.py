"""A small OpenAI-compatible chat server of ours, on 127.0.0.1, for tests of the chat judge.

It is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a thread): the judge's whole
transport (httpx, retries, Retry-After, timeouts) runs against it. It answers
``GET /v1/models`` (one model, no vLLM ``root``) and ``POST /v1/chat/completions``:

- explain requests: a JSON verdict in the reference format, in a markdown code block, decided by
  ``decide(key)``, where ``key`` is the text between the template's ``# Rubric item`` header
  and the next header (our test template's layout) or after ``Criterion:`` (our choice template);
- choice requests (``logprobs`` + ``top_logprobs``, ``max_tokens=1``): a top list in which yes and
  no appear in several spellings whose probabilities sum to ``p_of(key)`` and ``1 - p_of(key)``
  (times 0.9; the rest goes to an unrelated word).

Faults are injected per key: ``faults[key]`` is a list consumed one per request, and
``always[key]`` a fault repeated forever: ``"429"`` (with ``Retry-After: 1``), ``"429date"``
(an HTTP-date), ``"500"``, ``"timeout"`` (answers after ``slow_s``), ``"malformed"`` (200 with
prose), ``"nojson"`` (200, not JSON), ``"noanswer"`` (choice: neither word in the list),
``"401echo"`` (401 quoting the Authorization header), ``"prose"`` (the JSON verdict inside
prose) and ``"stringbool"`` (``"criteria_met": "true"``, a string): the last two are read by a
lenient parse and refused by the reference grader's. Every request body is recorded in
``requests``.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "grader-under-test"


def default_decide(key: str) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 != 0


def default_p(key: str) -> float:
    return 0.05 + 0.9 * (int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF)


def item_key(prompt: str) -> str:
    m = re.search(r"# Rubric item\n(.*?)\n\n#", prompt, re.DOTALL)
    if m:
        return m.group(1).strip()
    m = re.search(r"Criterion: (.*?)\n\nIs the criterion met\?", prompt, re.DOTALL)
    if m:
        return m.group(1).strip()
    return prompt


class ChatServer:
    """Start with ``with ChatServer() as srv: srv.url``."""

    def __init__(self, decide=default_decide, p_of=default_p, slow_s: float = 3.0) -> None:
        self.decide, self.p_of, self.slow_s = decide, p_of, slow_s
        self.faults: dict[str, list[str]] = {}
        self.always: dict[str, str] = {}
        self.requests: list[dict] = []
        self.headers_seen: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, code: int, body, headers: dict | None = None) -> None:
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": "not found"})
                    return
                server._answer(self, body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # ------------------------------------------------------------------ answers
    def _fault(self, key: str) -> str | None:
        with self._lock:
            if key in self.always:
                return self.always[key]
            queue = self.faults.get(key)
            return queue.pop(0) if queue else None

    def _answer(self, h, body: dict) -> None:
        with self._lock:
            self.requests.append(body)
            self.headers_seen.append(dict(h.headers))
        prompt = body["messages"][-1]["content"]
        key = item_key(prompt)
        fault = self._fault(key)
        choice = bool(body.get("logprobs")) and body.get("max_tokens") == 1
        if fault == "429":
            return h._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
        if fault == "429date":
            when = email.utils.formatdate(time.time() + 2, usegmt=True)
            return h._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": when})
        if fault == "500":
            return h._send(500, {"error": {"message": "internal error"}})
        if fault == "401echo":  # a careless provider that echoes the key it was sent
            return h._send(401, {"error": {"message": f"bad key: {h.headers.get('Authorization')}"}})
        if fault == "nojson":
            return h._send(200, b"<html>proxy error</html>")
        if fault == "timeout":
            time.sleep(self.slow_s)
        if choice:
            return h._send(200, self._choice(key, fault == "noanswer"))
        if fault == "malformed":
            content = "I think the response partly meets it."
        elif fault in ("prose", "stringbool"):  # what a lenient parse takes and the reference's rejects
            met = self.decide(key)
            verdict = {"explanation": "prose", "criteria_met": str(met).lower() if fault == "stringbool" else met}
            content = "My verdict follows. " + json.dumps(verdict) + " Hope this helps."
            if fault == "stringbool":
                content = "```json\n" + json.dumps(verdict) + "\n```"
        else:
            verdict = {"explanation": f"graded {key[:40]}", "criteria_met": self.decide(key)}
            content = "```json\n" + json.dumps(verdict, indent=2) + "\n```"
        return h._send(200, _completion(content, prompt_tokens=len(prompt) // 4, completion_tokens=30))

    def _choice(self, key: str, no_answer: bool) -> dict:
        p = self.p_of(key)
        if no_answer:
            top = [{"token": "maybe", "logprob": math.log(0.6)}, {"token": "I", "logprob": math.log(0.4)}]
        else:
            top = [{"token": " Yes", "logprob": math.log(0.9 * p * 0.7)},
                   {"token": "yes", "logprob": math.log(0.9 * p * 0.3)},
                   {"token": "No", "logprob": math.log(0.9 * (1 - p) * 0.8)},
                   {"token": " no", "logprob": math.log(0.9 * (1 - p) * 0.2)},
                   {"token": "Maybe", "logprob": math.log(0.1)}]
        out = _completion("yes" if p >= 0.5 else "no", prompt_tokens=100, completion_tokens=1)
        out["choices"][0]["logprobs"] = {"content": [{"token": top[0]["token"], "logprob": top[0]["logprob"],
                                                      "top_logprobs": top}]}
        return out


def _completion(content: str, *, prompt_tokens: int, completion_tokens: int) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
