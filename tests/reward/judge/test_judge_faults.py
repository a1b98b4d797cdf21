"""Judge faults that used to give silent wrong verdicts, crashes or hangs (issue 10, defects 1, 3,
9, 10, 11). An httpx MockTransport plays the misbehaving endpoints; the real server goes through a
fault-injecting proxy in tests/cli/test_fault_proxy_server.py."""

from __future__ import annotations

import asyncio
import json
import math
import time

import httpx
import pytest
from pydantic import ValidationError
from rt_fakes import _WordTokenizer

from reward.judge import JudgeConfig, JudgeItem, Message, Verdict
from reward.judge.cache import VerdictCache
from reward.judge.http import HTTPJudge
from reward.judge.inprocess import _choice_verdict
from reward.judge.parsing import EXPLAIN_REGEX

CONV = (Message(role="user", content="I have chest pain."),)


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response="Call emergency services.", criterion=f"criterion {k}")
            for k in range(n)]


def _choice(lp_yes: float, lp_no: float) -> dict:
    return {"choices": [{"text": "yes", "logprobs": {"top_logprobs": [{"token_id:1": lp_yes, "token_id:2": lp_no}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


GOOD = _choice(math.log(0.8), math.log(0.2))


def _raw(payload) -> httpx.Response:  # json.dumps writes NaN/Infinity as a sloppy server would
    return httpx.Response(200, content=json.dumps(payload).encode(), headers={"content-type": "application/json"})


def _judge(handler, urls=("http://a:1",), **kw) -> HTTPJudge:
    kw.setdefault("backoff_s", 0.001)
    return HTTPJudge(list(urls), "m", tokenizer=_WordTokenizer(), transport=httpx.MockTransport(handler), **kw)


# ---------------------------------------------------------------- 1: non-finite logprobs
@pytest.mark.parametrize("bad", [(math.nan, -1.0), (-1.0, math.nan), (math.inf, -1.0)])
def test_non_finite_logprobs_fail_and_are_never_cached(tmp_path, bad):
    """NaN/inf logprobs gave met=False, cached and served after the judge recovered."""
    state = {"sick": True}

    def handler(request):
        return _raw(_choice(*bad)) if state["sick"] else _raw(GOOD)

    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = _judge(handler, cache=cache, max_retries=1, revision="vouched")  # a transport of ours caches only under a revision
    assert judge.cache is not None  # else 'never cached' could not fail
    [v] = judge.grade_sync(_items(1))
    assert v.met is None and v.failure and "non-finite" in v.failure
    state["sick"] = False
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.met is True and not v.cached


def test_in_process_nan_is_a_failure_and_a_nan_verdict_cannot_exist():
    assert _choice_verdict(float("nan")).failure and _choice_verdict(float("nan")).met is None
    assert _choice_verdict(0.7).met is True
    with pytest.raises(ValidationError):
        Verdict(met=False, p_yes=float("nan"))


# ---------------------------------------------------------------- 9: malformed 200s
@pytest.mark.parametrize("body", [b"null", b"[]", b"{}", b'{"choices": []}', b'{"choices": [{"text": "yes"}]}',
                                  b"not json", b'{"choices": [{"logprobs": {"top_logprobs": [[1]]}}]}'])
def test_malformed_choice_reply_is_retried_and_succeeds(body):
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(200, content=body, headers={"content-type": "application/json"})
        return _raw(GOOD)

    judge = _judge(handler)
    [v] = judge.grade_sync(_items(1))
    # fixed logprobs log(0.8), log(0.2): no model value enters, only an exp/log round trip (abs 1e-12)
    assert v.ok and v.p_yes == pytest.approx(0.8, abs=1e-12), v.failure
    assert judge.stats.retries == 1


def test_non_numeric_usage_does_not_crash():
    judge = _judge(lambda r: _raw({**GOOD, "usage": {"prompt_tokens": "many", "completion_tokens": None,
                                                     "prompt_tokens_details": []}}))
    [v] = judge.grade_sync(_items(1))
    assert v.ok and judge.stats.prompt_tokens == 0


def test_bad_gzip_and_decoding_errors_are_retried_not_raised():
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(200, content=b"\x00garbage", headers={"content-encoding": "gzip"})
        if calls["n"] == 2:
            raise httpx.DecodingError("bad stream", request=request)
        return _raw(GOOD)

    [v] = _judge(handler).grade_sync(_items(1))
    assert v.ok, v.failure


def test_bad_replica_is_set_aside_and_work_fails_over():
    """One endpoint answers 200 without logprobs: before, 62% of items failed with no retry and
    the balancer kept favouring the (fast) bad replica."""
    hits = {"bad": 0, "good": 0}

    def handler(request):
        hits[request.url.host] += 1
        return _raw({"choices": [{"text": "yes"}]}) if request.url.host == "bad" else _raw(GOOD)

    judge = _judge(handler, urls=("http://bad:1", "http://good:1"), concurrency=1)
    out = judge.grade_sync(_items(20))
    assert all(v.ok for v in out)
    assert hits["bad"] <= 2 and "http://bad:1/v1" not in judge.stats.by_endpoint, hits


# ---------------------------------------------------------------- 10: timeouts and deadline
def test_timeouts_set_an_endpoint_aside():
    hits = {"hung": 0, "ok": 0}

    async def handler(request):
        hits[request.url.host] += 1
        if request.url.host == "hung":
            await asyncio.sleep(5)
        return _raw(GOOD)

    judge = _judge(handler, urls=("http://hung:1", "http://ok:1"), concurrency=1, timeout_s=0.2)
    t0 = time.monotonic()
    out = judge.grade_sync(_items(8))
    assert all(v.ok for v in out) and hits["hung"] <= 1, hits
    assert time.monotonic() - t0 < 30  # a hang bound (the hung endpoint sleeps 5 s per request)


def test_deadline_bounds_a_whole_grading_call():
    async def handler(request):
        await asyncio.sleep(5)
        return _raw(GOOD)

    judge = _judge(handler, timeout_s=1.0, max_retries=200, deadline_s=1.0)
    t0 = time.monotonic()
    out = judge.grade_sync(_items(3))
    assert time.monotonic() - t0 < 60  # bounds the hang only: without the deadline 201 attempts x 1 s
    assert all(v.met is None for v in out) and any("deadline" in v.failure for v in out), out


# ---------------------------------------------------------------- 3: explain / generate_json
def test_explain_protocol_fault_is_retried_at_the_original_settings():
    """A malformed 200 used up a parse attempt and the retry sampled at temperature 0.7."""
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            return httpx.Response(200, json={"choices": [{"finish_reason": "stop"}]})
        return httpx.Response(200, json={"choices": [{"text": '{"explanation": "ok", "criteria_met": true}'}]})

    judge = _judge(handler, config=JudgeConfig(mode="explain"))
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.met is True
    assert [b["temperature"] for b in bodies] == [0.0, 0.0] and all("seed" not in b for b in bodies)


def test_generate_json_protocol_fault_is_retried_at_the_original_settings():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            return httpx.Response(200, json={"choices": [{"finish_reason": "stop"}]})
        return httpx.Response(200, json={"choices": [{"text": '{"errors": []}'}]})

    judge = _judge(handler)
    [r] = asyncio.run(judge.generate_json(judge.template, _items(1), schema={"required": ["errors"]}))
    assert r.ok and r.value == {"errors": []}
    assert [b["temperature"] for b in bodies] == [0.0, 0.0] and all("seed" not in b for b in bodies)


def test_a_real_unparseable_answer_is_still_resampled():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        text = "I think so" if len(bodies) == 1 else '{"explanation": "x", "criteria_met": false}'
        return httpx.Response(200, json={"choices": [{"text": text}]})

    [v] = _judge(handler, config=JudgeConfig(mode="explain")).grade_sync(_items(1))
    assert v.ok and v.met is False and bodies[1]["temperature"] == 0.7


@pytest.mark.parametrize(("config", "constraint", "suffix"), [
    (JudgeConfig(mode="explain"), {"regex": EXPLAIN_REGEX}, True),
    (JudgeConfig(mode="explain", constrained=False), None, False),
    (JudgeConfig(mode="choice"), {"choice": ["yes", "no"]}, False),
])
def test_explain_verdicts_are_constrained_by_the_pattern_and_keyed_apart(config, constraint, suffix):
    """The completions backend constrains an explain verdict with the whitespace-free pattern (the
    JSON schema it sent before let a weak judge spend its budget on blanks), and only those verdicts
    carry the "+re" key suffix: the schema's verdicts of earlier versions are not served to them."""
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        if config.mode == "choice":
            return _raw(GOOD)
        return httpx.Response(200, json={"choices": [{"text": '{"explanation": "ok", "criteria_met": true}'}]})

    judge = _judge(handler, config=config)
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.met is True
    assert bodies[0].get("structured_outputs") == constraint
    assert judge.model_id.endswith("+re") is suffix
    unsuffixed = _judge(handler, config=JudgeConfig(mode="explain", constrained=False)).model_id
    assert judge.model_id.removesuffix("+re").removesuffix("+free") == unsuffixed.removesuffix("+free")


def test_the_pattern_admits_the_verdict_and_no_padding():
    """A verdict the pattern lets through parses (a control character other than a line break
    would not: it is retried as unparseable); the blanks a JSON-schema grammar admits, a line break
    and a 401-character explanation do not match."""
    import re

    from reward.judge.parsing import explain_parser

    ok = '{"explanation": "The reply names the emergency number.", "criteria_met": false}'
    assert re.fullmatch(EXPLAIN_REGEX, ok) and explain_parser("robust")(ok) == (False, "The reply names the emergency number.")
    assert not re.fullmatch(EXPLAIN_REGEX, '{ "explanation": "x", "criteria_met": true}')
    assert not re.fullmatch(EXPLAIN_REGEX, '{"explanation": "x",\n"criteria_met": true}')
    assert not re.fullmatch(EXPLAIN_REGEX, '{"explanation": "' + "x" * 401 + '", "criteria_met": true}')
