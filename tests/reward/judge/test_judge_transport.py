"""One retry loop for both served backends (issue 25) and a bounded run (issue 26, N6): the chat
judge honours the deadline and retries decoding errors like the token-id judge; a run deadline
stops the whole run with JudgeDeadlineError; the circuit breaker stops it with
JudgeUnavailableError once every endpoint leaves requests unanswered, and an answered error
(an endpoint that is alive) never opens it. httpx MockTransports play the endpoints."""

from __future__ import annotations

import asyncio
import json
import math
import time

import httpx
import pytest
from rt_fakes import _WordTokenizer

from reward.errors import JudgeDeadlineError, JudgeUnavailableError
from reward.judge import JudgeConfig, JudgeItem, Message
from reward.judge.budget import run_deadline
from reward.judge.chat import ChatJudge
from reward.judge.http import HTTPJudge

CONV = (Message(role="user", content="I have chest pain."),)
HTTP_GOOD = {"choices": [{"text": "yes", "logprobs": {"top_logprobs": [{"token_id:1": math.log(0.8),
                                                                       "token_id:2": math.log(0.2)}]}}]}
CHAT_GOOD = {"choices": [{"message": {"content": "yes"}, "logprobs": {"content": [{"top_logprobs": [
    {"token": "yes", "logprob": math.log(0.8)}, {"token": "no", "logprob": math.log(0.2)}]}]}}]}


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response="Call emergency services.", criterion=f"criterion {k}")
            for k in range(n)]


def _judge(kind: str, handler, urls=("http://a:1",), **kw):
    kw.setdefault("backoff_s", 0.001)
    transport = httpx.MockTransport(handler)
    if kind == "http":
        return HTTPJudge(list(urls), "m", tokenizer=_WordTokenizer(), transport=transport, **kw)
    return ChatJudge(list(urls), "m", config=JudgeConfig(mode="choice"), transport=transport, **kw)


def _ok(kind: str) -> httpx.Response:
    return httpx.Response(200, content=json.dumps(HTTP_GOOD if kind == "http" else CHAT_GOOD).encode(),
                          headers={"content-type": "application/json"})


async def _hang(request):
    await asyncio.sleep(30)


BOTH = pytest.mark.parametrize("kind", ["http", "chat"])


@BOTH
def test_decoding_errors_are_retried_by_both_backends(kind):
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(200, content=b"\x00garbage", headers={"content-encoding": "gzip"})
        if calls["n"] == 2:
            raise httpx.DecodingError("bad stream", request=request)
        if calls["n"] == 3:
            return httpx.Response(200, content=b"not json")
        return _ok(kind)

    judge = _judge(kind, handler)
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.p_yes == pytest.approx(0.8, abs=1e-6), v.failure  # the fake endpoint's fixed answer
    assert judge.stats.retries == 3


@BOTH
def test_both_backends_honour_the_grading_calls_deadline(kind):
    judge = _judge(kind, _hang, timeout_s=1.0, max_retries=200, deadline_s=1.0, circuit_breaker=0)
    t0 = time.monotonic()
    out = judge.grade_sync(_items(3))
    assert time.monotonic() - t0 < 60  # bounds the hang only: without the deadline 201 attempts x 1 s
    assert all(not v.ok for v in out) and all("deadline" in v.failure for v in out), out


@BOTH
def test_a_run_deadline_spans_grading_calls_and_stops_the_run(kind):
    """Each call alone would have its own 30 s; the run's 1 s is shared and then raises."""
    judge = _judge(kind, _hang, timeout_s=0.3, max_retries=50, deadline_s=30.0, circuit_breaker=0)

    async def run():
        for _ in range(10):
            await judge.grade(_items(2))

    t0 = time.monotonic()
    with run_deadline(1.0), pytest.raises(JudgeDeadlineError, match="deadline of 1s passed"):
        asyncio.run(run())
    assert time.monotonic() - t0 < 60  # without the run deadline: 10 calls x 30 s


@BOTH
def test_the_circuit_breaker_stops_a_hung_judge_after_one_round_of_timeouts(kind):
    judge = _judge(kind, _hang, urls=("http://a:1", "http://b:1"), timeout_s=0.3, max_retries=10,
                   deadline_s=60.0, circuit_breaker=4, concurrency=8)
    t0 = time.monotonic()
    with pytest.raises(JudgeUnavailableError, match="4 requests in a row got no answer"):
        judge.grade_sync(_items(40))
    assert time.monotonic() - t0 < 60  # not 40 items x 11 attempts x 0.3 s (132 s)


@BOTH
def test_an_endpoint_that_answers_errors_never_opens_the_breaker(kind):
    judge = _judge(kind, lambda request: httpx.Response(500, text="busy"), timeout_s=0.3, max_retries=3,
                   circuit_breaker=2)
    out = judge.grade_sync(_items(5))
    assert all(not v.ok and "HTTP 500" in v.failure for v in out)


@BOTH
def test_one_live_endpoint_keeps_the_breaker_closed(kind):
    async def handler(request):
        if request.url.host == "hung":
            await asyncio.sleep(30)
        return _ok(kind)

    judge = _judge(kind, handler, urls=("http://hung:1", "http://ok:1"), timeout_s=0.2, circuit_breaker=2,
                   concurrency=4)
    out = judge.grade_sync(_items(12))
    assert all(v.ok for v in out)


@pytest.mark.parametrize("kind, good", [("http", HTTP_GOOD), ("chat", CHAT_GOOD)])
def test_a_judge_given_its_own_transport_caches_only_under_a_revision(tmp_path, kind, good, caplog):
    """Start-up does not ask a judge built on a transport of the caller's who it is: without a
    revision it grades without the cache (one warning), with one it caches. Before, such a judge
    cached under its name alone, so another model behind the same name was served its verdicts."""
    from reward.judge import VerdictCache

    def handler(request):
        return httpx.Response(200, json=good)

    cache = VerdictCache(tmp_path / "v.sqlite")
    with caplog.at_level("WARNING"):
        judge = _judge(kind, handler, cache=cache)
    assert judge.cache is None and judge.identity_unknown and "own HTTP transport" in caplog.text
    assert all(v.ok for v in judge.grade_sync(_items(3))) and len(cache) == 0
    vouched = _judge(kind, handler, cache=cache, revision="judge-2026-12")
    assert all(v.ok for v in vouched.grade_sync(_items(3))) and len(cache) == 3
