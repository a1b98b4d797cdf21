"""Who grades, known for the whole run (issue 48, parts 1 and 2), against the vLLM-shaped stub of
ours through the real HTTP transport:

- the start-up probe fails closed: an endpoint that answers /v1/models but not the probe items
  (busy, a 503 gateway) is retried, then left out of the pool; none left: the run is refused;
- during the run each endpoint answers the probe items again, on a schedule and after every
  reconnection; a changed answer stops grading at once, names the endpoint, and quarantines what
  was cached since the last good probe (kept, never served, also not after a rollback).

Every case fails on the code before this issue: the busy replica graded (and cached) a share of the
run, the swapped weights' verdicts were cached under the first identity and served after a rollback.
The same against the real vLLM CPU server: test_identity_watch_server.py.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from rt_vllm_stub import HashTokenizer, VLLMStub

from reward.errors import JudgeUnavailableError
from reward.judge import JudgeConfig, JudgeItem, Message, VerdictCache
from reward.judge.cache import verdict_key
from reward.judge.chat import ChatJudge
from reward.judge.http import HTTPJudge
from reward.judge.watch import JudgeIdentityChanged

CONV = (Message(role="user", content="My dad's face is drooping on one side and his speech is slurred."),)


def _items(n: int, tag: str = "") -> list[JudgeItem]:
    return [JudgeItem(conversation=CONV, response=f"Call emergency services now{tag} ({k}).",
                      criterion=f"Advises calling emergency services ({k}).") for k in range(n)]


def _model(folder):
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    save_file({"w": np.zeros(16, dtype=np.float32)}, str(folder / "model.safetensors"))
    return str(folder)


def _http(url: str, cache=None, **kw) -> HTTPJudge:
    kw.setdefault("max_retries", 2)
    return HTTPJudge(url, "judge", tokenizer=HashTokenizer(), cache=cache, backoff_s=0.01, **kw)


def _chat(url: str, cache=None, **kw) -> ChatJudge:
    kw.setdefault("max_retries", 2)
    return ChatJudge(url, "judge", config=JudgeConfig(mode="choice"), cache=cache, backoff_s=0.01, **kw)


def _truth(srv: VLLMStub, judge, items):
    """The p_yes each item gets from ``srv``'s current weights, asked fresh (no cache)."""
    fresh = judge.grade_sync(items, use_cache=False)
    assert all(v.ok for v in fresh), sorted({v.failure for v in fresh if not v.ok})
    return [v.p_yes for v in fresh]


# ---------------------------------------------------------------- 1: the start-up probe fails closed
@pytest.mark.parametrize("make", [_http, _chat], ids=["completions", "chat"])
def test_a_replica_busy_at_start_up_is_left_out_of_the_pool(tmp_path, make, caplog):
    """Real judge + a replica with swapped answers that is busy (503) while the probes are asked:
    before, it was left out of the comparison but kept in the pool, and graded a share of the run
    under the first server's identity."""
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as good, VLLMStub(root=root, weights="swapped") as replica:
        replica.busy_when = lambda body: True
        with caplog.at_level("WARNING"):
            judge = make(f"{good.url},{replica.url}", cache)
        replica.busy_when = None  # no longer busy: it would answer grading requests now
        assert [ep.url for ep in judge.pool.endpoints] == [f"{good.url}/v1"]
        assert f"{replica.url}/v1" in caplog.text and "left out of the pool" in caplog.text
        items = _items(48)
        out = judge.grade_sync(items)
        assert all(v.ok for v in out) and set(judge.stats.by_endpoint) == {f"{good.url}/v1"}
        alone = make(good.url, cache)
        served = alone.grade_sync(items)
        assert all(v.cached for v in served)
        assert [v.p_yes for v in served] == pytest.approx(_truth(good, alone, items), abs=1e-12)


def test_a_pool_whose_probes_all_fail_is_refused_and_caches_nothing(tmp_path):
    """A remote root under a revision whose probe items get a 503 (a weight swap behind a gateway):
    before, its verdicts were cached under the revision and served stale."""
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root="/models/on-the-gpu-node/judge") as srv:
        srv.busy_when = lambda body: True
        with pytest.raises(JudgeUnavailableError, match="answered the fixed probe items") as exc:
            _http(srv.url, cache, revision="judge-v1")
        assert srv.url in str(exc.value)
    assert len(cache) == 0


def test_an_endpoint_busy_for_a_moment_is_kept_after_a_retry(tmp_path):
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        srv.busy_requests = 2  # the first two probe requests: 503
        judge = _http(srv.url, VerdictCache(tmp_path / "v.sqlite"))
    assert [ep.url for ep in judge.pool.endpoints] == [f"{srv.url}/v1"] and judge.watch is not None


