"""The chat-API judge against a real OpenAI-compatible HTTP server of ours on 127.0.0.1
(``tests/chat_server.py``): explain verdicts parsed from the reference JSON format, choice p_yes
from top logprobs, and failures (429 with Retry-After, 5xx, timeouts, malformed answers) retried
and never turned into "not met". The real vLLM chat endpoint is exercised in
tests/reward/judge/test_judge_chat_server.py."""

from __future__ import annotations

import time

import httpx
import pytest
from rt_chat_server import MODEL, ChatServer, default_decide, default_p

from reward.judge import JudgeConfig, JudgeItem, Message, VerdictCache, make_judge
from reward.judge.chat import ChatJudge, p_yes_from_top, template_messages
from reward.judge.templates import load_template
from reward.judge.transport import retry_after_seconds

CONV = (Message(role="system", content="You assist a school nurse."),
        Message(role="user", content="A pupil fainted in the gym and is awake now. What should I check?"))
RESPONSE = "Check breathing, pulse and blood sugar; call emergency services if she faints again."
CRITERIA = [("Asks whether the pupil hit her head.", 5), ("Recommends checking blood glucose.", 4),
            ("Advises giving food to an unconscious person.", -8), ("Mentions calling emergency services.", 6)]

OFFICIAL_STYLE = """Look at the conversation below: does its final assistant turn satisfy the rubric item?

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# What to return
A JSON object with a string "explanation" and a boolean "criteria_met", in a markdown json block and nothing else.
"""


def items() -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response=RESPONSE, criterion=c, points=p) for c, p in CRITERIA]


@pytest.fixture()
def official_style(tmp_path):
    path = tmp_path / "official_style.txt"
    path.write_text(OFFICIAL_STYLE)
    return path


def chat_judge(url: str, mode: str = "explain", template=None, **kw) -> ChatJudge:
    kw.setdefault("backoff_s", 0.05)
    kw.setdefault("cache", None)
    return ChatJudge(url, MODEL, config=JudgeConfig(mode=mode, template_file=str(template) if template else None), **kw)


def test_explain_verdicts_follow_the_servers_json_and_the_prompt_is_rendered_like_the_reference(official_style):
    with ChatServer() as srv:
        judge = chat_judge(srv.url, template=official_style)
        out = judge.grade_sync(items())
    keys = [f"[{p}] {c}" for c, p in CRITERIA]
    assert [v.met for v in out] == [default_decide(k) for k in keys]
    assert all(v.ok and v.mode == "explain" and v.explanation.startswith("graded") for v in out)
    body = srv.requests[0]
    assert body["model"] == MODEL and [m["role"] for m in body["messages"]] == ["user"]  # a file without system part
    prompt = body["messages"][0]["content"]
    convo = "\n\n".join(f"{m.role}: {m.content}" for m in CONV) + f"\n\nassistant: {RESPONSE}"
    assert f"# Conversation\n{convo}\n\n# Rubric item\n" in prompt  # system turn and response included
    assert body["response_format"]["type"] == "json_schema"
    assert judge.stats.requests == 4 and judge.stats.prompt_tokens > 0


def test_choice_mode_reads_p_yes_from_top_logprobs_summing_spellings():
    with ChatServer() as srv:
        judge = chat_judge(srv.url, mode="choice")
        out = judge.grade_sync(items())
    for v, (c, _) in zip(out, CRITERIA, strict=True):
        assert v.ok and v.p_yes == pytest.approx(default_p(c), abs=1e-9)
        assert v.met == (default_p(c) >= 0.5)
    body = srv.requests[0]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert [m["role"] for m in body["messages"]] == ["system", "user"]  # our template's instructions


def test_choice_mode_fails_visibly_when_neither_word_is_listed():
    with ChatServer() as srv:
        srv.always[CRITERIA[1][0]] = "noanswer"
        out = chat_judge(srv.url, mode="choice").grade_sync(items())
    assert out[1].met is None and out[1].p_yes is None and "neither answer word" in out[1].failure
    assert all(v.ok for i, v in enumerate(out) if i != 1)


def test_transport_faults_are_retried_at_the_original_settings_and_429_waits(official_style):
    keys = [f"[{p}] {c}" for c, p in CRITERIA]
    with ChatServer(slow_s=1.5) as srv:
        srv.faults = {keys[0]: ["429", "500"], keys[1]: ["timeout"], keys[2]: ["nojson", "429date"]}
        judge = chat_judge(srv.url, template=official_style, timeout_s=0.5, max_retries=4)
        t0 = time.monotonic()
        out = judge.grade_sync(items())
        took = time.monotonic() - t0
    assert [v.met for v in out] == [default_decide(k) for k in keys]
    assert took >= 1.0  # Retry-After: 1 was honoured (the backoff alone is 0.05 s)
    bodies = [b for b in srv.requests if keys[0] in b["messages"][-1]["content"]]
    assert len(bodies) == 3 and all(b == bodies[0] for b in bodies)  # same settings every time
    assert judge.stats.retries >= 5 and judge.stats.failures == 0


