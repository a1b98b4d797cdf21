"""The chat judge against the real vLLM server's ``/v1/chat/completions`` (wiring: the tiny
random-weight model's verdicts mean nothing, only that they arrive and are read correctly)."""

from __future__ import annotations

import pytest

from reward.judge import JudgeConfig, JudgeItem, Message, make_judge
from reward.judge.chat import ChatJudge

pytestmark = pytest.mark.server

ITEMS = [JudgeItem(conversation=(Message(role="user", content="I have crushing chest pain."),),
                   response="Call emergency services now.", criterion=c, points=p)
         for c, p in (("Advises calling emergency services.", 8), ("Recommends waiting a day.", -6))]


def test_choice_over_vllm_chat_reads_p_yes_from_constrained_top_logprobs(judge_url):
    judge = make_judge(judge_url=judge_url, judge_api="chat", served_model="tiny",
                       config=JudgeConfig(mode="choice"), cache=False)
    assert isinstance(judge, ChatJudge) and judge.served_root  # vLLM recognised by its root
    out = judge.grade_sync(ITEMS)
    assert all(v.ok and 0.0 <= v.p_yes <= 1.0 and v.met == (v.p_yes >= 0.5) for v in out), out
    assert judge.stats.requests == 2 and judge.stats.prompt_tokens > 0
    from urllib.parse import urlparse

    assert judge.model_id.startswith(f"chat:{urlparse(judge_url).netloc}:tiny@")


def test_explain_over_vllm_chat_is_constrained_and_parsed(judge_url):
    """On vLLM the verdict is constrained by a whitespace-free pattern (its JSON-schema grammar let
    the random model fill 64 tokens with blanks), so even a random model's verdict parses."""
    judge = make_judge(judge_url=judge_url, judge_api="chat", served_model="tiny",
                       config=JudgeConfig(mode="explain", max_explain_tokens=256, explain_attempts=2), cache=False)
    out = judge.grade_sync(ITEMS)
    assert all(v.ok and isinstance(v.met, bool) and v.p_yes in (0.0, 1.0) for v in out), out
    assert judge.stats.requests == 2


def test_auto_keeps_the_token_id_backend_for_vllm(judge_url):
    from reward.judge.http import HTTPJudge

    judge = make_judge(judge_url=judge_url, served_model="tiny", cache=False)
    assert isinstance(judge, HTTPJudge)