# ---------------------------------------------------------------- 2: watched during the run
@pytest.mark.parametrize("make", [_http, _chat], ids=["completions", "chat"])
def test_weights_swapped_mid_run_stop_grading_within_one_interval_and_are_quarantined(tmp_path, make):
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    every = 10
    with VLLMStub(root=root) as srv:
        judge = make(srv.url, cache, probe_every_items=every, probe_every_s=0, concurrency=4)
        before = _items(30, " a")
        assert all(v.ok for v in judge.grade_sync(before))
        srv.weights = "swapped"  # silently, behind the same name and root
        after = _items(200, " b")
        with pytest.raises(JudgeIdentityChanged, match=f"{srv.url}/v1") as exc:
            judge.grade_sync(after)
        assert "quarantined" in str(exc.value)
        graded_after = judge.stats.by_endpoint[f"{srv.url}/v1"] - len(before)
        assert graded_after <= every + 4  # one interval, plus what was in flight (concurrency 4)
        assert judge.watch.stats.quarantined >= 1
        # nothing the swapped weights graded is served: every verdict left in the cache is w1's
        after_keys = [verdict_key(judge.model_id, judge.template, it) for it in after]
        assert cache.get_many(after_keys) == {}
        assert cache.quarantined() == judge.watch.stats.quarantined
        # rollback: the first weights again; the quarantined verdicts are never served
        srv.weights = "w1"
        again = make(srv.url, cache, probe_every_items=every, probe_every_s=0)
        served = again.grade_sync(before + after)
        assert all(v.ok for v in served), sorted({v.failure for v in served if not v.ok})
        fresh = _truth(srv, again, before + after)
    assert [v.p_yes for v in served] == pytest.approx(fresh, abs=1e-12)
    assert sum(v.cached for v in served) <= len(before)


def test_a_restart_with_other_weights_is_caught_at_the_reconnection(tmp_path):
    """The server restarts with other weights while a run grades; the client rides through the
    restart on its retries. With the schedule off, the probe after the reconnection catches it
    before any verdict of the new weights is stored (before: 620 of 800 came from the new weights)."""
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, cache, probe_every_items=0, probe_every_s=0, concurrency=2, max_retries=8,
                      cooldown_s=0.05)
        assert all(v.ok for v in judge.grade_sync(_items(10, " a")))
        srv.stop()
        box: dict = {}

        def run() -> None:
            try:
                box["out"] = judge.grade_sync(_items(40, " b"))
            except Exception as exc:  # noqa: BLE001 - read below
                box["exc"] = exc

        t = threading.Thread(target=run)
        t.start()
        for _ in range(2000):  # until the client has met the refused connection (bounded: 20 s at most)
            if judge.stats.retries:
                break
            time.sleep(0.01)
        srv.start_again(weights="swapped")
        t.join(timeout=120)
        assert not t.is_alive()
    assert isinstance(box.get("exc"), JudgeIdentityChanged), box
    assert judge.watch.stats.by_reason.get("reconnection", 0) >= 1
    b_keys = [verdict_key(judge.model_id, judge.template, it) for it in _items(40, " b")]
    assert cache.get_many(b_keys) == {}  # nothing of the new weights stored


def test_an_endpoint_that_stops_answering_the_probe_grades_nothing_more(tmp_path):
    """Due for a probe, the endpoint answers grading requests but not the probe items: no verdict
    comes from it unconfirmed; the items fail (after retries), the run does not crash."""
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, VerdictCache(tmp_path / "v.sqlite"), probe_every_items=5, probe_every_s=0,
                      concurrency=1, max_retries=1)
        probe_ids = {tuple(judge.renderer.render_ids(judge.template, it)) for it in __import__(
            "reward.judge.signature", fromlist=["PROBE_ITEMS"]).PROBE_ITEMS}
        srv.busy_when = lambda body: tuple(body.get("prompt") or ()) in probe_ids
        out = judge.grade_sync(_items(12))
    assert sum(v.ok for v in out) == 5 and all("probe items" in v.failure for v in out if not v.ok)
    assert judge.watch.stats.failed_probes >= 1


