"""One bad reply costs one item, never the run (issue 48, part 5): a positive logprob (a
probability above 1) or a non-numeric field in any served backend's reply is a bad reply, retried
and then a failed item; it is never read as a verdict nor cached. Before: a +800 logprob on the
chat backend overflowed ``exp`` and a non-numeric usage count raised ``ValueError`` out of the
judge ("internal error", nothing written); a positive logprob on the completions backend was read
as a certain verdict and cached."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from rt_fakes import _WordTokenizer

from reward.judge import JudgeConfig, JudgeItem, Message
from reward.judge.cache import VerdictCache
from reward.judge.chat import ChatJudge
from reward.judge.http import HTTPJudge
from reward.judge.parsing import unusable_logprob

CONV = (Message(role="user", content="My chest hurts when I breathe in."),)


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response="See a doctor today.", criterion=f"criterion {k}") for k in range(n)]


def _raw(payload) -> httpx.Response:
    return httpx.Response(200, content=json.dumps(payload).encode(), headers={"content-type": "application/json"})


def _completion(lp_yes: float, lp_no: float, usage=None) -> dict:
    return {"choices": [{"text": "yes", "logprobs": {"top_logprobs": [{"token_id:1": lp_yes, "token_id:2": lp_no}]}}],
            "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 1}}


def _chat(lp_yes: float, lp_no: float, usage=None) -> dict:
    top = [{"token": "yes", "logprob": lp_yes}, {"token": "no", "logprob": lp_no}]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"},
                         "logprobs": {"content": [{"token": "yes", "logprob": lp_yes, "top_logprobs": top}]}}],
            "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 1}}


def _http_judge(handler, **kw) -> HTTPJudge:
    return HTTPJudge(["http://a:1"], "m", tokenizer=_WordTokenizer(), transport=httpx.MockTransport(handler),
                     backoff_s=0.001, **kw)


def _chat_judge(handler, **kw) -> ChatJudge:
    return ChatJudge("http://a:1", "m", config=JudgeConfig(mode="choice"), transport=httpx.MockTransport(handler),
                     backoff_s=0.001, **kw)


def _is_sick(request, sick: dict) -> bool:
    body = json.loads(request.content)
    if "messages" in body:  # chat: the criterion is in the text
        return "criterion 1" in json.dumps(body["messages"])
    return body["prompt"] == sick["ids"]  # completions: token ids rendered on our side


@pytest.mark.parametrize("make, reply", [(_http_judge, _completion), (_chat_judge, _chat)], ids=["completions", "chat"])
@pytest.mark.parametrize("bad", [(800.0, -1.0), (-1.0, 0.5)], ids=["plus800", "plus0.5"])
def test_a_positive_logprob_costs_one_item_and_is_never_cached(tmp_path, make, reply, bad):
    """Four items; every reply to the second item carries a positive logprob: that item fails
    (after its retries), the other three are graded and cached, nothing crashes."""
    sick: dict = {"ids": None}

    def handler(request):
        return _raw(reply(*bad) if _is_sick(request, sick) else reply(math.log(0.7), math.log(0.3)))

    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = make(handler, cache=cache, max_retries=2, revision="vouched")  # a transport of ours: a revision caches
    items = _items(4)
    if isinstance(judge, HTTPJudge):
        sick["ids"] = judge.renderer.render_ids(judge.template, items[1])
    out = judge.grade_sync(items)
    assert [v.ok for v in out] == [True, False, True, True], [v.failure for v in out]
    assert all(v.p_yes == pytest.approx(0.7, abs=1e-9) for v in out if v.ok)
    assert "positive logprob" in out[1].failure or "no probability" in out[1].failure, out[1].failure
    assert judge.stats.retries >= 2
    assert len(cache) == 3


@pytest.mark.parametrize("usage", [{"prompt_tokens": "many", "completion_tokens": None},
                                   {"prompt_tokens": [1], "prompt_tokens_details": {"cached_tokens": "x"}},
                                   "garbage"])
def test_a_non_numeric_usage_count_on_the_chat_backend_is_counted_zero_not_a_crash(usage):
    judge = _chat_judge(lambda r: _raw(_chat(math.log(0.6), math.log(0.4), usage=usage)))
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.p_yes == pytest.approx(0.6, abs=1e-9)
    assert judge.stats.prompt_tokens == 0


def test_an_unreadable_field_deep_in_a_reply_is_a_bad_reply_then_one_failed_item():
    """A reply whose logprob entries are of the wrong shape (an object where a number goes)."""
    def handler(request):
        return _raw({"choices": [{"message": {"content": "yes"}, "logprobs": {
            "content": [{"token": "yes", "top_logprobs": [{"token": "yes", "logprob": {"v": 1}}]}]}}]})

    judge = _chat_judge(handler, max_retries=1)
    [v] = judge.grade_sync(_items(1))
    assert not v.ok and v.failure


@pytest.mark.parametrize("lp, bad", [(0.0, False), (-1e-9, False), (5e-5, False), (0.01, True), (800.0, True),
                                     (-9999.0, True), (math.nan, True), (-3.2, False)])
def test_which_logprobs_are_probabilities(lp, bad):
    assert (unusable_logprob(lp) is not None) is bad


@pytest.mark.parametrize("garbled", [{"error": {"message": "upstream timed out"}}, {"choices": []},
                                     {"choices": [{"message": {"content": {"text": "yes"}}}]}],
                         ids=["error-page", "no-choices", "content-not-text"])
def test_a_chat_explain_reply_without_a_message_is_retried_by_the_transport(garbled):
    """A 200 whose body has no message (a gateway's error page, a cut body): retried as a bad reply
    at the transport, so the next answer grades the item. Before, it was read as an empty answer and
    spent an explain attempt at a raised temperature (a sampled verdict where a greedy one was asked)."""
    sent: list[dict] = []

    def handler(request):
        sent.append(json.loads(request.content))
        if len(sent) == 1:
            return _raw(garbled)
        return _raw({"choices": [{"message": {"content": '{"explanation":"advises a doctor","criteria_met":true}'}}]})

    judge = ChatJudge("http://a:1", "m", config=JudgeConfig(mode="explain"), transport=httpx.MockTransport(handler),
                      backoff_s=0.001, max_retries=2)
    [v] = judge.grade_sync(_items(1))
    assert v.ok and v.met is True, v.failure
    assert judge.stats.retries == 1 and len(sent) == 2
    assert sent[1].get("temperature") == sent[0].get("temperature") and "seed" not in sent[1]
