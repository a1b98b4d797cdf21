"""Who grades, watched for the whole run (issue 48), against the real vLLM CPU judge server.

The real server answers; a proxy of ours in front of it stands for what it cannot be made to do on
its own (tests/_support/rt_rewrite_proxy.py): a replica that is busy while the probes are asked
and then answers as other weights, a restart with other weights in the middle of a run, a server
that does not say what it serves. The same cases against the vLLM-shaped stub:
test_identity_watch.py.
"""

from __future__ import annotations

import os
import uuid

import pytest
from rt_rewrite_proxy import RewriteProxy, shifted_answers, shifted_probe

from reward.judge import JudgeConfig, JudgeItem, Message, VerdictCache, make_judge
from reward.judge.cache import verdict_key
from reward.judge.chat import ChatJudge
from reward.judge.watch import JudgeIdentityChanged
from reward.serving import normalise_url

pytestmark = pytest.mark.server


def _items(n: int, tag: str) -> list[JudgeItem]:
    conv = (Message(role="user", content=f"[{uuid.uuid4().hex}] Sudden worst headache of my life, 20 min ago."),)
    return [JudgeItem(conversation=conv, response=f"Call emergency services now ({tag} {k}).",
                      criterion=f"Advises emergency assessment ({k}).") for k in range(n)]


def _http(url: str, cache, **kw):
    return make_judge(judge_url=url, judge_api="completions", cache=cache, max_retries=2, backoff_s=0.01, **kw)


def other_weights(path, data):
    """What a server restarted with other weights answers: other probe numbers and other answers."""
    return shifted_probe(0.3)(path, data) or shifted_answers(-0.7)(path, data)


def test_a_replica_busy_at_start_up_is_left_out(judge_url, tmp_path):
    """Before: kept in the pool, it graded 17 of 48 items as other weights, cached under the first
    server's identity and served later to a run against the first server alone."""
    cache = VerdictCache(tmp_path / "v.sqlite")
    state = {"busy": True}

    def replica_rewrite(path, data):
        if state["busy"] and path.endswith("completions"):
            return {"error": {"message": "busy"}, "_status": 503}
        return other_weights(path, data)

    with RewriteProxy(judge_url, replica_rewrite) as replica:
        judge = _http(f"{judge_url},{replica.url}", cache)
        state["busy"] = False
        # the pool names endpoints by their /v1 base; $RUBRICSTREE_JUDGE_URL may be given without it
        assert [ep.url for ep in judge.pool.endpoints] == [normalise_url(judge_url)]
        items = _items(48, "replica")
        out = judge.grade_sync(items)
    assert all(v.ok for v in out) and set(judge.stats.by_endpoint) == {normalise_url(judge_url)}
    alone = _http(judge_url, cache)
    served = alone.grade_sync(items)
    fresh = alone.grade_sync(items, use_cache=False)
    assert all(v.cached for v in served)
    assert [v.p_yes for v in served] == pytest.approx([v.p_yes for v in fresh], abs=1e-4)  # float32 server


def test_other_weights_mid_run_stop_grading_and_a_rollback_serves_nothing_stale(judge_url, tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    state = {"swapped": False}
    with RewriteProxy(judge_url, lambda p, d: other_weights(p, d) if state["swapped"] else None) as proxy:
        judge = _http(proxy.url, cache, probe_every_items=8, probe_every_s=0, concurrency=2,
                      tokenizer=None, revision="tiny-behind-a-proxy")
        before = _items(16, "before")
        assert all(v.ok for v in judge.grade_sync(before))
        state["swapped"] = True  # the server behind the proxy now runs other weights
        after = _items(60, "after")
        with pytest.raises(JudgeIdentityChanged, match=proxy.url):
            judge.grade_sync(after)
        assert judge.watch.stats.probes >= 2
        assert cache.get_many([verdict_key(judge.model_id, judge.template, it) for it in after]) == {}
        state["swapped"] = False  # rolled back
        again = _http(proxy.url, cache, revision="tiny-behind-a-proxy")
        served = again.grade_sync(before + after)
        fresh = again.grade_sync(before + after, use_cache=False)
    assert [v.p_yes for v in served] == pytest.approx([v.p_yes for v in fresh], abs=1e-4)


def test_a_server_that_does_not_say_what_it_serves_leaves_the_cache_empty(judge_url, tmp_path):
    """llama.cpp, Ollama and the like list a model without a root: before, the chat backend cached
    under the name, and a model swapped behind it was served 12 of 12 stale verdicts."""
    def no_root(path, data):
        if path.rstrip("/") == "/v1/models" and isinstance(data, dict):
            return {**data, "data": [{k: v for k, v in m.items() if k != "root"} for m in data.get("data", [])]}
        return None

    cache = VerdictCache(tmp_path / "v.sqlite")
    with RewriteProxy(judge_url, no_root) as local:
        chat = ChatJudge(local.url, "tiny", config=JudgeConfig(mode="choice"), cache=cache, max_retries=1)
        chat.grade_sync(_items(6, "chat"))  # the random tiny model answers anything unconstrained: no verdict asked
        completions = _http(local.url, cache, tokenizer=os.environ["RUBRICSTREE_TINY_MODEL"])
        out = completions.grade_sync(_items(6, "completions"))
        named = _http(local.url, cache, tokenizer=os.environ["RUBRICSTREE_TINY_MODEL"], revision="tiny-v1")
        named.grade_sync(_items(6, "named"))
    assert chat.cache is None and completions.cache is None and all(v.ok for v in out)
    assert len(cache) == 6  # only the run under a revision the user vouched for
