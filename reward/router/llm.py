"""The LLM tree router: the judge walks the taxonomy DAG top-down and keeps what applies.

For one prompt it asks the judge two kinds of yes/no question, reading p_yes from one decoded
token: URGENCY once ("might this need emergency or same-day care now?"), and RELEVANCE for each
edge leaving the expanded nodes, one batched ``judge.grade`` call per round of the walk. A
RELEVANCE question shows the candidate node with its path from the top of the tree (and, for a
leaf, its criterion) and asks whether it applies *given that its parent does*: the walk
(:mod:`reward.router.walk`) multiplies these conditionals along the path, so a node's joint
relevance estimates the probability that it applies, without discounting a parent's doubt twice.
All items of a prompt share the prefix ``[instructions][conversation]`` so the judge server's
prefix cache serves them.

Thresholds: ``threshold`` everywhere, except that when urgency reaches ``urgency_cutoff`` the
nodes of the safety branches (``safety_roots`` and everything beneath them) use the lower
``emergency_threshold``: a missed safety check costs most in an emergency, and only there (see
the walk's docstring for why a threshold on a product of conditionals is a probability cut-off).
Leaves marked ``always_on`` in the tree (and any ids given in ``always_on``), leaves that apply
to every reply (``conditional: false``) and, for a prompt with context, the leaves beneath nodes
marked ``with_context`` (how a reply uses supplied data) are active whatever the walk says, and
are not asked about. Nodes marked ``needs_tool_calls`` are walked only for a rollout with tool
calls.
A failed judge call counts the edge as relevant (p = 1) and is recorded: a routing failure may
cost judge calls, never a missed check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from reward.judge.base import Judge
from reward.judge.templates import RELEVANCE, URGENCY
from reward.judge.types import JudgeItem, Message, Verdict
from reward.router.base import (
    ROUTINE_GUARDS,
    URGENT_GUARDS,
    Conversation,
    Router,
    Routing,
    ToolCalls,
    as_conversation,
    register_router,
)
from reward.router.walk import Question, subtree, walk
from reward.tree.graph import RubricTree
from reward.tree.schema import Node

DEFAULT_SAFETY_ROOTS = ("safety",)


def node_text(node: Node, path: Sequence[str] = ()) -> str:
    """What the router shows the judge for a candidate node: its path from the top of the tree
    (parents' titles, then its own), its title and definition, and a leaf's criterion."""
    lines = [f"Path: {' > '.join([*path, node.title])}",
             f"Candidate: {node.title}: {node.definition}" if node.definition.strip() else f"Candidate: {node.title}"]
    if node.is_leaf:
        lines.append(f"Criterion: {node.criterion}")
    return "\n".join(lines)


def with_context(conversation: Conversation, context: str | None, tool_calls: ToolCalls = None) -> Conversation:
    """The conversation a judge reads: context (records, device data) first, as its own turn,
    and the rollout's tool calls (JSON) last, as a ``tool_calls`` turn, when there are any."""
    import json

    out = tuple(conversation)
    if context is not None and context.strip():
        out = (Message(role="context", content=context),) + out
    if tool_calls:
        out = out + (Message(role="tool_calls", content=json.dumps(list(tool_calls), ensure_ascii=False,
                                                                   default=str)),)
    return out


def _check_unit(name: str, value: float) -> float:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


@register_router("llm")
class LLMTreeRouter(Router):
    """Route with the judge model (see the module docstring).

    Args:
        tree: the rubric tree.
        judge: the judge that answers the urgency and relevance questions.
        threshold: joint relevance needed to expand a node or activate a leaf.
        emergency_threshold: the threshold on the safety branches when urgency >= ``urgency_cutoff``.
        urgency_cutoff: urgency (p_yes of the URGENCY question) from which a prompt counts as
            an emergency.
        always_on: extra leaf ids active for every prompt, besides the tree's ``always_on`` leaves;
            None means :data:`~reward.router.base.DEFAULT_ALWAYS_ON`, ``[]`` none.
        safety_roots: the nodes whose subtrees get ``emergency_threshold`` for urgent prompts
            (those absent from the tree are ignored).
        universal: activate the leaves marked ``conditional: false`` for every prompt without
            asking (off by default: the walk asks about them like any leaf, and only the forced
            set is checked on every reply).
    """

    def __init__(self, tree: RubricTree, judge: Judge, threshold: float = 0.5,
                 emergency_threshold: float = 0.2, urgency_cutoff: float = 0.5,
                 always_on: Iterable[str] | None = None,
                 safety_roots: Iterable[str] = DEFAULT_SAFETY_ROOTS, universal: bool = False) -> None:
        super().__init__(tree)
        self.judge = judge
        self.threshold = _check_unit("threshold", threshold)
        self.emergency_threshold = _check_unit("emergency_threshold", emergency_threshold)
        self.urgency_cutoff = _check_unit("urgency_cutoff", urgency_cutoff)
        self.extra_always_on = sorted(set(self.default_always_on() if always_on is None else always_on))
        self.universal = bool(universal)
        self.always_on = self.always_on_ids(self.extra_always_on)
        self.safety_roots = tuple(safety_roots)
        self.safety_nodes = subtree(tree, self.safety_roots)

    def config(self) -> dict[str, Any]:
        return {"judge": self.judge.model_id, "relevance_template": RELEVANCE.version,
                "urgency_template": URGENCY.version, "threshold": self.threshold,
                "emergency_threshold": self.emergency_threshold, "urgency_cutoff": self.urgency_cutoff,
                "always_on": self.extra_always_on, "universal": self.universal,
                "safety_roots": list(self.safety_roots)}

    async def _ask(self, items: list[JudgeItem], template) -> list[Verdict]:
        return await self.judge.grade(items, template, on_failure="record")

    @staticmethod
    def _p_yes(v: Verdict) -> float | None:
        """p_yes of a successful verdict; None for a failure (the caller counts it relevant)."""
        if not v.ok:
            return None
        if v.p_yes is not None:
            return float(v.p_yes)
        return 1.0 if v.met else 0.0

    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        conv = with_context(as_conversation(conversation), context)
        tree = self.tree
        eligible = self.eligible_ids(tool_calls)
        state: dict[str, Any] = {"urgency": None, "emergency": False, "failed_urgency": False, "calls": 0,
                                 "urgency_asked": False}

        async def ask(questions: Sequence[Question]) -> list[float | None]:
            items = [JudgeItem(conversation=conv, response="", criterion=node_text(tree[q.child], q.path))
                     for q in questions]
            state["calls"] += len(items)
            if not state["urgency_asked"]:
                state["urgency_asked"] = True
                # Urgency only sets the safety threshold; the first round's relevance does not
                # depend on it, so both questions go out together.
                verdicts, (uv,) = await asyncio.gather(
                    self._ask(items, RELEVANCE),
                    self._ask([JudgeItem(conversation=conv, response="", criterion="")], URGENCY))
                state["calls"] += 1
                u = self._p_yes(uv)
                state["urgency"], state["failed_urgency"] = u, u is None
                state["emergency"] = u is None or u >= self.urgency_cutoff
            else:
                verdicts = await self._ask(items, RELEVANCE)
            return [self._p_yes(v) for v in verdicts]

        def threshold_for(nid: str) -> float:
            if state["emergency"] and nid in self.safety_nodes:
                return self.emergency_threshold
            return self.threshold

        # Leaves active anyway (always-on, universal, context) are not asked about.
        standing = self.standing(self.always_on, context, eligible, self.universal,
                                 as_conversation(conversation))
        walkable = eligible - standing.keys()
        res = await walk(tree, ask, threshold_for, eligible=walkable.__contains__)
        failed = (["urgency"] if state["failed_urgency"] else []) + list(dict.fromkeys(c for _, c in res.failed))
        safety_threshold = self.emergency_threshold if state["emergency"] else self.threshold
        routed = list(res.routed)
        # the urgency rule: a routine prompt's reply-side guards, an urgent one's
        guards = URGENT_GUARDS if state["emergency"] else ROUTINE_GUARDS
        routed += [g for g in guards if g in walkable and g not in routed]
        expanded = {**res.expanded, **self.cue_paths(standing, res.expanded, res.joint)}
        return Routing(router=self.name, active=self._active(res.joint, routed, standing),
                       threshold=self.threshold, safety_threshold=safety_threshold, urgency=state["urgency"],
                       n_judge_calls=state["calls"], n_rounds=res.n_rounds, with_tool_calls=bool(tool_calls),
                       n_failures=len(res.failed) + int(state["failed_urgency"]), failed_nodes=tuple(failed),
                       expanded=expanded)
