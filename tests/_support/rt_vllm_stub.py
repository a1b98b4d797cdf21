"""A vLLM-shaped judge server of ours on 127.0.0.1, for tests of who grades (issue 39).

A real HTTP server (stdlib ``ThreadingHTTPServer`` in a thread) answering what the judge asks a
vLLM server, with every part of its identity settable and changeable between runs:

- ``GET /v1/models`` (``model``, ``root``, ``max_model_len``), ``/version``, ``/metrics`` (the
  ``vllm:cache_config_info`` labels in ``cache``), ``/server_info`` (``server_info``, else 404);
- ``POST /tokenize`` with the server's tokenizer (``tokenizer``: a :class:`HashTokenizer`), for a
  ``prompt`` or for ``messages`` through the fallback framing our renderer uses for a tokenizer
  without a chat template (``System: ...``); ``tokenize=False`` answers 404 as a server without it;
- ``POST /v1/completions``: the probe (``prompt_logprobs`` of a text) and choice requests (the
  logprobs of the ids in ``logprob_token_ids``); ``POST /v1/chat/completions`` choice requests
  (``top_logprobs``). Both answer from the "weights" (``weights``: a seed deciding every logprob)
  and the "numerics" (``numerics``: an offset standing in for another dtype or quantization).
  The choice grammar allows only the server tokenizer's answer ids: any other requested id gets
  vLLM's -9999.0, as vLLM does. ``prompt_logprobs=False`` refuses the text probe (HTTP 400), as
  a server without that option would.

Faults: ``answer_override = (lp_yes, lp_no)`` replaces the answer logprobs (NaN, infinities, the
clamp), on both APIs. Every request is counted by path in ``hits``.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLAMP = -9999.0



class _Server(ThreadingHTTPServer):
    """The stdlib server with a listen backlog for a judge's concurrent requests: the default of 5
    reset connections under a burst on a loaded machine (ReadError on every retry)."""

    daemon_threads = True
    request_queue_size = 256

class HashTokenizer:
    """A word tokenizer with a fixed vocabulary: ``yes`` and ``no`` at ``yes_id``/``no_id``, every
    other whitespace-separated word at an id hashed with ``salt`` (another salt: another tokenizer)."""

    chat_template = None
    pad_token_id = eos_token_id = 0

    def __init__(self, salt: str = "", yes_id: int = 1, no_id: int = 2) -> None:
        self.salt, self.yes_id, self.no_id = salt, yes_id, no_id

    def _id(self, word: str) -> int:
        if word == "yes":
            return self.yes_id
        if word == "no":
            return self.no_id
        return 10 + int(hashlib.sha256(f"{self.salt}\0{word}".encode()).hexdigest()[:8], 16) % 100_000

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self._id(w) for w in text.split()]

    def __call__(self, text: str, add_special_tokens: bool = False, split_special_tokens: bool = False):
        return {"input_ids": self.encode(text)}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return " ".join(f"w{i}" for i in ids)

    def render(self, messages: list[dict]) -> str:
        """The framing our renderer reads from a tokenizer without a chat template."""
        parts = {m["role"]: m["content"] for m in messages}
        return f"System: {parts.get('system', '')}\n\nUser: {parts.get('user', '')}\n\nAssistant: "


def _unit(*parts) -> float:
    return int(hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class VLLMStub:
    """Start with ``with VLLMStub(...) as srv: srv.url``; change any attribute between runs."""

    def __init__(self, *, model: str = "judge", root: str | None = "/models/judge", max_model_len: int = 4096,
                 version: str = "0.32.0", cache: dict | None = None, server_info: dict | None = None,
                 tokenizer: HashTokenizer | None = None, weights: str = "w1", numerics: float = 0.0,
                 tokenize: bool = True, prompt_logprobs: bool = True) -> None:
        self.model, self.root, self.max_model_len, self.version = model, root, max_model_len, version
        self.cache = {"cache_dtype": "auto"} if cache is None else cache
        self.server_info, self.tokenizer = server_info, tokenizer or HashTokenizer()
        self.weights, self.numerics, self.tokenize = weights, numerics, tokenize
        self.prompt_logprobs = prompt_logprobs
        self.jitter = 0.0
        self.answer_override: tuple[float, float] | None = None
        # completions/chat requests answered 503 (a server busy loading, a slow gateway): the next
        # ``busy_requests`` of them, or every one for which ``busy_when(body)`` is true
        self.busy_requests = 0
        self.busy_when = None
        self.hits: dict[str, int] = {}
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def _send(self, code: int, body) -> None:
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()  # NaN/Infinity as vLLM would not
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                stub._hit(path)
                if path == "/v1/models":
                    entry = {"id": stub.model, "object": "model", "max_model_len": stub.max_model_len}
                    if stub.root is not None:
                        entry["root"] = stub.root
                    return self._send(200, {"object": "list", "data": [entry]})
                if path == "/version":
                    return self._send(200, {"version": stub.version})
                if path == "/metrics":
                    labels = ",".join(f'{k}="{v}"' for k, v in stub.cache.items())
                    return self._send(200, f"vllm:cache_config_info{{{labels}}} 1.0\n".encode())
                if path == "/server_info" and stub.server_info is not None:
                    return self._send(200, {"vllm_config": {"model_config": stub.server_info}})
                return self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                path = self.path.rstrip("/")
                stub._hit(path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if path == "/tokenize" and stub.tokenize:
                    tok = stub.tokenizer
                    text = tok.render(body["messages"]) if "messages" in body else body.get("prompt", "")
                    ids = tok.encode(text)
                    return self._send(200, {"count": len(ids), "max_model_len": stub.max_model_len, "tokens": ids})
                if path in ("/v1/completions", "/v1/chat/completions") and stub.busy(body):
                    return self._send(503, {"error": {"message": "busy"}})
                if path == "/v1/completions":
                    if body.get("prompt_logprobs") is not None and not stub.prompt_logprobs:
                        return self._send(400, {"error": {"message": "prompt_logprobs is not supported"}})
                    return self._send(200, stub._completion(body))
                if path == "/v1/chat/completions":
                    return self._send(200, stub._chat(body))
                return self._send(404, {"detail": "Not Found"})

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> VLLMStub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def stop(self) -> None:
        """The server goes away (connections refused) until :meth:`start_again`."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def start_again(self, **changes) -> None:
        """Listen again on the same port, with ``changes`` applied (e.g. ``weights="w2"``): a restart."""
        for k, v in changes.items():
            setattr(self, k, v)
        port = int(self.url.rsplit(":", 1)[1])
        self._httpd = _Server(("127.0.0.1", port), self._httpd.RequestHandlerClass)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def busy(self, body: dict) -> bool:
        with self._lock:
            if self.busy_requests > 0:
                self.busy_requests -= 1
                return True
        return bool(self.busy_when and self.busy_when(body))

    def _hit(self, path: str) -> None:
        with self._lock:
            self.hits[path] = self.hits.get(path, 0) + 1

    # ------------------------------------------------------------------ what the "model" computes
    def p_yes(self, prompt_key: str) -> float:
        return 0.05 + 0.9 * _unit(self.weights, prompt_key)

    def _answer(self, prompt_key: str) -> tuple[float, float]:
        if self.answer_override is not None:
            return self.answer_override
        p = self.p_yes(prompt_key)
        # another dtype or quantization moves the logprobs, never above 0 (a probability above 1);
        # ``jitter``: batch noise, a fresh draw in [0, jitter) per value and request
        return (math.log(p) - abs(self.numerics) - self._noise(), math.log(1 - p) - abs(self.numerics) - self._noise())

    def _noise(self) -> float:
        import random

        return random.random() * self.jitter if self.jitter else 0.0

    def _completion(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if body.get("prompt_logprobs") is not None and isinstance(prompt, str):  # the start-up probe
            ids = self.tokenizer.encode(prompt)
            rows = [None] + [{str(t): {"logprob": -8.0 + 0.5 * _unit(self.weights, i, t) + self.numerics - self._noise(),
                                       "rank": 1}}
                             for i, t in enumerate(ids[1:])]
            return {"choices": [{"text": "", "prompt_logprobs": rows}], "usage": {"prompt_tokens": len(ids)}}
        key = json.dumps(prompt)
        lp_yes, lp_no = self._answer(key)
        allowed = {self.tokenizer.yes_id: lp_yes, self.tokenizer.no_id: lp_no}
        asked = body.get("logprob_token_ids") or list(allowed)
        top = {f"token_id:{t}": allowed.get(t, CLAMP) for t in asked}
        return {"choices": [{"text": "yes", "logprobs": {"top_logprobs": [top]}}],
                "usage": {"prompt_tokens": len(prompt) if isinstance(prompt, list) else 1, "completion_tokens": 1}}

    def _chat(self, body: dict) -> dict:
        key = json.dumps(body.get("messages"))
        lp_yes, lp_no = self._answer(key)
        top = [{"token": "yes", "logprob": lp_yes}, {"token": "no", "logprob": lp_no},
               *({"token": f"x{i}", "logprob": CLAMP} for i in range(int(body.get("top_logprobs") or 2) - 2))]
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "length",
                             "logprobs": {"content": [{"token": "yes", "logprob": lp_yes, "top_logprobs": top}]}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


def model_folder(folder, seed: int = 0):
    """A model folder the stub can report as its root: a config and a small safetensors file whose
    content (and so its fingerprint) is fixed by ``seed``."""
    from pathlib import Path

    import numpy as np
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    save_file({"w": np.random.default_rng(seed).standard_normal(4096).astype(np.float32)},
              str(folder / "model.safetensors"))
    return folder
