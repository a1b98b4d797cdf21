"""Streaming, group-aware scoring for verl's reward loop (used by the reward manager).

verl hands rollouts over one at a time. :class:`StreamingScorer` batches those that arrive within
``batch_window_s`` (one judge call per data source) and, under ``on_failure: neutral``, lets a
failed rollout wait on the :class:`GroupBoard` for the rest of its group (same ``uid``) to take
the mean of the scored ones (``reward.integrations.verl.policy.stand_in``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from reward.errors import JudgeError
from reward.integrations.verl.context import RewardContext
from reward.integrations.verl.policy import failure_reason, stand_in
from reward.integrations.verl.settings import VerlRewardSettings
from reward.integrations.verl.sources import (
    Sample,
    SampleScore,
    finalize,
    score_samples,
)

__all__ = ["GroupBoard", "StreamingScorer"]


@dataclass
class _Group:
    scores: list[float] = field(default_factory=list)
    arrived: int = 0
    waiters: int = 0
    born: float = field(default_factory=time.monotonic)
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)


class GroupBoard:
    """Where the rollouts of a group meet when verl hands them over one at a time.

    Every rollout reports on arrival (its score, or None when unscored). A failed rollout then
    waits until ``group_size`` rollouts of its ``uid`` have reported, or ``timeout_s``, and gets
    the scores of the scored ones. Entries are dropped once complete with no waiter, or after
    ``4 * timeout_s`` (validation batches may be padded with repeats of a uid).
    """

    def __init__(self, group_size: int, timeout_s: float) -> None:
        self.group_size, self.timeout_s = group_size, timeout_s
        self._groups: dict[str, _Group] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def _prune(self) -> None:
        old = time.monotonic() - 4 * self.timeout_s
        for uid in [u for u, g in self._groups.items() if g.born < old and not g.waiters]:
            del self._groups[uid]

    async def report(self, uid: str, score: float | None, *, wait: bool = False) -> tuple[list[float], bool]:
        """Report one rollout of group ``uid`` (``score`` None: unscored). With ``wait``, wait
        for the group and return ``(scores of its scored rollouts, complete)``; a group that is
        still short of ``group_size`` after ``timeout_s`` returns what it has (complete False)."""
        g = self._groups.setdefault(uid, _Group())
        g.arrived += 1
        if score is not None:
            g.scores.append(score)
        if wait:
            g.waiters += 1  # before the drop below, so a waiting rollout keeps its group alive
        async with g.cond:
            g.cond.notify_all()
        self._drop_if_done(uid, g)
        self._prune()
        if not wait:
            return list(g.scores), g.arrived >= self.group_size
        try:
            async with g.cond:
                await asyncio.wait_for(g.cond.wait_for(lambda: g.arrived >= self.group_size), self.timeout_s)
            complete = True
        except asyncio.TimeoutError:
            complete = False
        finally:
            g.waiters -= 1
            self._drop_if_done(uid, g)
        return list(g.scores), complete

    def _drop_if_done(self, uid: str, g: _Group) -> None:
        if g.arrived >= self.group_size and not g.waiters and self._groups.get(uid) is g:
            del self._groups[uid]


class StreamingScorer:
    """Scores rollouts handed over one at a time (verl's ``run_single``), group-aware.

    Rollouts that arrive within ``batch_window_s`` are scored in one batch (one judge call per
    data source; RubricReward routes each prompt once). A failed rollout under ``neutral`` waits on
    the :class:`GroupBoard` for its group and takes the mean of the scored ones. This needs every
    rollout of a group in this process: run verl with ``reward.num_workers=1``.
    """

    def __init__(self, settings: VerlRewardSettings, context: RewardContext, group_size: int) -> None:
        self.settings, self.context = settings, context
        self.board = GroupBoard(group_size, settings.group_timeout_s)
        self._pending: list[tuple[Sample, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self.counts = {"rollouts": 0, "unscored": 0, "neutral": 0, "constant": 0}
        from reward.integrations.monitors import RewardMonitor

        self.monitor = RewardMonitor(getattr(settings, "monitors", None), name="rubricstree verl reward")

    async def score(self, sample: Sample) -> dict[str, Any]:
        self.counts["rollouts"] += 1
        raw: SampleScore | None = None
        uid = sample.uid
        try:
            raw = await self._submit(sample)
        except BaseException:
            # report the loss, so that no sibling waits for this rollout
            if uid is not None:
                await self.board.report(uid, None)
            raise
        if raw.score is not None:
            if uid is not None:
                await self.board.report(uid, raw.score)
            return finalize(raw)
        self.counts["unscored"] += 1
        if self.settings.on_failure == "raise":
            if uid is not None:
                await self.board.report(uid, None)
            raise JudgeError(f"{failure_reason(sample, raw)} (on_failure: raise)")
        if self.settings.on_failure == "mask":  # NaN, left out by the estimator: no need to wait
            if uid is not None:
                await self.board.report(uid, None)
            self.counts["masked"] = self.counts.get("masked", 0) + 1
            return stand_in(sample, raw, [], self.settings, complete=True)
        if uid is None:  # no group id: nothing to average over
            scored, complete = [], True
        else:
            scored, complete = await self.board.report(uid, None, wait=True)
        result = stand_in(sample, raw, scored, self.settings, complete=complete)
        self.counts["neutral" if scored else "constant"] += 1
        return result

    async def _submit(self, sample: Sample) -> SampleScore:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._pending.append((sample, fut))
        if len(self._pending) >= self.settings.max_batch or self.settings.batch_window_s == 0:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.settings.batch_window_s, self._flush)
        return await fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[Sample, asyncio.Future]]) -> None:
        try:
            raws = await score_samples([s for s, _ in batch], self.context)
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.monitor_batch([s for s, _ in batch], raws)
        for (_, fut), raw in zip(batch, raws):
            if not fut.done():
                fut.set_result(raw)

    def monitor_batch(self, samples, raws) -> dict[str, float]:
        """The gaming monitors over a scored batch (a window of rollouts): warnings on crossings, and
        the batch's reward-length correlation into every rollout's extra info (verl logs its mean)."""
        from reward.integrations.monitors import RolloutFacts

        facts = [RolloutFacts(group=s.uid or str(i), reward=r.score, length=int(r.extra.get("monitor_length") or 0),
                              routine=None if r.extra.get("monitor_escalated") is None else True,
                              escalated=bool(r.extra.get("monitor_escalated")),
                              refused=bool(r.extra.get("monitor_refused")))
                 for i, (s, r) in enumerate(zip(samples, raws)) if r.extra.get("monitor_length") is not None]
        if not facts:
            return {}
        figures = self.monitor.observe(facts)
        for r in raws:
            r.extra["monitor_length_correlation"] = figures.get("length_correlation")
        return figures