def test_a_fault_in_a_probe_request_is_retried_like_a_judge_request(tmp_path):
    """Every probe item request during the run answers 503 once, then answers: each is retried at
    the same endpoint as a grading request would be, the probes confirm who grades and every item
    is graded. Before, one fault anywhere in a probe failed the whole probe and the item's attempt
    with it (through a proxy injecting 20% faults a rollout lost its score: five attempts, each
    needing every probe request to pass at once)."""
    from reward.judge.signature import PROBE_ITEMS

    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, None, probe_every_items=5, probe_every_s=0, concurrency=1, max_retries=1)
        probe_ids = {tuple(judge.renderer.render_ids(judge.template, it)) for it in PROBE_ITEMS}
        asked = {"n": 0}

        def first_ask_busy(body) -> bool:
            if tuple(body.get("prompt") or ()) not in probe_ids:
                return False
            asked["n"] += 1
            return asked["n"] % 2 == 1  # concurrency 1: each probe item's first request, never its second

        srv.busy_when = first_ask_busy
        out = judge.grade_sync(_items(12))
    assert all(v.ok for v in out) and judge.stats.retries == 0
    assert judge.watch.stats.probes == 2 and judge.watch.stats.failed_probes == 0 and asked["n"] == 12


def test_the_probe_costs_a_few_items_per_interval(tmp_path):
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, None, probe_every_items=50, probe_every_s=0, concurrency=1)
        judge.grade_sync(_items(500))
    assert judge.watch.stats.probes == pytest.approx(500 / 50, abs=1)
    assert judge.watch.stats.probe_items / 500 <= 0.1


# ---------------------------------------------------------------- 3: a tolerance set from measurement
def test_a_small_weight_change_is_seen_where_the_old_tolerance_missed_it(tmp_path):
    """A change of 1e-4 in every logprob: far below the old tolerance of 0.05 (a real one-tensor
    change moved the probe by 0.006 and 800 of 800 stale verdicts were served), above the measured
    floor (benchmarks/results/probe_tolerance.json: same weights 0, one tensor changed by 1%: 2.3e-5)."""
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, VerdictCache(tmp_path / "v.sqlite"), probe_every_items=5, probe_every_s=0,
                      concurrency=1)
        judge.grade_sync(_items(5, " a"))
        srv.numerics = 1e-4
        with pytest.raises(JudgeIdentityChanged, match="mean \\|difference\\|"):
            judge.grade_sync(_items(20, " b"))


def test_a_noisy_server_widens_its_tolerance_and_raises_no_false_alarm(tmp_path, caplog):
    """Batch noise of up to 1e-3 per value (a GPU in bfloat16, say): measured at start-up, the
    tolerance becomes five times it, and 300 items with a probe every 10 raise no alarm."""
    from reward.judge.signature import TOLERANCE

    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        srv.jitter = 1e-3
        with caplog.at_level("WARNING"):
            judge = _http(srv.url, VerdictCache(tmp_path / "v.sqlite"), probe_every_items=10, probe_every_s=0,
                          concurrency=2)
        out = judge.grade_sync(_items(300))
    assert all(v.ok for v in out) and judge.watch.stats.probes >= 25
    assert "vary by" in caplog.text and "not seen by the probe" in caplog.text
    assert judge.watch.differ(judge.watch.reference, judge.watch.reference) is None
    assert TOLERANCE < 1e-3


# ---------------------------------------------------------------- 2b: every row of that judge, by every process
def test_a_second_process_sharing_the_cache_has_its_rows_quarantined_too(tmp_path):
    """Two graders share one cache file (a trainer's reward workers): the second never probes
    (schedule off) and stores what the swapped weights graded; when the first one's probe finds the
    swap, every row stored under that identity since its last good probe is quarantined, the
    second's included. Before, only the rows the detecting process had stored were."""
    root = _model(tmp_path / "judge")
    path = tmp_path / "v.sqlite"
    with VLLMStub(root=root) as srv:
        first = _http(srv.url, VerdictCache(path), probe_every_items=5, probe_every_s=0, concurrency=1)
        second = _http(srv.url, VerdictCache(path), probe_every_items=0, probe_every_s=0, concurrency=1)
        second.watch.idle_s = 0  # this one never asks again: only the first can find the swap
        assert first.model_id == second.model_id
        assert all(v.ok for v in first.grade_sync(_items(3, " a")))
        srv.weights = "swapped"
        theirs = _items(20, " by the second")
        assert all(v.ok for v in second.grade_sync(theirs))  # stored under the shared identity
        with pytest.raises(JudgeIdentityChanged):
            first.grade_sync(_items(10, " b"))
    cache = VerdictCache(path)
    assert cache.get_many([verdict_key(second.model_id, second.template, it) for it in theirs]) == {}
    assert cache.quarantined() >= len(theirs)


