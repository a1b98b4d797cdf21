"""A choice verdict needs both answer ids in the logprobs (issue 26, N4).

A reply whose logprobs carried only one of the two requested answer ids was read as p_yes 0.0
(or 1.0), cached and scored: a gateway that ignores ``logprob_token_ids`` and the choice
constraint silently turned every verdict into "not met". Such a reply is now a malformed reply:
retried like one, and a failure with its reason (never cached) when it does not get better.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import httpx
import pytest
from rt_fakes import _WordTokenizer
from rt_net import free_port
from rt_paths import REPO_ROOT
from rt_rewrite_proxy import RewriteProxy

from reward.errors import JudgeUnavailableError
from reward.judge import JudgeItem, Message, make_judge
from reward.judge.cache import VerdictCache
from reward.judge.http import HTTPJudge
from reward.judge.replies import BadReply, choice_p_yes

CONV = (Message(role="user", content="I have chest pain."),)
ITEMS = [JudgeItem(conversation=CONV, response="Call emergency services.", criterion=f"criterion {k}")
         for k in range(3)]


def _reply(top: dict) -> dict:  # _WordTokenizer: "yes" is id 1, "no" is id 2
    return {"choices": [{"text": "no", "logprobs": {"top_logprobs": [top]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


BOTH = _reply({"token_id:1": math.log(0.7), "token_id:2": math.log(0.3)})
ONLY_NO = _reply({"token_id:2": -0.01})
ONLY_YES = _reply({"token_id:1": -0.01})


@pytest.mark.parametrize("one", [ONLY_NO, ONLY_YES])
def test_one_answer_id_is_a_bad_reply_not_a_certain_verdict(one):
    with pytest.raises(BadReply, match="only one of the two answer tokens"):
        choice_p_yes(one, 1, 2)
    # fixed logprobs, no model: exp(log 0.7) normalised over the two answers is 0.7 up to the
    # exp/log round trip (~1e-16); abs 1e-12 still tells any other share apart
    assert choice_p_yes(BOTH, 1, 2) == pytest.approx(0.7, abs=1e-12)


def _judge(handler, **kw) -> HTTPJudge:
    return HTTPJudge(["http://a:1"], "m", tokenizer=_WordTokenizer(), transport=httpx.MockTransport(handler),
                     backoff_s=0.001, **kw)


def test_one_answer_reply_is_retried_failed_with_its_reason_and_never_cached(tmp_path):
    state = {"gateway": True, "calls": 0}

    def handler(request):
        state["calls"] += 1
        return httpx.Response(200, json=ONLY_NO if state["gateway"] else BOTH)

    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = _judge(handler, cache=cache, max_retries=2, revision="vouched")  # a transport of ours caches only under a revision
    assert judge.cache is not None  # else 'never cached' could not fail
    out = judge.grade_sync(ITEMS)
    assert all(v.met is None and "only one of the two answer tokens" in v.failure for v in out)
    assert state["calls"] == 3 * len(ITEMS)  # retried like any malformed reply
    assert len(cache) == 0
    state["gateway"] = False
    out = judge.grade_sync(ITEMS)
    assert all(v.ok and v.met is True and not v.cached for v in out)


def test_one_answer_reply_then_a_good_one_gives_the_good_verdict():
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        return httpx.Response(200, json=ONLY_NO if calls["n"] == 1 else BOTH)

    [v] = _judge(handler, max_retries=1).grade_sync(ITEMS[:1])
    assert v.ok and v.p_yes == pytest.approx(0.7, abs=1e-12)  # the same fixed logprobs as above


@pytest.mark.server
def _keep_one_answer(data: dict) -> dict:
    """A reply as a gateway that ignores ``logprob_token_ids`` answers: one logprob per position."""
    for choice in data.get("choices") or []:
        lp = choice.get("logprobs") or {}
        lp["top_logprobs"] = [dict(list(top.items())[:1]) for top in lp.get("top_logprobs") or []]
    return data


def test_a_gateway_keeping_one_answer_fails_visibly_on_the_real_server(judge_url, tmp_path):
    """Every reply of the real vLLM judge passed through a proxy that keeps one logprob. The probe
    items that confirm who grades get such replies too: the run is refused at start-up, saying why
    (issue 48: the probe fails closed; before it, every item failed with the same reason). A
    gateway that starts keeping one logprob once the run is under way: every item fails, saying why."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "scripts" / "fault_proxy.py"), "--upstream",
                             judge_url.rstrip("/").removesuffix("/v1"), "--port", str(port), "--rate", "1.0",
                             "--faults", "oneanswer"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = VerdictCache(tmp_path / "v.sqlite")
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        with pytest.raises(JudgeUnavailableError, match="only one of the two answer tokens"):
            make_judge(judge_url=f"http://127.0.0.1:{port}", judge_api="completions", cache=cache, max_retries=1,
                       backoff_s=0.01)
    finally:
        proc.kill()
        proc.wait()
    assert len(cache) == 0
    state = {"gateway": False}
    with RewriteProxy(judge_url, lambda path, data: _keep_one_answer(data) if state["gateway"] and
                      path.endswith("/completions") and isinstance(data, dict) else None) as proxy:
        bad = make_judge(judge_url=proxy.url, judge_api="completions", cache=cache, max_retries=1, backoff_s=0.01)
        state["gateway"] = True
        out = bad.grade_sync(ITEMS[:2])
    assert all(v.met is None and "only one of the two answer tokens" in v.failure for v in out), out
    assert len(cache) == 0
    good = make_judge(judge_url=judge_url, judge_api="completions", cache=cache)
    assert good.model_id == bad.model_id  # the same judge: only the gateway differed
    assert all(v.ok for v in good.grade_sync(ITEMS[:2]))
