"""The static router: the same leaves for every prompt, all of them or those whose tags match.

It costs nothing and is the baseline the adaptive routers are compared with; it is also what a
task with a fixed rubric (one scenario, one axis) wants.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reward.router.base import Conversation, Router, Routing, ToolCalls, register_router
from reward.tree.graph import RubricTree
from reward.tree.schema import AXES, SCENARIOS


def _as_set(name: str, values: Iterable[str] | str | None, allowed: tuple[str, ...] | None) -> frozenset[str] | None:
    if values is None:
        return None
    values = frozenset([values] if isinstance(values, str) else values)
    if allowed is not None:
        bad = sorted(values - set(allowed))
        if bad:
            raise ValueError(f"unknown {name} {bad}; known: {', '.join(allowed)}")
    return values


@register_router("static")
class StaticRouter(Router):
    """Activate every leaf, or the leaves whose tags match every filter given.

    Args:
        tree: the rubric tree.
        axes: keep leaves whose ``tags.axis`` is one of these.
        scenarios: keep leaves tagged with at least one of these scenarios.
        themes: keep leaves tagged with at least one of these themes.
        include_always_on: also activate the tree's ``always_on`` leaves (safety checks), as
            every router does by default.

    Raises:
        ValueError: an unknown axis or scenario, or filters that select no leaf.
    """

    def __init__(self, tree: RubricTree, axes: Iterable[str] | str | None = None,
                 scenarios: Iterable[str] | str | None = None, themes: Iterable[str] | str | None = None,
                 include_always_on: bool = True) -> None:
        super().__init__(tree)
        self.axes = _as_set("axes", axes, AXES)
        self.scenarios = _as_set("scenarios", scenarios, SCENARIOS)
        self.themes = _as_set("themes", themes, None)
        self.include_always_on = include_always_on
        selected = [leaf.id for leaf in tree.leaves if self._matches(leaf)]
        if not selected:
            raise ValueError(f"the static filters select no leaf of '{tree.name}': {self.config()}")
        always = self.always_on_ids() if include_always_on else []
        self._routing = Routing(router=self.name,
                                active=self._active(dict.fromkeys(selected, 1.0), selected, always, "static"))

    def _matches(self, leaf) -> bool:
        tags = leaf.tags
        return ((self.axes is None or tags.axis in self.axes)
                and (self.scenarios is None or bool(self.scenarios & set(tags.scenarios)))
                and (self.themes is None or bool(self.themes & set(tags.themes))))

    def config(self) -> dict[str, Any]:
        return {"axes": sorted(self.axes) if self.axes is not None else None,
                "scenarios": sorted(self.scenarios) if self.scenarios is not None else None,
                "themes": sorted(self.themes) if self.themes is not None else None,
                "include_always_on": self.include_always_on}

    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        if tool_calls:
            return self._routing.model_copy(update={"with_tool_calls": True})
        eligible = self.eligible_ids(None)
        return self._routing.model_copy(update={"active": tuple(a for a in self._routing.active
                                                                if a.leaf_id in eligible)})