def test_an_llm_routers_routings_made_from_the_swapped_judge_are_quarantined(tmp_path):
    """A routing by the LLM router is its judge's answers: stored with the judge's identity, it is
    quarantined with its verdicts (before, the routing namespace survived and was served after a
    rollback). The probe history of the identity stays."""
    from reward.judge.signature import NAMESPACE
    from reward.router import CachedRouter, LLMTreeRouter
    from reward.router.base import ROUTING_NAMESPACE
    from reward.tree import load_tree

    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, cache, probe_every_items=0, probe_every_s=0, concurrency=8)
        router = CachedRouter(LLMTreeRouter(load_tree(), judge), cache)
        srv.weights = "swapped"
        routing = router.route_sync([{"role": "user", "content": "My chest hurts and my left arm is numb."}])
        assert routing.n_failures == 0
        key = router.key([{"role": "user", "content": "My chest hurts and my left arm is numb."}])
        assert cache.kv_get(ROUTING_NAMESPACE, key) is not None
        history = cache._conn().execute("SELECT COUNT(*) FROM kv WHERE namespace=?", (NAMESPACE,)).fetchone()[0]
        with pytest.raises(JudgeIdentityChanged):
            asyncio.run(judge.confirm_identity())  # the end-of-run probe finds the swap
    assert cache.kv_get(ROUTING_NAMESPACE, key) is None and len(cache) == 0
    assert cache._conn().execute("SELECT COUNT(*) FROM kv WHERE namespace=?", (NAMESPACE,)).fetchone()[0] == history


def test_a_restart_between_two_batches_is_probed_after_the_quiet_spell(tmp_path):
    """Each batch runs on its own event loop and HTTP client (a trainer's reward call), so a server
    restarted with other weights between two batches fails no request the client sees. Quiet for
    longer than the watch's idle bound, the endpoint is probed before it grades again. Before, the
    second batch was graded (and cached) by the new weights under the old identity."""
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, cache, probe_every_items=0, probe_every_s=0, concurrency=2)
        judge.watch.idle_s = 0.3
        assert all(v.ok for v in judge.grade_sync(_items(6, " a")))
        srv.stop()
        srv.start_again(weights="swapped")
        time.sleep(0.5)
        with pytest.raises(JudgeIdentityChanged):
            judge.grade_sync(_items(6, " b"))
    assert judge.watch.stats.by_reason.get("after a quiet spell") == 1
    assert cache.get_many([verdict_key(judge.model_id, judge.template, it) for it in _items(6, " b")]) == {}


def test_the_end_of_run_probe_confirms_the_last_stretch(tmp_path, monkeypatch):
    """The weights change after the last scheduled probe: the end-of-run probe of a run that
    succeeded finds it and quarantines what was stored since the last good probe; a judge unchanged
    passes quietly. (Without the clock slack, which reaches a few seconds further back, to tell the
    two stretches apart.)"""
    monkeypatch.setattr("reward.judge.watch.CLOCK_SLACK_S", 0.0)
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, cache, probe_every_items=0, probe_every_s=0, concurrency=2)
        assert all(v.ok for v in judge.grade_sync(_items(8, " a")))
        asyncio.run(judge.confirm_identity())  # the same judge: nothing raised, nothing quarantined
        assert judge.watch.stats.by_reason == {"end of run": 1} and cache.quarantined() == 0
        assert all(v.ok for v in judge.grade_sync(_items(8, " b")))
        srv.weights = "swapped"
        with pytest.raises(JudgeIdentityChanged, match="quarantined"):
            asyncio.run(judge.confirm_identity())
    assert cache.quarantined() == 8 and len(cache) == 8  # the first stretch was confirmed: it stays


def test_closing_a_judge_never_probes(tmp_path):
    """A run that fails closes its judge in a finally: closing asks nothing (an end probe there met
    the hung server that failed the run and held the exit for minutes, and could hide its error)."""
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, None, probe_every_items=0, probe_every_s=0, concurrency=2)
        assert all(v.ok for v in judge.grade_sync(_items(4, " a")))
        srv.busy_when = lambda body: time.sleep(30) or False  # hung from now on
        t0 = time.monotonic()
        asyncio.run(judge.aclose())
        assert time.monotonic() - t0 < 5.0 and judge.watch.stats.probes == 0  # a hang would take 30 s per request
        srv.busy_when = None


def test_an_endpoint_busy_with_slow_requests_is_not_quiet(tmp_path):
    """Requests in flight longer than the idle bound: a second caller arriving meanwhile does not
    probe (the endpoint was never quiet). Before, the quiet spell was read from the last answer."""
    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, None, probe_every_items=0, probe_every_s=0, concurrency=8, timeout_s=20)
        judge.watch.idle_s = 1.0
        slow = {"on": True}
        srv.busy_when = lambda body: (time.sleep(2.5) if slow["on"] and body.get("prompt_logprobs") is None
                                      else None) or False

        async def go():
            first = asyncio.create_task(judge.grade(_items(2, " a")))
            await asyncio.sleep(1.2)  # the first batch is still in flight
            second = asyncio.create_task(judge.grade(_items(2, " b")))
            return await first + await second

        out = asyncio.run(go())
        slow["on"] = False
    assert all(v.ok for v in out) and "after a quiet spell" not in judge.watch.stats.by_reason


