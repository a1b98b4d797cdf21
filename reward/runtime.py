"""One long-lived background event loop for synchronous callers of async rewards.

Scripts, the difficulty filter and verl's legacy synchronous reward managers call async judge
code from plain functions. :func:`run_sync` runs each coroutine on one daemon-thread loop (as TRL
does for async rewards), so a judge's HTTP client and its connections survive between calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop, started on first use (again if it was closed)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="rubricstree-reward-loop", daemon=True).start()
        return _LOOP


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the shared background loop and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop()).result()
