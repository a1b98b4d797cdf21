"""reward.aio: gather_or_cancel stops the others when one fails; SingleFlight shares a computation
between concurrent callers of one key, passes its exception to them, and does not cancel a waiter
with the caller that computed."""

from __future__ import annotations

import asyncio

import pytest

from reward.aio import SingleFlight, gather_or_cancel


def test_gather_or_cancel_stops_the_others():
    finished: list[str] = []

    async def slow():
        await asyncio.sleep(0.2)
        finished.append("slow")

    async def boom():
        await asyncio.sleep(0.01)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(gather_or_cancel([slow(), boom()]))
    assert finished == []


def test_single_flight_shares_one_computation_per_key():
    calls: list[str] = []
    flight: SingleFlight[str] = SingleFlight()

    async def compute(key):
        calls.append(key)
        await asyncio.sleep(0.01)
        return key.upper()

    async def main():
        return await asyncio.gather(*(flight.run(k, lambda k=k: compute(k)) for k in "aaab"))

    out = asyncio.run(main())
    assert calls == ["a", "b"]
    assert [r for r, _ in out] == ["A", "A", "A", "B"]
    assert [shared for _, shared in out] == [False, True, True, False]
    assert "a" not in flight  # nothing is kept once the computation ends
    assert asyncio.run(flight.run("a", lambda: compute("a"))) == ("A", False) and calls == ["a", "b", "a"]


def test_single_flight_passes_the_exception_to_every_waiter():
    flight: SingleFlight[int] = SingleFlight()
    n = 0

    async def fail():
        nonlocal n
        n += 1
        await asyncio.sleep(0.01)
        raise ValueError("judge down")

    async def main():
        return await asyncio.gather(*(flight.run("k", fail) for _ in range(3)), return_exceptions=True)

    out = asyncio.run(main())
    assert n == 1 and all(isinstance(e, ValueError) for e in out)


def test_a_waiter_outlives_the_cancelled_caller_but_not_its_own_cancellation():
    flight: SingleFlight[int] = SingleFlight()
    started = 0

    async def compute():
        nonlocal started
        started += 1
        await asyncio.sleep(0.05)
        return 7

    async def main():
        first = asyncio.create_task(flight.run("k", compute))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(flight.run("k", compute))
        own = asyncio.create_task(flight.run("k", compute))
        await asyncio.sleep(0)
        first.cancel()
        own.cancel()  # this waiter is cancelled itself: it stops
        with pytest.raises(asyncio.CancelledError):
            await own
        with pytest.raises(asyncio.CancelledError):
            await first
        return await waiter

    assert asyncio.run(main()) == (7, False)  # computed by the waiter, in the cancelled caller's place
    assert started == 2
