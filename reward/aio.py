"""One asyncio helper every concurrent step uses: :func:`gather_or_cancel`.

``asyncio.gather`` lets the other awaitables run on when one fails: a failed run would then half
finish in the background (more requests, more appended records) while its error is reported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


async def gather_or_cancel(aws: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await all of ``aws`` concurrently; return their results in order. When one raises (or the
    caller is cancelled), cancel the others, wait until they have stopped, and raise."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:  # stop the others: the step must fail, not half-finish
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
