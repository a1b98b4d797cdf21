"""The LLM tree router: the judge walks the taxonomy DAG top-down and keeps what is relevant.

For one prompt it asks the judge two kinds of yes/no question, reading p_yes from one decoded
token: URGENCY once ("may this need emergency care now?"), which picks the threshold (a lower
one for emergencies, so recall wins where a miss is costly), and RELEVANCE for the children of
every expanded node ("should a reply be checked against <title: definition>?"), one batched
``judge.grade`` call per level of the walk. All items of a prompt share the prefix
``[instructions][conversation]`` so the judge server's prefix cache serves them.

Joint relevance of a node is its own p_yes times its parent's joint relevance (the product along
the root-to-node path); a node with several parents takes the best path (max over parents). A
node is expanded, or a leaf activated, when its joint relevance reaches the threshold. Leaves
marked ``always_on`` in the tree (and any ids given in ``always_on``) are active whatever the
walk says. A failed judge call counts the node as relevant (p = 1) and is recorded: a routing
failure may cost judge calls, never a missed check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from reward.judge.base import Judge
from reward.judge.templates import RELEVANCE, URGENCY
from reward.judge.types import JudgeItem, Message, Verdict
from reward.router.base import Conversation, Router, Routing, as_conversation, register_router
from reward.tree.graph import RubricTree
from reward.tree.schema import Node


def node_text(node: Node) -> str:
    """What the router shows the judge for a node: ``title: definition``."""
    return f"{node.title}: {node.definition}" if node.definition.strip() else node.title


def with_context(conversation: Conversation, context: str | None) -> Conversation:
    """The conversation the router reads: context (records, device data) first, as its own turn."""
    if context is None or not context.strip():
        return conversation
    return (Message(role="context", content=context),) + tuple(conversation)


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
        emergency_threshold: the threshold used when urgency >= ``urgency_cutoff``.
        urgency_cutoff: urgency (p_yes of the URGENCY question) from which a prompt counts as
            an emergency.
        always_on: extra leaf ids active for every prompt, besides the tree's ``always_on`` leaves.
    """

    def __init__(self, tree: RubricTree, judge: Judge, threshold: float = 0.5,
                 emergency_threshold: float = 0.2, urgency_cutoff: float = 0.5,
                 always_on: Iterable[str] | None = None) -> None:
        super().__init__(tree)
        self.judge = judge
        self.threshold = _check_unit("threshold", threshold)
        self.emergency_threshold = _check_unit("emergency_threshold", emergency_threshold)
        self.urgency_cutoff = _check_unit("urgency_cutoff", urgency_cutoff)
        self.extra_always_on = sorted(set(always_on or ()))
        self.always_on = self.always_on_ids(self.extra_always_on)

    def config(self) -> dict[str, Any]:
        return {"judge": self.judge.model_id, "relevance_template": RELEVANCE.version,
                "urgency_template": URGENCY.version, "threshold": self.threshold,
                "emergency_threshold": self.emergency_threshold, "urgency_cutoff": self.urgency_cutoff,
                "always_on": self.extra_always_on}

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

    async def route(self, conversation: Conversation, context: str | None = None) -> Routing:
        conv = with_context(as_conversation(conversation), context)
        tree = self.tree
        p: dict[str, float] = {}          # node -> its own relevance p_yes (asked once)
        joint: dict[str, float] = {tree.root: 1.0}
        expanded: dict[str, float] = {}
        failed: list[str] = []
        n_calls = 0
        urgency: float | None = None
        threshold: float | None = None
        frontier = [tree.root]

        while frontier:
            to_ask = list(dict.fromkeys(c for nid in frontier for c in tree[nid].children if c not in p))
            if to_ask:
                items = [JudgeItem(conversation=conv, response="", criterion=node_text(tree[c])) for c in to_ask]
                n_calls += len(items)
                if threshold is None:
                    # Urgency only decides the threshold; the first level's relevance does not
                    # depend on it, so both questions go out together.
                    urgency_item = JudgeItem(conversation=conv, response="", criterion="")
                    verdicts, (uv,) = await asyncio.gather(self._ask(items, RELEVANCE),
                                                           self._ask([urgency_item], URGENCY))
                    n_calls += 1
                    urgency = self._p_yes(uv)
                    if urgency is None:
                        failed.append("urgency")
                    emergency = urgency is None or urgency >= self.urgency_cutoff
                    threshold = self.emergency_threshold if emergency else self.threshold
                else:
                    verdicts = await self._ask(items, RELEVANCE)
                for c, v in zip(to_ask, verdicts):
                    pc = self._p_yes(v)
                    if pc is None:
                        failed.append(c)
                        pc = 1.0
                    p[c] = pc
            assert threshold is not None  # the root has children, so the first pass asked
            updated: list[str] = []
            for nid in frontier:
                expanded[nid] = joint[nid]
                for c in tree[nid].children:
                    j = p[c] * joint[nid]
                    if j > joint.get(c, -1.0):
                        joint[c] = j
                        updated.append(c)
            # A node whose joint relevance rose (a better parent path) is expanded again: its
            # children's p are known, so this costs no judge call, only propagation.
            frontier = [c for c in dict.fromkeys(updated) if not tree[c].is_leaf and joint[c] >= threshold]

        assert threshold is not None
        routed = [leaf.id for leaf in tree.leaves if joint.get(leaf.id, 0.0) >= threshold]
        expanded.pop(tree.root, None)
        return Routing(router=self.name, active=self._active(joint, routed, self.always_on),
                       threshold=threshold, urgency=urgency, n_judge_calls=n_calls,
                       n_failures=len(failed), failed_nodes=tuple(failed), expanded=expanded)
