"""Logprobs that are no probabilities are failures, never verdicts (issue 39, "clamp", "NaN", "inf").

vLLM writes -inf (a token its choice grammar masked) as -9999.0; ``parsing.py`` read it as a real
logprob, so a judge tokenizer whose answer ids the server's grammar masked gave p_yes 0.5, "met",
cached, on every item. The chat backend read a NaN logprob as a certain "yes" (cached) and +inf
aborted the run. Each is now a bad reply with a reason: retried, then unscored, and nothing of it
is cached. Against a vLLM-shaped stub of ours (``rt_vllm_stub``), through the real HTTP transport;
the clamp as the real vLLM server sends it is in test_served_identity_server.py.
"""

from __future__ import annotations

import math

import pytest
from rt_vllm_stub import HashTokenizer, VLLMStub

from reward.judge import JudgeConfig, JudgeItem, Message, VerdictCache
from reward.judge.chat import ChatJudge
from reward.judge.chat_choice import choice_verdict
from reward.judge.http import HTTPJudge
from reward.judge.parsing import unusable_logprob
from reward.judge.replies import BadReply

CONV = (Message(role="user", content="My father is confused and feverish."),)
ITEMS = [JudgeItem(conversation=CONV, response=f"Take him to urgent care now ({k}).", criterion=f"criterion {k}")
         for k in range(12)]
BAD = {"clamp": (-9999.0, math.log(0.5)), "nan-yes": (math.nan, math.log(0.3)), "nan-no": (math.log(0.9), math.nan),
       "+inf": (math.inf, -1.0), "-inf": (-1.0, -math.inf)}


def test_the_values_that_are_no_probabilities():
    assert unusable_logprob(-9999.0) and unusable_logprob(-10000.0) and unusable_logprob(float("nan"))
    assert unusable_logprob(float("inf")) and unusable_logprob(float("-inf"))
    assert unusable_logprob(-60.0) is None and unusable_logprob(0.0) is None


@pytest.mark.parametrize("fault", list(BAD))
def test_completions_backend_unscored_retried_and_nothing_cached(tmp_path, fault):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=None) as srv:
        srv.answer_override = BAD[fault]
        judge = HTTPJudge(srv.url, "judge", tokenizer=HashTokenizer(), cache=cache, revision="r1", max_retries=2,
                          backoff_s=0.001)
        out = judge.grade_sync(ITEMS)
        assert all(v.met is None and v.p_yes is None for v in out)
        assert all("non-finite or clamped" in v.failure for v in out), out[0].failure
        assert srv.hits["/v1/completions"] == len(ITEMS) * 3  # every item asked three times
        assert len(cache) == 0  # nothing of a bad reply is stored
        srv.answer_override = None  # the judge recovers: fresh verdicts, none served from a bad reply
        again = judge.grade_sync(ITEMS)
    assert all(v.ok and not v.cached for v in again)
    assert [v.p_yes for v in again] == pytest.approx([srv.p_yes(k) for k in _keys(judge)], abs=1e-9)
    assert len(cache) == len(ITEMS)


def _keys(judge) -> list[str]:
    import json

    return [json.dumps(judge.renderer.render_ids(judge.template, it)) for it in ITEMS]


@pytest.mark.parametrize("fault", list(BAD))
def test_chat_backend_unscored_retried_and_nothing_cached(tmp_path, fault):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=None) as srv:
        srv.answer_override = BAD[fault]
        judge = ChatJudge(srv.url, "judge", config=JudgeConfig(mode="choice"), cache=cache, max_retries=1,
                          backoff_s=0.001)
        out = judge.grade_sync(ITEMS)  # +inf used to raise OverflowError out of the run
        assert all(v.met is None and v.failure for v in out), [v.failure for v in out][:2]
        assert srv.hits["/v1/chat/completions"] == len(ITEMS) * 2
        assert len(cache) == 0
        srv.answer_override = None
        again = judge.grade_sync(ITEMS)
    assert all(v.ok and not v.cached and 0.0 < v.p_yes < 1.0 for v in again)


def _reply(top: list[dict]) -> dict:
    return {"choices": [{"message": {"content": "yes"},
                         "logprobs": {"content": [{"token": "yes", "logprob": -0.1, "top_logprobs": top}]}}]}


def test_a_nan_no_is_not_a_certain_yes():
    top = [{"token": "yes", "logprob": math.log(0.6)}, {"token": "no", "logprob": math.nan},
           *({"token": f"w{i}", "logprob": -5.0 - i} for i in range(18))]
    with pytest.raises(BadReply, match="NaN|nan"):
        choice_verdict(_reply(top), requested=20)


def test_masked_entries_bound_nothing_and_a_masked_answer_is_a_bad_reply():
    # vLLM's constrained top list: the allowed answers, then masked tokens at -9999.0. A masked
    # entry used to stand in as the bound of a missing word (probability 0): a certain "yes".
    top = [{"token": "yes", "logprob": math.log(0.7)}, *({"token": f"w{i}", "logprob": -9999.0} for i in range(19))]
    v = choice_verdict(_reply(top), requested=20, prefixes=True)
    assert v.failure and v.p_yes is None  # only 'yes' has a probability: nothing bounds 'no'
    both_masked = [{"token": "yes", "logprob": -9999.0}, {"token": "no", "logprob": -9999.0},
                   *({"token": f"w{i}", "logprob": -9999.0} for i in range(18))]
    with pytest.raises(BadReply, match="masked"):
        choice_verdict(_reply(both_masked), requested=20, prefixes=True)
    ok = [{"token": "yes", "logprob": math.log(0.7)}, {"token": "no", "logprob": math.log(0.3)},
          *({"token": f"w{i}", "logprob": -9999.0} for i in range(18))]
    assert choice_verdict(_reply(ok), requested=20, prefixes=True).p_yes == pytest.approx(0.7, abs=1e-12)
