"""Applicability: is the situation a routed leaf checks for present in the conversation?

A conditional leaf opens with its trigger ("If the user reports sudden pain in a testicle, ...").
Asked as a plain yes/no about a reply, such a leaf has no honest answer when its trigger is absent:
"met" hands out a free pass, "not met" a false failure, and a judge that errs on the absent
triggers moves a good reply's score at random. So the leaf is not scored at all: applicability
is decided once per prompt, from the conversation (and its context) alone, before any rollout is
graded, like the routing; the leaves whose situation is absent leave the score, the breakdown
and the feedback, and the score record lists them under ``not_applicable``.

Data flow per prompt::

    routing (active leaves) -> conditional leaves, less those a user's explicit instruction
    switched on (reason ``cue``) -> one APPLICABILITY yes/no per leaf (one batched judge call;
    the judge's durable verdict cache keeps the answers) -> p_yes >= threshold: applicable
    -> :class:`Applicability`

Leaves marked ``conditional: false`` apply to every reply and are never asked about. A failed
judge call counts the leaf as applicable (a failure may keep a check, never drop one) and is
recorded. A critical leaf read as absent is asked again with a second wording, from the other
side (:data:`APPLICABILITY_CONFIRM`: "is the situation absent?"), and leaves only when that
reading says absent too: a wrong "absent" would drop a failure the reply cannot be caught on.

Answers are scoped to a run (``scope``): they sit in the judge's durable cache under the run's
scope, so a resumed run asks nothing twice, while another run asks afresh. A wrong "absent" is
then never carried from one run into every later one (the old behaviour: cached for good, the
same check skipped in every epoch of every run). Why a separate, per-prompt decision rather than a third verdict ("not applicable") on
every (reply, leaf) item: it is asked once per prompt instead of once per rollout, it cannot
depend on what a reply chose to do, and a wrong decision is shared by every rollout of the group,
so it moves their scores together and leaves their order (what group normalisation uses) alone.
docs/scoring.md has the measurements.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from reward.aio import SingleFlight
from reward.judge.base import Judge
from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Message
from reward.router.base import Routing
from reward.tree.graph import RubricTree

# Leaves a router switched on without a judgement of their situation that we trust as is: a cue is
# the user's own explicit instruction ("as a table"), a label is the stress test's oracle.
NOT_ASKED_REASONS = frozenset({"cue", "label"})

APPLICABILITY = Template(
    name="rubricstree-applicability-v1",
    mode="choice",
    system=("You check whether a rubric criterion applies to a conversation with an AI health assistant,"
            " before any reply is written. A criterion usually opens with a condition (\"If the user"
            " reports ...\", \"If a user taking ...\"). Answer yes when the situation that condition names"
            " is present in the conversation: said by the user or shown in their records or device data,"
            " in any language, even if it is mentioned only in passing. Answer no when that situation is"
            " absent, for example a check about testicular pain on a question about chest pain. A"
            " criterion without a condition applies to every conversation. Do not judge any reply."
            " Reply with exactly one word: yes or no."),
    user=("Conversation:\n{{conversation}}\n\nCriterion: {{criterion}}\n\nIs the situation this"
          " criterion's condition names present in the conversation? Answer yes or no."),
)

APPLICABILITY_CONFIRM = Template(
    name="rubricstree-applicability-confirm-v1",
    mode="choice",
    system=("You are shown a conversation with an AI health assistant, before any reply is written, and one"
            " rubric criterion that opens with a condition. Decide whether the situation named by that"
            " condition is ABSENT from the conversation. It is present if the user says it, if it appears in"
            " their records or device data, in any language, or if it is mentioned only briefly; then answer"
            " no. Answer yes only when nothing in the conversation matches the condition. Do not judge any"
            " reply. Reply with exactly one word: yes or no."),
    user=("Criterion: {{criterion}}\n\nConversation:\n{{conversation}}\n\nIs the situation this criterion's"
          " condition names absent from the conversation? Answer yes or no."),
)


class Applicability(BaseModel):
    """Which routed leaves apply to one prompt.

    Attributes:
        not_applicable: leaf ids whose situation is absent (they are not scored).
        p_applicable: leaf id -> the judge's p(yes) for every leaf asked about.
        n_judge_calls: judge items asked (cache hits included).
        failed: leaf ids whose question failed (kept as applicable).
        threshold: p(yes) needed to keep a leaf.
        confirmed: critical leaves read as absent and asked again (:data:`APPLICABILITY_CONFIRM`).
        rescued: those of them the second reading kept (it did not say absent).
    """

    model_config = ConfigDict(frozen=True)

    not_applicable: tuple[str, ...] = ()
    p_applicable: dict[str, float] = Field(default_factory=dict)
    n_judge_calls: int = 0
    failed: tuple[str, ...] = ()
    threshold: float = 0.5
    confirmed: tuple[str, ...] = ()
    rescued: tuple[str, ...] = ()

    def keep(self, leaf_ids: Iterable[str]) -> list[str]:
        """``leaf_ids`` less the inapplicable ones, in their order."""
        drop = set(self.not_applicable)
        return [lid for lid in leaf_ids if lid not in drop]


def asked_leaves(tree: RubricTree, routing: Routing) -> list[str]:
    """The routed leaves whose applicability is asked: conditional, not switched on by a cue."""
    return [a.leaf_id for a in routing.active
            if tree[a.leaf_id].conditional and a.reason not in NOT_ASKED_REASONS]


class ApplicabilityJudge:
    """Decides applicability with a judge, once per distinct (prompt, routing) in this process
    (the judge's verdict cache keeps every answer across runs). Concurrent requests for the same
    prompt share one set of questions: verl's ``compute_score`` scores each rollout alone, and the
    rollouts of a group arrive together, before any answer is memoised (as
    :class:`reward.router.base.CachedRouter` shares a routing in flight).

    Args:
        tree: the rubric tree the routings come from.
        judge: answers the APPLICABILITY question (its verdict cache keeps a run's answers).
        threshold: p(yes) from which a leaf is kept.
        scope: the run the answers belong to (a resumed run passes its own again); None: this
            object's own, new scope (nothing is reused from another run).
    """

    def __init__(self, tree: RubricTree, judge: Judge, *, threshold: float = 0.5, scope: str | None = None) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"applicability threshold must be in [0, 1], got {threshold!r}")
        self.tree, self.judge, self.threshold = tree, judge, threshold
        self.scope = scope if scope is not None else f"process-{uuid.uuid4().hex}"
        self.template = dataclasses.replace(APPLICABILITY, scope=self.scope)
        self.confirm_template = dataclasses.replace(APPLICABILITY_CONFIRM, scope=self.scope)
        self._memo: dict[str, Applicability] = {}
        self._inflight: SingleFlight[Applicability] = SingleFlight()
        self.hits = self.misses = 0

    def key(self, conversation: tuple[Message, ...], leaf_ids: list[str]) -> str:
        payload = json.dumps([self.template.version, self.judge.model_id, self.threshold,
                              [[m.role, m.content] for m in conversation], leaf_ids],
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    async def decide(self, conversation: tuple[Message, ...], routing: Routing) -> Applicability:
        """The applicability of ``routing``'s leaves to ``conversation`` (context and tool calls
        already folded in as turns, as the judge reads them)."""
        asked = asked_leaves(self.tree, routing)
        if not asked:
            return Applicability(threshold=self.threshold)
        key = self.key(conversation, asked)
        if key in self._memo:
            self.hits += 1
            return self._memo[key]
        out, shared = await self._inflight.run(key, lambda: self._ask(conversation, asked))
        if shared:  # the same prompt was being decided: its answers are this request's
            self.hits += 1
            return out
        self.misses += 1
        if not out.failed:  # a decision with failed calls is asked again next time
            self._memo[key] = out
        return out

    async def _ask(self, conversation: tuple[Message, ...], asked: list[str]) -> Applicability:
        items = [JudgeItem(conversation=conversation, response="", criterion=self.tree[lid].criterion)
                 for lid in asked]
        verdicts = await self.judge.grade(items, self.template, on_failure="record")
        p: dict[str, float] = {}
        failed: list[str] = []
        for lid, v in zip(asked, verdicts):
            if not v.ok:
                failed.append(lid)
                continue
            p[lid] = _p_yes(v)
        absent = [lid for lid in asked if lid in p and p[lid] < self.threshold]
        # a critical leaf read as absent is asked again, from the other side, before it leaves
        again = [i for i, lid in enumerate(asked) if lid in absent and self.tree.severity[lid] == "critical"]
        rescued: list[str] = []
        if again:
            second = await self.judge.grade([items[i] for i in again], self.confirm_template, on_failure="record")
            for i, v in zip(again, second):
                # a failed reading settles nothing: the check stays (a failure may keep one, never drop one)
                if not v.ok or 1.0 - _p_yes(v) >= self.threshold:
                    rescued.append(asked[i])
        return Applicability(not_applicable=tuple(lid for lid in absent if lid not in rescued),
                             p_applicable=p, n_judge_calls=len(items) + len(again), failed=tuple(failed),
                             threshold=self.threshold, confirmed=tuple(asked[i] for i in again),
                             rescued=tuple(rescued))


def _p_yes(v) -> float:
    return float(v.p_yes) if v.p_yes is not None else (1.0 if v.met else 0.0)
