"""The per-loop reward context of the verl adapter: judge, tree, router and scorers, built once.

:class:`RewardContext` builds what the judge-scored data sources need lazily from
:class:`reward.integrations.verl.settings.VerlRewardSettings`; :func:`get_context` keeps one per
(settings, event loop), since an HTTP judge's connection pool belongs to one loop (in verl: one
per reward worker).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from reward.errors import JudgeError
from reward.integrations.verl.settings import JUDGE_URL_ENV, VerlRewardSettings

__all__ = ["RewardContext", "get_context"]


class RewardContext:
    """What the judge-based data sources need, built lazily once and reused: the judge, the tree,
    the router and the scorers. Tests pass their own ``judge``/``tree``/``router``.

    An HTTP judge's connection pool belongs to one event loop; :func:`get_context` keeps one
    context per (settings, loop), which in verl means one per reward worker.
    """

    def __init__(self, settings: VerlRewardSettings | None = None, *, judge: Any = None, tree: Any = None,
                 router: Any = None) -> None:
        self.settings = settings or VerlRewardSettings()
        self._judge, self._tree, self._router = judge, tree, router
        self._rubric_reward = None
        self._error_scorer = None

    @property
    def judge(self):
        if self._judge is None:
            spec = self.settings.judge_settings()
            if not spec.url and not spec.model:
                raise JudgeError("this data source needs a judge: set reward_kwargs judge.url (a vLLM server) "
                                 f"or judge.model, or ${JUDGE_URL_ENV}")
            self._judge = spec.build()
        return self._judge

    @property
    def tree(self):
        if self._tree is None:
            from reward.tree import load_tree

            self._tree = load_tree(self.settings.tree)
        return self._tree

    @property
    def router(self):
        if self._router is None:
            from reward.stages.build import build_router

            self._router = build_router(self.settings, self.tree, self.judge if self.settings.router == "llm" else None)
        return self._router

    @property
    def rubric_reward(self):
        """The stage-3 reward, built from the settings in the one place rewards are built
        (``RewardSettings.build``); failures come back unscored, our policy decides what they become."""
        if self._rubric_reward is None:
            if self.settings.rubric_source == "rows":
                self._rubric_reward = self.settings.build(self.judge, on_failure="skip")
            else:
                self._rubric_reward = self.settings.build(self.judge, tree=self.tree, router=self.router,
                                                          on_failure="skip")
        return self._rubric_reward

    @property
    def error_scorer(self):
        if self._error_scorer is None:
            from reward.stages.error_rubric import ErrorRubricScorer

            self._error_scorer = ErrorRubricScorer(self.judge, self.settings.error_rubric, on_failure="skip")
        return self._error_scorer


_CONTEXTS: weakref.WeakKeyDictionary[Any, dict[str, RewardContext]] = weakref.WeakKeyDictionary()
_NO_LOOP: dict[str, RewardContext] = {}


def get_context(settings: VerlRewardSettings) -> RewardContext:
    """The context for ``settings`` in the running event loop, built on first use."""
    key = settings.model_dump_json()
    try:
        per_loop = _CONTEXTS.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        per_loop = _NO_LOOP
    ctx = per_loop.get(key)
    if ctx is None:
        ctx = per_loop[key] = RewardContext(settings)
    return ctx
