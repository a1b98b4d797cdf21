"""The router interface, its result, a registry of routers and the route-once cache.

A router reads a prompt (the conversation so far and optional context such as the user's
records), never a completion, and returns the tree leaves worth grading for it. Because it does
not look at completions, one routing serves every rollout of a GRPO group: :class:`CachedRouter`
keys routings by the prompt, keeps them in memory and in the durable verdict cache's key-value
store, so a group routes once and a rerun routes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from reward.aio import SingleFlight
from reward.judge.cache import VerdictCache
from reward.judge.types import Message
from reward.router import cues
from reward.router.cues import cue_leaves
from reward.tree.graph import RubricTree

ROUTING_NAMESPACE = "routing"
# The forced set: checks a clinician makes on every reply, whatever the question, added to the
# tree's own ``always_on`` leaves (missed emergency, dangerous advice, a dose above the maximum,
# method information after a suicidal disclosure). Each is a failure that can
# appear in a reply to any prompt and whose trigger is in the reply or in a detail mentioned in
# passing, not in the prompt's topic: false reassurance about symptoms, a factual medical error,
# home care suggested for red-flag symptoms, a length out of proportion to the question.
# Fabricated record data is checked where there are records or tool results (context, tool
# calls), and over-escalation of a minor complaint on every prompt that is not urgent (the
# urgency rule, ``ROUTINE_GUARDS``). Everything else is routed
# (relevance, the urgency rule, cues, context); the set stays at most 8 leaves
# (``tests/reward/router/test_forced_set.py``). ``always_on=[]`` drops these extras; ids absent
# from a tree are skipped.
DEFAULT_ALWAYS_ON = ("cm_false_reassurance", "ms_ddx_factual_error", "sf_home_care_instead_of_emergency",
                     "cm_proportional_length")
# The triage guard of a prompt the urgency rule calls routine: sending a minor complaint to the
# emergency department (its urgent counterpart, home care for red flags, is in the forced set).
TRIAGE_GUARD_ROUTINE = "sf_over_escalation"
# The other reply-side failures of a routine prompt, whose trigger sits in the reply and not in the
# prompt's topic (so relevance does not reach them): questions before a useful answer when the user
# gave enough, and a bare "consult a doctor" in place of the answer (on an urgent prompt the check
# is that emergency advice comes first, and sending the user to a doctor is the right answer).
ROUTINE_GUARDS = (TRIAGE_GUARD_ROUTINE, "cs_needless_questions")
# Their urgent counterpart: on a prompt the urgency rule reads as an emergency, the emergency advice
# comes before any question. Its criterion speaks of the reply's order, not the prompt's topic, so
# relevance reached it on 0 of 32 held-out crises and 1 of 50 Hard rows (issue 47).
URGENT_GUARDS = ("cs_emergency_advice_first",)
# Reply-side guards (issue 46): faults any reply can commit, whatever the prompt looks like, and the
# ones a policy climbing the reward drifts toward (hedging until nothing is said, filler, the answer
# buried under caveats, a part of the question left unanswered, a bare referral in place of help).
# Embeddings match the prompt's topic, never what the reply does with it, so these are graded on every
# rollout; the conditional ones go through the applicability step like any routed leaf (a bare
# referral is right on an urgent prompt, and the step says the question cannot be answered safely).
# Over-escalation is one of them: priced by ``1 - urgency`` (reward.stages.guards), it costs next to
# nothing on a prompt read as an emergency and its full price on a plainly routine one, so it need not
# wait for the urgency rule (which read a wasp sting and a twitching eyelid as urgent, 0.78-0.83, and so
# left an over-triaged reply to them unpriced).
REPLY_GUARDS = ("un_excessive_hedging", "cm_filler", "cm_main_message_first", "if_answers_all_parts",
                "un_blanket_disclaimer", TRIAGE_GUARD_ROUTINE)
MAX_FORCED = 8
# Bumped when the stored Routing shape or the key recipe changes, so old entries are not reused.
ROUTING_FORMAT = 7  # 4: un_blanket_disclaimer joined the routine guards; 5: urgency from the user's turns;
# 6: the reply-side guards on every prompt; 7: over-escalation among them, the urgent guard
# (the instruction cues are keyed by their own fingerprint, :func:`reward.router.cues.fingerprint`)


class ActiveLeaf(BaseModel):
    """One leaf the router switched on for a prompt.

    Attributes:
        leaf_id: the leaf's node id.
        relevance: the router's joint relevance for it in [0, 1] (0 for an always-on leaf the
            walk never reached).
        weight: the leaf's tree auto-weight (what it counts for in the tree score).
        reason: ``routed`` (relevance reached the threshold), ``always_on`` (a safety leaf the
            tree or the caller marks as always active), ``universal`` (a leaf marked
            ``conditional: false``: it applies to every reply), ``context`` (beneath a node marked
            ``with_context``, for a prompt with context), ``cue`` (a ``cues`` pattern of the leaf
            matched a user turn: an explicit instruction), ``reply_guard`` (a fault any reply can
            commit, :data:`REPLY_GUARDS`) or ``static`` (a static selection).
    """

    model_config = ConfigDict(frozen=True)

    leaf_id: str
    relevance: float = Field(ge=0.0, le=1.0)
    weight: float = Field(ge=0.0)
    reason: str = "routed"


class Routing(BaseModel):
    """What a router decided for one prompt.

    Attributes:
        router: the router's registry name.
        active: the active leaves, in tree file order.
        threshold: the relevance threshold that was applied (None for a static selection).
        safety_threshold: the threshold applied on the safety branches (lower than
            ``threshold`` for an urgent prompt; None for a static selection).
        urgency: the router's estimate that the prompt may need emergency care, in [0, 1]
            (None when the router does not estimate it).
        n_judge_calls: judge items the routing asked for (urgency + relevance), whether the
            judge graded them or its verdict cache answered; 0 for routers without a judge.
        n_rounds: batches of judge calls made one after another (the routing's sequential
            latency in judge round trips); 0 for routers without a judge.
        with_tool_calls: the rollout carries tool calls, so the branches that need them were
            eligible.
        n_failures: judge items that failed during routing (each treated as relevant).
        failed_nodes: ids of the nodes whose relevance call failed ("urgency" for that call).
        expanded: internal nodes the walk expanded, with their joint relevance.
        cached: True when this routing came from the routing cache instead of being computed.
    """

    model_config = ConfigDict(frozen=True)

    router: str
    active: tuple[ActiveLeaf, ...]
    threshold: float | None = None
    safety_threshold: float | None = None
    urgency: float | None = None
    n_judge_calls: int = 0
    n_rounds: int = 0
    with_tool_calls: bool = False
    n_failures: int = 0
    failed_nodes: tuple[str, ...] = ()
    expanded: dict[str, float] = Field(default_factory=dict)
    cached: bool = False

    @property
    def leaf_ids(self) -> list[str]:
        return [a.leaf_id for a in self.active]

    @property
    def relevance(self) -> dict[str, float]:
        return {a.leaf_id: a.relevance for a in self.active}


Conversation = tuple[Message, ...]
# A rollout's tool calls (any JSON objects), or just whether it has some: routers use their presence.
ToolCalls = Sequence[Any] | bool | None


def as_conversation(messages: Iterable[Message | dict | Any]) -> Conversation:
    """Coerce chat turns (our Message, dicts or any object with role/content) to a tuple."""
    out = []
    for m in messages:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, dict):
            out.append(Message(role=m["role"], content=m["content"]))
        else:
            out.append(Message(role=m.role, content=m.content))
    return tuple(out)


class Router(ABC):
    """Chooses the tree leaves to grade for a prompt.

    Subclasses set ``name`` (their registry name) and implement :meth:`route`; :meth:`config`
    returns everything that changes their decision (it is part of the routing cache key).
    """

    name: ClassVar[str] = "router"

    def __init__(self, tree: RubricTree) -> None:
        self.tree = tree

    @abstractmethod
    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        """Route one prompt.

        Args:
            conversation: the chat turns before the completion.
            context: extra text the completion may draw on (the user's records, device data).
            tool_calls: the rollout's tool calls; nodes marked ``needs_tool_calls`` (the agentic
                branch) are considered only when there are some.
        """

    def route_sync(self, conversation: Sequence[Message | dict], context: str | None = None,
                   tool_calls: ToolCalls = None) -> Routing:
        """Blocking wrapper for scripts; inside a running event loop use ``await route``."""
        return asyncio.run(self.route(as_conversation(conversation), context, tool_calls))

    def config(self) -> dict[str, Any]:
        """The settings that decide this router's output (part of the cache key)."""
        return {}

    # ------------------------------------------------------------------ shared helpers
    def tool_gated(self) -> frozenset[str]:
        """Nodes that need tool calls: those marked ``needs_tool_calls`` and everything beneath
        them that has no other way in (a leaf also listed under another branch stays eligible
        through that branch)."""
        marked = [n.id for n in self.tree.nodes.values() if n.needs_tool_calls]
        gated: set[str] = set(marked)
        for nid in self.tree.topological_order:  # parents first
            if nid not in gated and nid != self.tree.root and all(
                    p in gated for p in self.tree.parents[nid]):
                gated.add(nid)
        return frozenset(gated)

    def eligible_ids(self, tool_calls: ToolCalls) -> frozenset[str]:
        """Nodes a routing may reach: all of them, less the tool-gated ones without tool calls."""
        if tool_calls:
            return frozenset(self.tree.nodes)
        return frozenset(self.tree.nodes) - self.tool_gated()

    def default_always_on(self) -> list[str]:
        """:data:`DEFAULT_ALWAYS_ON` ids that are leaves of this tree."""
        return [i for i in DEFAULT_ALWAYS_ON if i in self.tree and self.tree[i].is_leaf]

    def always_on_ids(self, extra: Iterable[str] = ()) -> list[str]:
        """Leaves marked ``always_on`` in the tree, plus ``extra`` ids, in tree file order."""
        extra = set(extra)
        unknown = [i for i in extra if i not in self.tree or not self.tree[i].is_leaf]
        if unknown:
            raise ValueError(f"always-on ids that are not leaves of '{self.tree.name}': {sorted(unknown)}")
        return [leaf.id for leaf in self.tree.leaves if leaf.always_on or leaf.id in extra]

    def standing(self, always_on: Iterable[str], context: str | None, eligible: frozenset[str],
                 universal: bool = True, conversation: Sequence[Message] = ()) -> dict[str, str]:
        """Leaves active whatever their relevance, with the reason: ``always_on`` ids, the
        reply-side guards (:data:`REPLY_GUARDS`, ``reply_guard``), leaves whose ``cues`` match a
        user turn of ``conversation`` (``cue``: an explicit instruction such as "as a table"),
        leaves that apply to every reply (``conditional: false``, when ``universal``) and, for a
        prompt with context, the leaves beneath nodes marked ``with_context``; ineligible ones
        dropped."""
        out = dict.fromkeys((i for i in always_on if i in eligible), "always_on")
        for guard in REPLY_GUARDS:
            if guard in eligible and guard in self.tree and self.tree[guard].is_leaf:
                out.setdefault(guard, "reply_guard")
        user_text = "\n".join(m.content for m in conversation if m.role == "user")
        if user_text:
            for leaf_id in cue_leaves(user_text, eligible):
                if self.tree[leaf_id].is_leaf:
                    out.setdefault(leaf_id, "cue")
            for leaf in self.tree.leaves:
                if leaf.cues and leaf.id in eligible and any(re.search(c, user_text, re.IGNORECASE)
                                                              for c in leaf.cues):
                    out.setdefault(leaf.id, "cue")
        if universal:
            for leaf in self.tree.leaves:
                if not leaf.conditional and leaf.id in eligible:
                    out.setdefault(leaf.id, "universal")
        if context is not None and context.strip():
            for node in self.tree.nodes.values():
                if node.with_context and node.id in eligible:
                    for leaf_id in self.tree.descendant_leaves[node.id]:
                        if leaf_id in eligible:
                            out.setdefault(leaf_id, "context")
        return out

    def cue_paths(self, standing: dict[str, str], expanded: dict[str, float],
                  gate: dict[str, float] | None = None) -> dict[str, float]:
        """The internal nodes above each ``cue`` leaf that the routing did not expand, along one
        path (an expanded parent first, else the first listed): added to the routing's
        ``expanded``, they make a leaf reached by a cue sit in the activated sub-DAG exactly as a
        leaf reached by relevance does, so the scoring weighs the two alike."""
        out: dict[str, float] = {}
        gate = gate or {}
        for lid, reason in standing.items():
            if reason != "cue":
                continue
            nid = lid
            while self.tree.parents.get(nid):
                parents = self.tree.parents[nid]
                p = next((x for x in parents if x in expanded or x in out), parents[0])
                if p == self.tree.root:
                    break
                if p not in expanded:
                    out[p] = min(1.0, max(0.0, gate.get(p, 1.0)))
                nid = p
        return out

    def _active(self, relevance: dict[str, float], routed: Iterable[str], standing: dict[str, str] | Iterable[str],
                reason: str = "routed") -> tuple[ActiveLeaf, ...]:
        """Active leaves in tree file order: ``routed`` ids get ``reason``, the other ``standing``
        ids their own reason (an iterable of ids means ``always_on``)."""
        routed = set(routed)
        if not isinstance(standing, dict):
            standing = dict.fromkeys(standing, "always_on")
        weights = self.tree.leaf_weights
        out = []
        for leaf in self.tree.leaves:
            if leaf.id in routed or leaf.id in standing:
                out.append(ActiveLeaf(leaf_id=leaf.id, relevance=min(1.0, max(0.0, relevance.get(leaf.id, 0.0))),
                                      weight=weights[leaf.id],
                                      reason=reason if leaf.id in routed else standing[leaf.id]))
        return tuple(out)


