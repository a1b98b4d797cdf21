"""The in-process judge refuses prompts longer than its context, as the server does (issue 26, N5).

A 16,170-token completion was graded by a judge with 8,192 positions with no failure, and a 10 MB
field was killed by the OS (rc 137, no message), while the served judge refuses such prompts with
HTTP 400: the backends disagreed. Both now fail the item with the server's rule (prompt tokens +
answer tokens > context) and words, the in-process one before any tensor is made.
"""

from __future__ import annotations

import pytest

from reward.judge import JudgeItem, Message
from reward.judge.limits import CONTEXT_EXCEEDED, answer_budget, context_failure, min_tokens

pytestmark = pytest.mark.slow
CONV = (Message(role="user", content="I have chest pain."),)


def _item(response: str, k: int = 0) -> JudgeItem:
    return JudgeItem(conversation=CONV, response=response, criterion=f"Advises calling emergency services {k}.")


def test_the_rule_is_the_servers_room_for_one_answer_token():
    """vLLM 0.32 answers a prompt of max_model_len - 1 tokens (max_tokens shortened to what is
    left) and refuses max_model_len tokens or more with HTTP 400 (measured on the test server)."""
    assert context_failure(4095, 4096) is None
    reason = context_failure(4097, 4096)
    assert reason.startswith(CONTEXT_EXCEEDED) and "maximum context length is 4096 tokens" in reason
    assert "your prompt contains 4097 input tokens, which exceeds this limit even without any output" in reason
    assert context_failure(4096, 4096) and context_failure(10**9, None) is None  # no known context
    assert answer_budget(512, 4000, 4096) == 96 and answer_budget(512, 10, 4096) == 512
    assert min_tokens(10_000_000, 50) == 100_000 and min_tokens(10, 0) == 0


@pytest.fixture(scope="module")
def judge(tiny_model_dir):
    from reward.judge.inprocess import TransformersJudge

    return TransformersJudge(str(tiny_model_dir), device="cpu")


def test_a_prompt_longer_than_the_positions_fails_by_name_and_short_ones_are_graded(judge):
    assert judge.max_model_len == 8192  # the tiny model's max_position_embeddings
    long = " ".join(f"word{k}" for k in range(9000))
    out = judge.grade_sync([_item("Call 911 now."), _item(long), _item("Call 911 now.", 1)])
    assert out[0].ok and out[2].ok
    assert out[1].met is None and out[1].failure.startswith(CONTEXT_EXCEEDED)
    assert "maximum context length is 8192 tokens" in out[1].failure and judge.stats.failures == 1


def test_the_boundary_is_the_servers(judge, tiny_model_dir):
    from reward.judge.inprocess import TransformersJudge

    item = _item("Call 911 now.")
    n = len(judge.renderer.render_ids(judge.template, item))
    fits = TransformersJudge(str(tiny_model_dir), device="cpu", max_model_len=n + 1)  # room for 1 answer token
    assert fits.grade_sync([item])[0].ok
    too_small = TransformersJudge(str(tiny_model_dir), device="cpu", max_model_len=n)
    [v] = too_small.grade_sync([item])
    assert v.failure and f"your prompt contains {n} input tokens" in v.failure


def test_a_ten_megabyte_field_is_refused_before_it_is_tokenised(judge, monkeypatch):
    rendered = []
    real = judge.renderer.render_ids
    monkeypatch.setattr(judge.renderer, "render_ids", lambda t, it: rendered.append(len(it.response)) or real(t, it))
    huge = "x" * 10_000_000
    [v] = judge.grade_sync([_item(huge)])
    assert v.failure.startswith(CONTEXT_EXCEEDED) and "at least" in v.failure
    assert rendered == []  # never tokenised


def test_json_generation_refuses_the_same_prompts(judge):
    import asyncio

    long = " ".join(f"word{k}" for k in range(9000))
    out = asyncio.run(judge.generate_json(judge.template, [_item(long), _item("x" * 10_000_000)],
                                          schema={"type": "object"}, max_tokens=16, attempts=1))
    assert all(r.failure and r.failure.startswith(CONTEXT_EXCEEDED) for r in out)


def test_both_backends_refuse_the_same_prompt_with_the_same_words(judge_url, tiny_model_dir):
    """The real server (max_model_len reported in /v1/models) and the in-process judge given the
    same context fail the same over-long item, with the same rule."""
    from reward.judge import make_judge
    from reward.judge.inprocess import TransformersJudge
    from reward.serving import list_models

    served = make_judge(judge_url=judge_url, judge_api="completions", cache=False, max_retries=0)
    ctx = next(m for m in list_models(judge_url) if m["id"] == served.model)["max_model_len"]
    local = TransformersJudge(str(tiny_model_dir), device="cpu", max_model_len=ctx)
    item = _item(" ".join(f"word{k}" for k in range(ctx)))
    n = len(local.renderer.render_ids(local.template, item))
    assert n == len(served.renderer.render_ids(served.template, item)) and n + 1 > ctx
    [a] = served.grade_sync([item])
    [b] = local.grade_sync([item])
    assert a.failure and "HTTP 400" in a.failure and f"maximum context length is {ctx} tokens" in a.failure
    assert b.failure and f"maximum context length is {ctx} tokens" in b.failure
    assert f"{n} input tokens" in a.failure and f"{n} input tokens" in b.failure