def test_malformed_answers_are_resampled_then_fail_never_count_as_not_met(official_style):
    keys = [f"[{p}] {c}" for c, p in CRITERIA]
    with ChatServer() as srv:
        srv.faults = {keys[0]: ["malformed"]}
        srv.always = {keys[3]: "malformed", keys[2]: "500"}
        judge = chat_judge(srv.url, template=official_style, max_retries=2)
        out = judge.grade_sync(items())
    assert out[0].ok and out[0].met == default_decide(keys[0])
    resampled = [b for b in srv.requests if keys[0] in b["messages"][-1]["content"]]
    assert resampled[0]["temperature"] == 0.0 and resampled[1]["temperature"] == 0.7 and "seed" in resampled[1]
    assert out[3].met is None and "unparseable" in out[3].failure and "after 3 attempts" in out[3].failure
    assert out[2].met is None and "HTTP 500" in out[2].failure
    assert judge.stats.failures == 2


def test_verdicts_are_cached_under_a_chat_identity(tmp_path, official_style):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with ChatServer() as srv:  # a local server without a root: cached only under a revision the user vouches for
        assert chat_judge(srv.url, template=official_style, cache=cache).cache is None
        judge = chat_judge(srv.url, template=official_style, cache=cache, revision="grader-v1")
        first = judge.grade_sync(items())
        n = len(srv.requests)
        again = judge.grade_sync(items())
    assert len(srv.requests) == n and all(v.cached for v in again)
    assert [v.met for v in again] == [v.met for v in first]
    assert judge.model_id == f"chat:{srv.url.split('//')[1]}:{MODEL}!grader-v1"


def test_the_api_key_is_sent_but_never_shown(monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_API_KEY", "sk-test-secret-123")
    with ChatServer() as srv:
        srv.always[CRITERIA[0][0]] = "401echo"
        judge = chat_judge(srv.url, mode="choice")
        out = judge.grade_sync(items())
    assert srv.headers_seen[0]["Authorization"] == "Bearer sk-test-secret-123"
    assert "sk-test-secret-123" not in repr(judge) and "sk-test-secret-123" not in out[0].failure
    assert "HTTP 401" in out[0].failure and "***" in out[0].failure


def test_make_judge_picks_chat_for_a_server_without_vllms_root():
    with ChatServer() as srv:
        auto = make_judge(judge_url=srv.url, cache=False)
        explicit = make_judge(judge_url=srv.url, judge_api="chat", served_model="other-name", cache=False)
    assert isinstance(auto, ChatJudge) and auto.model == MODEL  # the only model listed
    assert isinstance(explicit, ChatJudge) and explicit.model == "other-name"
    with pytest.raises(ValueError, match="judge-api"):
        make_judge(judge_url="http://127.0.0.1:9", judge_api="grpc", cache=False)


def test_official_style_file_renders_as_text_messages(official_style):
    t = load_template(official_style, "explain")
    msgs = template_messages(t, items()[0])
    assert msgs[0]["role"] == "user" and "[5] Asks whether the pupil hit her head." in msgs[0]["content"]
    assert "<<" not in msgs[0]["content"] and "assistant: " + RESPONSE in msgs[0]["content"]


def test_p_yes_from_top_and_retry_after_parsing():
    import math

    top = [{"token": " YES", "logprob": math.log(0.2)}, {"token": "no", "logprob": math.log(0.6)},
           {"token": "No ", "logprob": math.log(0.2)}]
    assert p_yes_from_top(top) == pytest.approx(0.2)
    assert p_yes_from_top([{"token": "maybe", "logprob": 0.0}]) is None
    assert retry_after_seconds(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    now = time.time()
    date = httpx.Headers({"Retry-After": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 10))})
    assert 8.0 <= retry_after_seconds(date, now=now) <= 10.0
    assert retry_after_seconds(httpx.Headers({"Retry-After": "soon"})) is None


def test_judge_check_cli_speaks_the_chat_api():
    import json

    from typer.testing import CliRunner

    from rubricstree import app

    with ChatServer() as srv:
        res = CliRunner().invoke(app, ["judge", "check", "--judge-url", srv.url, "--judge-api", "chat",
                                       "--mode", "choice", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress goes to stderr
    default_criterion = "Advises the user to call emergency services now."
    assert out["failure"] is None and out["p_yes"] == pytest.approx(default_p(default_criterion))


def test_auto_rule_and_key_fallback(monkeypatch):
    from reward.judge.api import resolve_judge_api
    from reward.judge.chat import api_key_for

    assert resolve_judge_api(["http://127.0.0.1:9"], "auto") == "completions"  # loopback, unlisted
    assert resolve_judge_api(["https://judge.invalid"], "auto") == "chat"  # remote, unlisted
    assert resolve_judge_api(["https://judge.invalid"], "completions") == "completions"
    monkeypatch.delenv("RUBRICSTREE_JUDGE_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert api_key_for(["https://api.openai.com/v1"]) == "sk-openai"
    assert api_key_for(["https://other.example"]) == ""
    monkeypatch.setenv("MY_KEY", "sk-mine")
    assert api_key_for(["https://api.openai.com"], "MY_KEY") == "sk-mine"
