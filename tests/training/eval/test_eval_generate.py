"""Generation helpers and the HTTP generator against a scripted OpenAI-compatible server:
reasoning split, per-prompt seeds, served-name resolution, retries, failures as errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reward.serving import RetryPolicy
from training.generation import (
    GenerationSettings,
    GenRequest,
    HTTPGenerator,
    prompt_seed,
    split_reasoning,
)


def test_split_reasoning():
    assert split_reasoning("<think>hmm</think>\n\nCall 911.") == ("Call 911.", "hmm")
    assert split_reasoning("plain") == ("plain", None)
    assert split_reasoning("<think>still thinking") == ("", "still thinking")


def test_prompt_seed_depends_on_the_prompt_not_the_order():
    assert prompt_seed(0, "a") == prompt_seed(0, "a") != prompt_seed(0, "b")
    assert prompt_seed(1, "a") != prompt_seed(0, "a")


def test_settings_are_validated():
    with pytest.raises(ValueError):
        GenerationSettings(max_new_tokens=0)


@pytest.fixture
def scripted_server():
    """/v1/models lists 'served' with root '/ckpt'; chat answers depend on the user message:
    'flaky' fails once with 503, 'bad' gets a 400, 'think' returns a reasoning block."""
    seen: list[dict] = []
    state = {"flaky": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code: int, obj: dict) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(200, {"data": [{"id": "served", "root": "/ckpt"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append(body)
            text = body["messages"][-1]["content"]
            if text == "flaky" and state["flaky"] == 0:
                state["flaky"] += 1
                return self._send(503, {"error": "busy"})
            if text == "bad":
                return self._send(400, {"error": "prompt too long"})
            content = "<think>let me see</think>Answer." if text == "think" else f"echo {text}"
            self._send(200, {"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                             "usage": {"completion_tokens": 3}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_http_generator_resolves_names_retries_and_reports_failures(scripted_server, monkeypatch):
    url, seen = scripted_server
    settings = GenerationSettings(max_new_tokens=8, temperature=0.7, seed=5)
    retry = RetryPolicy(max_retries=2, backoff_s=0.01)  # short backoff
    gen = HTTPGenerator(url, "/ckpt", settings, retry=retry)  # a path the server reports as root
    assert gen.model == "served"
    got = {}
    gen.generate([GenRequest(k, [{"role": "user", "content": k}]) for k in ("hi", "flaky", "bad", "think")],
                 lambda key, out: got.__setitem__(key, out))
    assert got["hi"].text == "echo hi" and got["hi"].completion_tokens == 3
    assert got["flaky"].ok and got["flaky"].text == "echo flaky"
    assert not got["bad"].ok and "HTTP 400" in got["bad"].error and got["bad"].text is None
    assert (got["think"].text, got["think"].reasoning) == ("Answer.", "let me see")
    assert sum(b["messages"][-1]["content"] == "bad" for b in seen) == 1  # a 400 is not retried
    hi = next(b for b in seen if b["messages"][-1]["content"] == "hi")
    assert hi["seed"] == prompt_seed(5, "hi") and hi["max_tokens"] == 8 and hi["model"] == "served"
    with pytest.raises(ValueError, match="does not serve 'other'"):
        HTTPGenerator(url, "other", settings)
