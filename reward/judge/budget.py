"""How long a served judge may keep a caller waiting: one deadline per run, and a circuit breaker.

A *run* is everything graded inside :func:`run_deadline` (a CLI command wraps its whole work in
one): its clock starts at the run's first judge request, every request of the run shares it, and
when it has passed the next request raises :class:`~reward.errors.JudgeDeadlineError`, which
stops the run (what was graded stays in the durable cache and the command's output). Outside a
run (a trainer's reward call, a library call) each ``grade``/``generate_json`` call is its own
small run bounded by the judge's ``deadline_s``, and what is unanswered then fails visibly
instead of stopping anything.

The circuit breaker is per judge: when every endpoint has given no answer (a timeout or a refused
connection) to ``circuit_breaker`` requests in a row, the next request raises
:class:`~reward.errors.JudgeUnavailableError` instead of waiting again, so a hung judge ends a run
after about one request timeout, not after every item has spent its retries.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from reward.errors import JudgeDeadlineError


@dataclass
class Budget:
    """A deadline ``seconds`` after the first request of its scope; ``stop``: passing it ends the
    run (raise) rather than failing the items still unanswered."""

    seconds: float
    stop: bool
    started: float | None = field(default=None)

    def left(self) -> float:
        """Seconds left; starts the clock on first use."""
        if self.started is None:
            self.started = time.monotonic()
        return self.started + self.seconds - time.monotonic()

    def expired(self, last: str) -> Exception:
        """The error for a request that finds the deadline passed (``last``: the previous failure)."""
        if self.stop:
            return JudgeDeadlineError(
                f"the run's judge deadline of {self.seconds:g}s passed (last judge failure: {last}); what was "
                "graded is kept: rerun to resume from the cache, or raise --deadline")
        return TimeoutError(f"deadline of {self.seconds:g}s for the grading call passed; last: {last}")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("judge_budget", default=None)


def current_budget() -> Budget | None:
    return _BUDGET.get()


@contextmanager
def run_deadline(seconds: float | None) -> Iterator[Budget | None]:
    """Bound every judge request made inside (this context and the tasks it starts, including an
    ``asyncio.run`` inside) by one deadline of ``seconds`` from the first request. ``None``: no
    run deadline (each grading call keeps its own)."""
    if seconds is None:
        yield None
        return
    budget = Budget(float(seconds), stop=True)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@contextmanager
def call_deadline(seconds: float | None) -> Iterator[None]:
    """One grading call's deadline, unless a run deadline already bounds it."""
    if seconds is None or _BUDGET.get() is not None:
        yield
        return
    token = _BUDGET.set(Budget(float(seconds), stop=False))
    try:
        yield
    finally:
        _BUDGET.reset(token)