# ---------------------------------------------------------------------- registry
ROUTERS: dict[str, type[Router]] = {}


def register_router(name: str) -> Callable[[type[Router]], type[Router]]:
    """Class decorator adding a router to :data:`ROUTERS` under ``name``; a name is taken once."""

    def deco(cls: type[Router]) -> type[Router]:
        if name in ROUTERS:
            raise ValueError(f"a router named '{name}' is already registered ({ROUTERS[name].__qualname__})")
        cls.name = name
        ROUTERS[name] = cls
        return cls

    return deco


# ---------------------------------------------------------------------- route-once cache
def tree_fingerprint(tree: RubricTree) -> str:
    """Hash of the taxonomy's name, root, every node and every fault group: editing a node
    invalidates routings, and two trees that price faults differently are told apart."""
    payload = json.dumps([tree.name, tree.root, [n.model_dump(mode="json") for n in tree.nodes.values()],
                          [g.model_dump(mode="json") for g in tree.faults.values()]],
                         sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def routing_key(router: Router, fingerprint: str, conversation: Conversation, context: str | None,
                tool_calls: ToolCalls = None) -> str:
    # Only the presence of tool calls changes a routing: rollouts of one prompt share it.
    payload = json.dumps([ROUTING_FORMAT, cues.fingerprint(), router.name, router.config(), router.tree.name, fingerprint,
                          [[m.role, m.content] for m in conversation], context, bool(tool_calls)],
                         sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class CachedRouter(Router):
    """Wraps a router so each distinct prompt is routed once.

    Lookups go memory -> durable store (the :class:`VerdictCache` key-value table, namespace
    ``routing``) -> the wrapped router. Concurrent requests for the same prompt share one
    computation (:class:`reward.aio.SingleFlight`: on Python 3.11+ a waiter is not cancelled with
    the request it waited on). A routing in which a judge call failed is routed again (``retries`` times); if it
    still has failures it is returned (its rollouts go unscored, with the reason) but neither
    memoised nor stored, so the next batch or run routes the prompt afresh. The in-memory memo
    keeps the ``memo_size`` most recently used routings.

    Args:
        inner: the router to wrap.
        cache: durable store; None keeps routings in memory only.
        retries: extra routing attempts for a routing with failed judge calls.
        memo_size: most routings kept in memory (least recently used go first).

    Attributes:
        hits_memory, hits_durable, misses: lookup counters.
    """

    def __init__(self, inner: Router, cache: VerdictCache | None = None, *, retries: int = 1,
                 memo_size: int = 100_000) -> None:
        super().__init__(inner.tree)
        self.retries, self.memo_size = retries, memo_size
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  (an instance attribute shadows the ClassVar)
        self.cache = cache
        self._fingerprint = tree_fingerprint(inner.tree)
        self._memory: OrderedDict[str, Routing] = OrderedDict()
        self._inflight: SingleFlight[Routing] = SingleFlight()
        self.hits_memory = self.hits_durable = self.misses = 0

    def config(self) -> dict[str, Any]:
        return self.inner.config()

    def key(self, conversation: Conversation, context: str | None = None, tool_calls: ToolCalls = None) -> str:
        return routing_key(self.inner, self._fingerprint, as_conversation(conversation), context, tool_calls)

    @property
    def stats(self) -> dict[str, int]:
        return {"routing_hits_memory": self.hits_memory, "routing_hits_durable": self.hits_durable,
                "routing_misses": self.misses}

    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        conversation = as_conversation(conversation)
        key = self.key(conversation, context, tool_calls)
        if key in self._memory:
            self.hits_memory += 1
            self._memory.move_to_end(key)
            return self._memory[key].model_copy(update={"cached": True})
        routing, shared = await self._inflight.run(key, lambda: self._lookup_or_route(key, conversation, context,
                                                                                   tool_calls))
        if shared:  # the same prompt was being routed right now: its routing is this request's
            self.hits_memory += 1
            return routing.model_copy(update={"cached": True})
        return routing

    async def _lookup_or_route(self, key: str, conversation: tuple[Message, ...], context: str | None,
                               tool_calls: ToolCalls) -> Routing:
        if self.cache is not None:
            raw = self.cache.kv_get(ROUTING_NAMESPACE, key)
            if raw is not None:
                self.hits_durable += 1
                routing = Routing.model_validate_json(raw)
                self._remember(key, routing)
                return routing.model_copy(update={"cached": True})
        self.misses += 1
        routing = await self.inner.route(conversation, context, tool_calls)
        for _ in range(self.retries):
            if routing.n_failures == 0:
                break
            routing = await self.inner.route(conversation, context, tool_calls)
        routing = routing.model_copy(update={"cached": False})
        if routing.n_failures == 0:  # a degraded routing is never reused, in memory or on disk
            self._remember(key, routing)
            if self.cache is not None:  # an LLM router's routing is its judge's answers: tagged with who gave them
                judge = getattr(getattr(self.inner, "judge", None), "model_id", None)
                self.cache.kv_put(ROUTING_NAMESPACE, key, routing.model_dump_json(), judge=judge)
        return routing

    def _remember(self, key: str, routing: Routing) -> None:
        self._memory[key] = routing
        self._memory.move_to_end(key)
        while len(self._memory) > self.memo_size:
            self._memory.popitem(last=False)
