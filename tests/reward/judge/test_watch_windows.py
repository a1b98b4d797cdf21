"""What the identity watch quarantines, and when (reward/judge/watch.py), with a probe of our own
in place of a server: an endpoint's unconfirmed stretch runs from its last good probe to now, or
to its last request when it stopped answering; an endpoint that graded nothing since its last good
probe widens nothing; several judges' end probes all run to their end."""

from __future__ import annotations

import asyncio
import time

import pytest

from reward.judge.watch import IdentityUnconfirmed, IdentityWatch, JudgeIdentityChanged, confirm_judges


class _Cache:
    def __init__(self) -> None:
        self.moved: list[str] = []

    def quarantine(self, keys, reason):
        self.moved += [k for _, k in keys]
        return len(keys)


class _Numbers:
    def __init__(self, answers) -> None:
        self.answers = answers


def _watch(state: dict, urls=("A", "B")) -> tuple[IdentityWatch, _Cache]:
    cache = _Cache()

    def ask(url):
        return None if state.get(url) == "dead" else _Numbers([9.0] if state.get(url) == "swapped" else [1.0])

    watch = IdentityWatch(_Numbers([1.0]), ask, lambda a, b: None if a.answers == b.answers else "differs",
                          urls=list(urls), every_items=0, every_s=0, cache=cache, wait_s=5.0, idle_s=0)
    return watch, cache


def _grade(watch: IdentityWatch, url: str, keys: list[str]) -> None:
    for k in keys:
        watch.sending(url)
        watch.returned(url)
        watch.answered(url)
        watch.stored(k)


@pytest.fixture(autouse=True)
def _no_slack(monkeypatch):
    monkeypatch.setattr("reward.judge.watch.CLOCK_SLACK_S", 0.0)  # the windows exactly, at this test's speed


def test_a_replica_that_died_quarantines_its_own_stretch_not_the_whole_run():
    state: dict = {}
    watch, cache = _watch(state)
    _grade(watch, "A", [f"a{i}" for i in range(5)])
    state["A"] = "dead"
    time.sleep(1.2)  # past the grace a reply's store is given after its request returned
    for j in range(3):  # B grades on, passing a probe after each batch
        _grade(watch, "B", [f"b{j}-{i}" for i in range(100)])
        watch.endpoints["B"].suspect = True
        asyncio.run(watch.confirm("B"))
    with pytest.raises(IdentityUnconfirmed, match="quarantined"):
        asyncio.run(watch.confirm_end())
    assert sorted(cache.moved) == [f"a{i}" for i in range(5)]


def test_an_endpoint_that_graded_nothing_since_its_probe_widens_nothing():
    state: dict = {}
    watch, cache = _watch(state, urls=("A", "C"))  # C answered at start-up, then grades nothing
    for j in range(3):
        _grade(watch, "A", [f"a{j}-{i}" for i in range(100)])
        watch.endpoints["A"].suspect = True
        asyncio.run(watch.confirm("A"))
    _grade(watch, "A", [f"last{i}" for i in range(7)])
    state["A"] = "swapped"
    with pytest.raises(JudgeIdentityChanged):
        asyncio.run(watch.confirm_end())
    assert sorted(cache.moved) == sorted(f"last{i}" for i in range(7))


class _Judge:
    def __init__(self, watch: IdentityWatch) -> None:
        self.watch = watch

    async def confirm_identity(self) -> None:
        await self.watch.confirm_end()


def test_one_judges_stop_never_cancels_anothers_quarantine():
    """A reward's judge finds another judge at once; its panel's judge does not answer, slowly.
    Both quarantines happen and the changed judge is the stop raised. Before, the first stop
    cancelled the second probe, and the panel's stretch stayed cached."""
    first_state, second_state = {"A": "swapped"}, {}
    first, first_cache = _watch(first_state, urls=("A",))
    second, second_cache = _watch(second_state, urls=("B",))
    _grade(first, "A", ["x1", "x2"])
    _grade(second, "B", ["y1", "y2", "y3"])
    slow = second.ask
    second.ask = lambda url: (time.sleep(0.5), slow(url))[1]
    second_state["B"] = "dead"
    with pytest.raises(JudgeIdentityChanged):
        asyncio.run(confirm_judges(_Judge(first), None, _Judge(second)))
    assert sorted(first_cache.moved) == ["x1", "x2"] and sorted(second_cache.moved) == ["y1", "y2", "y3"]