def test_noise_above_the_ceiling_is_not_one_judge_and_is_left_out(tmp_path, caplog):
    """Two readings of one address that differ by more than the ceiling (a gateway alternating
    between two judges looks like this) no longer widen the tolerance past the difference: beside
    a steady endpoint it is left out of the pool; alone, the run is refused. Before, the tolerance
    became five times whatever was measured."""
    from reward.judge.signature import NOISE_CEILING

    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as steady, VLLMStub(root=root) as alternating:
        alternating.jitter = 20 * NOISE_CEILING
        with caplog.at_level("WARNING"):
            judge = _http(f"{steady.url},{alternating.url}", VerdictCache(tmp_path / "v.sqlite"))
        assert [ep.url for ep in judge.pool.endpoints] == [f"{steady.url}/v1"]
        assert "above the ceiling" in caplog.text and judge.probed.tolerance <= 5 * NOISE_CEILING
        with pytest.raises(JudgeUnavailableError, match="above the ceiling"):
            _http(alternating.url, VerdictCache(tmp_path / "w.sqlite"))


def test_an_end_probe_without_an_answer_fails_closed(tmp_path):
    """The endpoint that graded the last stretch does not answer the end-of-run probe: who graded
    it is unknown, so its verdicts are quarantined and the run says so (exit 6). Before, a warning
    was logged and the stretch stayed cached; after a rollback all of it was served."""
    from reward.judge.watch import IdentityUnconfirmed

    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as srv:
        judge = _http(srv.url, cache, probe_every_items=0, probe_every_s=0, concurrency=2, max_retries=1)
        srv.weights = "swapped"
        assert all(v.ok for v in judge.grade_sync(_items(8, " a")))
        srv.busy_when = lambda body: True  # 503 from now on
        with pytest.raises(IdentityUnconfirmed, match="quarantined") as exc:
            asyncio.run(judge.confirm_identity())
        assert exc.value.exit_code == 6
    assert len(cache) == 0 and cache.quarantined() == 8


def test_a_rolling_restart_is_quarantined_from_the_earliest_good_probe(tmp_path):
    """Two endpoints, one identity: B takes the new weights first and grades, A passes a probe
    meanwhile, both grade on, then A takes the new weights too. A's end probe answers first and
    finds the change: everything stored since the earlier of the two last good probes is
    quarantined (a row cannot be told by its endpoint), and B's probe runs to its end. Before, only
    what followed A's own last good probe went, and B's first verdicts were served after a rollback."""
    root = _model(tmp_path / "judge")
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=root) as a, VLLMStub(root=root) as b:
        judge = _http(f"{a.url},{b.url}", cache, probe_every_items=0, probe_every_s=0, concurrency=4)
        b.weights = "swapped"
        assert all(v.ok for v in judge.grade_sync(_items(16, " b")))  # part of them by B's new weights
        judge.watch.endpoints[f"{a.url}/v1"].suspect = True  # due: A is probed again now (a good probe)
        asyncio.run(judge.watch.confirm(f"{a.url}/v1"))
        assert all(v.ok for v in judge.grade_sync(_items(16, " c")))
        assert all(w.items for w in judge.watch.endpoints.values())  # both graded since their last probe
        a.weights = "swapped"
        b.busy_when = lambda body: time.sleep(1.0) or False  # B answers its probe after A
        with pytest.raises(JudgeIdentityChanged):
            asyncio.run(judge.confirm_identity())
        b.busy_when = None
    assert judge.watch.stats.by_reason.get("end of run") == 2  # both endpoints' probes ran
    assert len(cache) == 0 and cache.quarantined() == 32


def test_the_settings_reach_the_watch(tmp_path):
    """--probe-idle-s (JudgeSettings.probe_idle_s) is the watch's quiet bound; 0 turns it off."""
    from reward.judge.settings import JudgeSettings

    root = _model(tmp_path / "judge")
    with VLLMStub(root=root) as srv:
        for value, expected in ((7.5, 7.5), (0, 0.0)):
            judge = JudgeSettings(url=srv.url, probe_idle_s=value).build(cache=False, tokenizer=HashTokenizer())
            assert judge.watch is not None and judge.watch.idle_s == expected
