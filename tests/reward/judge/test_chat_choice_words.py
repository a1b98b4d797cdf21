"""Chat choice verdicts read from one word (review of issue 26): a listed token with punctuation
("No.", "Yes,") counts for its word, a single listed answer word is never a certain verdict, and
only a reply without any logprobs is read from its text ("Yes, but..." is yes, "No." is no) as
p_yes 1/0, saying so. Checked on the reply reader and through the chat judge over HTTP."""

from __future__ import annotations

import math

import httpx
import pytest

from reward.judge import JudgeConfig, JudgeItem, Message
from reward.judge.chat import TOP_LOGPROBS, ChatJudge
from reward.judge.chat_choice import answer_word, choice_verdict


def reply(content: str, top: list[tuple[str, float]] | None) -> dict:
    choice: dict = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    if top is not None:
        entries = [{"token": t, "logprob": math.log(p)} for t, p in top]
        choice["logprobs"] = {"content": [{"token": entries[0]["token"], "logprob": entries[0]["logprob"],
                                           "top_logprobs": entries}]}
    return {"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}


def filler(n: int, p: float) -> list[tuple[str, float]]:
    return [(f"tok{k}", p) for k in range(n)]


def test_answer_words_with_punctuation_and_free_text():
    assert answer_word("No.") == "no" and answer_word(" Yes,") == "yes" and answer_word("**Yes**") == "yes"
    assert answer_word("Yes, but only partly.") == "yes" and answer_word("no") == "no"
    assert answer_word("Yesterday") is None and answer_word("Not really") is None and answer_word("I think yes") is None
    assert answer_word("y", prefixes=True) == "yes" and answer_word("y") is None


def test_punctuated_tokens_count_for_their_word():
    v = choice_verdict(reply("No.", [("No.", 0.6), ("Yes,", 0.2), ("yes", 0.1), ("The", 0.1)]), requested=4)
    assert v.ok and v.p_yes == pytest.approx(0.3 / 0.9) and v.met is False and v.explanation is None


def test_one_listed_word_in_a_full_list_is_bounded_never_certain():
    top = [("Yes", 0.97), *filler(TOP_LOGPROBS - 1, 0.001)]
    v = choice_verdict(reply("Yes", top), requested=TOP_LOGPROBS)
    assert v.ok and v.met is True and 0.5 < v.p_yes < 1.0
    assert v.p_yes == pytest.approx(0.97 / (0.97 + 0.001))
    assert "'no' is not among" in v.explanation and "bound" in v.explanation
    top = [("No", 0.9), *filler(TOP_LOGPROBS - 1, 0.002)]
    v = choice_verdict(reply("No", top), requested=TOP_LOGPROBS)
    assert v.ok and v.met is False and 0.0 < v.p_yes == pytest.approx(0.002 / 0.902)


@pytest.mark.parametrize("top", [[("Yes", 0.99)], [("No", 0.8), ("The", 0.1)]])
def test_one_listed_word_in_a_short_list_fails_with_its_reason(top):
    v = choice_verdict(reply(top[0][0], top), requested=TOP_LOGPROBS)
    assert v.met is None and v.p_yes is None and "nothing bounds" in v.failure


@pytest.mark.parametrize(("text", "met"), [("Yes, but only for adults.", True), ("No.", False), ("yes", True),
                                           (" NO", False)])
def test_without_logprobs_the_text_decides_at_one_or_zero_and_says_so(text, met):
    v = choice_verdict(reply(text, None), requested=TOP_LOGPROBS)
    assert v.ok and v.met is met and v.p_yes == (1.0 if met else 0.0)
    assert "no logprobs" in v.explanation and "not a probability" in v.explanation


@pytest.mark.parametrize("text", ["Maybe.", "", "Not met"])
def test_without_logprobs_other_text_fails(text):
    v = choice_verdict(reply(text, None), requested=TOP_LOGPROBS)
    assert v.met is None and "not yes/no" in v.failure


def test_through_the_chat_judge_over_http():
    """The chat judge reads each reply kind the same way when it arrives over HTTP."""
    replies = {
        "c0": reply("Yes, but only partly", None),
        "c1": reply("No.", [("No.", 0.7), ("Yes", 0.3)]),
        "c2": reply("Yes", [("Yes", 0.999)]),
        "c3": reply("No", [("No", 0.9), *filler(TOP_LOGPROBS - 1, 0.004)]),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        key = next(k for k in replies if f"criterion {k}" in body["messages"][-1]["content"])
        return httpx.Response(200, json=replies[key])

    conv = (Message(role="user", content="My child has a fever of 39 C."),)
    items = [JudgeItem(conversation=conv, response="Give fluids and watch her.", criterion=f"criterion {k}")
             for k in replies]
    judge = ChatJudge("http://judge.test/v1", "m", config=JudgeConfig(mode="choice"), cache=None,
                      transport=httpx.MockTransport(handler), backoff_s=0.001)
    out = judge.grade_sync(items)
    assert out[0].met is True and out[0].p_yes == 1.0 and "not a probability" in out[0].explanation
    assert out[1].met is False and out[1].p_yes == pytest.approx(0.3)
    assert out[2].met is None and "nothing bounds" in out[2].failure
    assert out[3].met is False and 0.0 < out[3].p_yes < 0.01
