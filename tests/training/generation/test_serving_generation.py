"""reward.serving (URLs, keys, served models, retry policy) and the HTTP generator's use of it,
over httpx.MockTransport: retries on 5xx and connection errors, none on 4xx, the API key sent as
a header and never shown, n samples per request."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from reward.serving import (
    RetryPolicy,
    auth_headers,
    first_served_model,
    list_models,
    normalise_url,
    server_root,
    split_urls,
)
from training.generation import (
    GenerationSettings,
    GenRequest,
    HTTPGenerator,
    make_generator,
)

FAST = RetryPolicy(max_retries=2, backoff_s=0.0, max_backoff_s=0.0)


@pytest.mark.parametrize("url", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/",
                                 " http://h:8000/v1 "])
def test_normalise_url_with_or_without_v1(url):
    assert normalise_url(url) == "http://h:8000/v1"
    assert server_root(url) == "http://h:8000"


def test_split_urls_ignores_blank_entries():
    assert split_urls("http://a:1, http://b:2/v1/,") == ["http://a:1/v1", "http://b:2/v1"]
    assert split_urls(["http://a:1,http://b:2"]) == ["http://a:1/v1", "http://b:2/v1"]
    with pytest.raises(ValueError):
        split_urls(" , ")
    with pytest.raises(ValueError):
        normalise_url("  ")


def test_auth_headers_read_the_env(monkeypatch):
    monkeypatch.delenv("X_KEY", raising=False)
    assert auth_headers("X_KEY") == {}
    monkeypatch.setenv("X_KEY", "s3cret")
    assert auth_headers("X_KEY") == {"Authorization": "Bearer s3cret"}


def test_retry_policy_backoff_is_exponential_capped_and_jittered():
    p = RetryPolicy(max_retries=5, backoff_s=1.0, max_backoff_s=4.0)
    rng = random.Random(0)
    assert p.attempts == 6 and p.delay(0) == 0.0
    for k, base in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 4.0)):
        d = [p.delay(k, rng) for _ in range(50)]
        assert all(0.5 * base <= x <= 1.5 * base for x in d) and len(set(d)) > 1
    assert not p.retryable_status(400) and not p.retryable_status(401)
    assert p.retryable_status(503) and p.retryable_status(429)


def test_list_models_uses_the_first_endpoint_that_answers():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "dead":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"data": [{"id": "served", "root": "/ckpt"}]})

    t = httpx.MockTransport(handler)
    assert first_served_model("http://dead:1,http://live:1/v1", transport=t) == "served"
    assert list_models(["http://dead:1", "http://live:1"], transport=t)[0]["root"] == "/ckpt"
    with pytest.raises(ValueError, match="no server answers at .*dead:1/v1.*ConnectError.*is it running"):
        first_served_model("http://dead:1", transport=t)


class Server:
    """A scripted OpenAI-compatible server: ``faults`` lists what each chat request gets first
    (an int status or "drop" for a connection error), then 200 answers with n choices."""

    def __init__(self, faults=()):
        self.faults = list(faults)
        self.chat: list[httpx.Request] = []
        self.models: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            self.models.append(request)
            return httpx.Response(200, json={"data": [{"id": "pol", "root": "/ckpt/policy"}]})
        self.chat.append(request)
        if self.faults:
            fault = self.faults.pop(0)
            if fault == "drop":
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(fault, text="busy" if fault >= 500 else "bad request")
        body = json.loads(request.content)
        n = body.get("n", 1)
        return httpx.Response(200, json={
            "choices": [{"index": i, "message": {"content": f"<think>t{i}</think>a{i}"}, "finish_reason": "stop"}
                        for i in reversed(range(n))],
            "usage": {"completion_tokens": 4}})


def _run(gen, requests):
    got = {}
    gen.generate(requests, lambda key, out: got.__setitem__(key, out))
    return got


def test_http_generator_retries_transport_faults_and_5xx(monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_GENERATE_API_KEY", "k-123")
    server = Server(faults=["drop", 503])
    gen = HTTPGenerator("http://h:8000/", "/ckpt/policy", GenerationSettings(max_new_tokens=5), retry=FAST,
                        transport=httpx.MockTransport(server))
    assert gen.model == "pol"  # resolved from the root path the server reports
    got = _run(gen, [GenRequest("q", [{"role": "user", "content": "hi"}])])
    assert got["q"].ok and got["q"].text == "a0" and got["q"].reasoning == "t0"
    assert len(server.chat) == 3  # a dropped connection and a 503, both retried
    for req in server.models + server.chat:
        assert req.headers["authorization"] == "Bearer k-123"
    assert "k-123" not in repr(gen)


def test_http_generator_gives_up_after_max_retries_and_never_retries_4xx(monkeypatch):
    monkeypatch.delenv("RUBRICSTREE_GENERATE_API_KEY", raising=False)
    server = Server(faults=[503, 503, 503, 503])
    gen = HTTPGenerator("http://h:8000", "pol", GenerationSettings(), retry=FAST,
                        transport=httpx.MockTransport(server))
    out = _run(gen, [GenRequest("q", [{"role": "user", "content": "hi"}])])["q"]
    assert not out.ok and out.text is None and "HTTP 503" in out.error
    assert len(server.chat) == FAST.attempts == 3
    server = Server(faults=[400])
    gen = HTTPGenerator("http://h:8000", "pol", GenerationSettings(), retry=FAST,
                        transport=httpx.MockTransport(server))
    out = _run(gen, [GenRequest("q", [{"role": "user", "content": "hi"}])])["q"]
    assert "HTTP 400" in out.error and len(server.chat) == 1
    assert "Authorization" not in server.chat[0].headers


def test_http_generator_n_samples_in_index_order_and_seed_override():
    server = Server()
    gen = make_generator(None, GenerationSettings(temperature=1.0), generate_url="http://h:8000",
                         retry=FAST, transport=httpx.MockTransport(server),
                         chat_template_kwargs={"enable_thinking": False})
    assert gen.model == "pol"  # None: the first model the server lists
    out = _run(gen, [GenRequest("q", [{"role": "user", "content": "hi"}], n=3, seed=11)])["q"]
    assert out.samples == ("<think>t0</think>a0", "<think>t1</think>a1", "<think>t2</think>a2")
    body = json.loads(server.chat[0].content)
    assert body["n"] == 3 and body["seed"] == 11 and body["chat_template_kwargs"] == {"enable_thinking": False}


def test_http_generator_names_an_unserved_model():
    gen_t = httpx.MockTransport(Server())
    with pytest.raises(ValueError, match="does not serve 'other'"):
        HTTPGenerator("http://h:8000", "other", GenerationSettings(), transport=gen_t)
