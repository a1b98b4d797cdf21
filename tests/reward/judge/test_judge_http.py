"""The HTTP judge's transport logic without a server: an httpx MockTransport stands in for the
vLLM endpoints (the real server is exercised in tests/reward/judge/test_judge_server.py).

Covered here: least-outstanding balancing under the concurrency limit, retry of 5xx, no retry of a
bad request, a 200 without a JSON body, and repeated ``grade_sync`` calls (one event loop each)."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest
from rt_fakes import _WordTokenizer

from reward.judge import JudgeItem, Message
from reward.judge.http import HTTPJudge

CONV = (Message(role="user", content="I have chest pain."),)


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response="Call emergency services.", criterion=f"criterion {k}")
            for k in range(n)]


def _choice_answer(p_yes: float = 0.8) -> dict:
    # _WordTokenizer: "yes" is id 1, "no" is id 2
    return {"choices": [{"text": "yes", "logprobs": {"top_logprobs": [
        {"token_id:1": math.log(p_yes), "token_id:2": math.log(1 - p_yes)}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


def _judge(handler, urls=("http://a:1",), **kw) -> HTTPJudge:
    kw.setdefault("backoff_s", 0.001)
    return HTTPJudge(list(urls), "m", tokenizer=_WordTokenizer(), transport=httpx.MockTransport(handler), **kw)


def test_least_outstanding_balancing_sends_work_to_the_free_endpoint():
    """A slow and a fast endpoint, two requests in flight at most: while the slow one holds its
    request, every other request goes to the fast one. (Picking the endpoint before waiting for a
    slot counted queued requests as outstanding and split them half and half.)"""

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "slow":
            await asyncio.sleep(0.8)
        else:
            await asyncio.sleep(0.01)
        return httpx.Response(200, json=_choice_answer())

    judge = _judge(handler, urls=("http://slow:1", "http://fast:1"), concurrency=2)
    out = judge.grade_sync(_items(12))
    assert all(v.ok for v in out)
    # the slow one takes the first request (a tie) and one more: 10 of 12 expected, 6 before the fix
    assert judge.stats.by_endpoint["http://fast:1/v1"] >= 9, judge.stats.by_endpoint


def test_server_error_is_retried_then_succeeds():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(503, text="busy") if calls["n"] == 1 else httpx.Response(200, json=_choice_answer(0.3))

    judge = _judge(handler)
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.met is False and v.p_yes == pytest.approx(0.3)
    assert judge.stats.retries == 1 and judge.stats.requests == 2


def test_bad_request_is_not_retried_and_fails_explicitly():
    judge = _judge(lambda request: httpx.Response(400, text="bad field"))
    [v] = judge.grade_sync(_items(1))
    assert v.met is None and "HTTP 400" in v.failure and "bad field" in v.failure
    assert judge.stats.retries == 0 and judge.stats.failures == 1


def test_a_200_without_json_is_retried_and_then_an_explicit_failure():
    """A proxy's HTML page must become a failed verdict, not an exception that sinks the batch."""
    judge = _judge(lambda request: httpx.Response(200, text="<html>gateway</html>"), max_retries=2)
    out = judge.grade_sync(_items(2))
    assert all(v.met is None and "without a JSON body" in v.failure for v in out)
    assert judge.stats.retries == 4 and judge.stats.failures == 2


def test_grade_sync_twice_gets_a_client_and_a_semaphore_for_each_event_loop():
    """Each asyncio.run has its own loop; a semaphore that had to wait in the first one is bound
    to it and would raise in the second (with a real socket, the pooled connection does)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.001)
        return httpx.Response(200, json=_choice_answer())

    judge = _judge(handler, concurrency=1)
    first = judge.grade_sync(_items(3))
    second = judge.grade_sync(_items(3))
    assert all(v.ok for v in first + second) and judge.stats.requests == 6


def test_served_model_is_found_past_a_dead_first_endpoint():
    import json
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from reward.judge import make_judge

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "served-judge"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    try:
        live = f"http://127.0.0.1:{server.server_address[1]}"
        judge = make_judge(judge_url=f"{dead},{live}", tokenizer=_WordTokenizer(), cache=False)
        assert judge.model == "served-judge"
        from reward.serving import first_served_model

        assert first_served_model(live) == "served-judge"  # one URL as a string (eval's call)
        assert first_served_model(f"{live}/v1/,") == "served-judge"  # /v1, a trailing slash and comma
        # nothing listens there: said as such, not as advice to name the served model
        with pytest.raises(ValueError, match="no server answers at .*ConnectError.*is it running"):
            make_judge(judge_url=dead, tokenizer=_WordTokenizer(), cache=False)
    finally:
        server.shutdown()
