"""The bounded actor-critic loop, and the critics' verdict format.

:func:`refine` runs many items in rounds: the actor drafts (or revises) every pending item in one
batch, each critic judges every parsed draft in one batch, items every critic passes are accepted,
the rest get the critics' issues as feedback for the next round. After ``max_iters`` rounds an item
still not accepted is rejected, with its last draft and feedback: a caller records it, never keeps
it. A critic answers ``{"pass": bool, "issues": [str, ...]}``; an unparseable verdict fails the round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from training.synth.llm import Messages, SynthLLM

__all__ = ["Critic", "Outcome", "Verdict", "critic_messages", "refine"]

C = TypeVar("C")
D = TypeVar("D")

VERDICT_FORMAT = ('Answer with one JSON object only: {"pass": true or false, "issues": ["...", ...]}. '
                  'List each problem as one short, concrete instruction for fixing it; '
                  'use an empty list when pass is true.')


VERDICT_SCHEMA = {"type": "object", "properties": {"pass": {"type": "boolean"},
                                                   "issues": {"type": "array", "items": {"type": "string"}}},
                  "required": ["pass", "issues"]}


class Verdict(BaseModel):
    """A critic's structured feedback."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    passed: bool = Field(alias="pass")
    issues: list[str] = Field(default_factory=list)


def critic_messages(role: str, task: str, material: str) -> Messages:
    """A critic prompt: who the critic is, what to check, the material, the answer format."""
    return [{"role": "system", "content": f"{role}\n{VERDICT_FORMAT}"},
            {"role": "user", "content": f"{task}\n\n{material}"}]


@dataclass(frozen=True)
class Critic(Generic[C, D]):
    """A named check: ``prompt(context, draft)`` gives its messages."""

    name: str
    prompt: Callable[[C, D], Messages]


@dataclass
class Outcome(Generic[D]):
    """One item's result: the accepted draft (or None), rounds used, the feedback of each round."""

    draft: D | None = None
    accepted: bool = False
    iterations: int = 0
    feedback: list[list[str]] = field(default_factory=list)

    @property
    def last_feedback(self) -> list[str]:
        return self.feedback[-1] if self.feedback else []


def refine(items: dict[str, C], *, actor: SynthLLM, critic: SynthLLM,
           draft_prompt: Callable[[C, D | None, list[str]], Messages],
           parse_draft: Callable[[dict[str, Any], C], D], critics: list[Critic[C, D]],
           max_iters: int = 3, desc: str = "draft", draft_schema: dict[str, Any] | None = None
           ) -> dict[str, Outcome[D]]:
    """Draft, criticise and revise every item, at most ``max_iters`` rounds each.

    Args:
        items: ``{key: context}``.
        actor, critic: the two roles (may share one generator).
        draft_prompt: ``(context, previous draft or None, feedback)`` -> actor messages.
        parse_draft: validated draft from the actor's JSON object (raises ValueError).
        critics: checks that must all pass.
        draft_schema: JSON schema of the actor's answer (constrains decoding where supported).
    """
    outcomes: dict[str, Outcome[D]] = {k: Outcome() for k in items}
    pending = list(items)
    for it in range(max_iters):
        if not pending:
            break
        prompts = {k: draft_prompt(items[k], outcomes[k].draft, outcomes[k].last_feedback) for k in pending}
        drafts = actor.ask_json(prompts, lambda obj: obj, desc=f"{desc} round {it + 1}", round_=it,
                                schema=draft_schema)
        parsed: dict[str, D] = {}
        for k in pending:
            outcomes[k].iterations = it + 1
            obj, err = drafts[k]
            if obj is None:
                outcomes[k].feedback.append([f"the previous answer was unusable ({err}); answer with the JSON object asked for"])
                continue
            try:
                parsed[k] = parse_draft(obj, items[k])
            except (ValueError, TypeError, KeyError) as exc:
                outcomes[k].feedback.append([f"the previous draft broke a rule: {exc}"])
                continue
            outcomes[k].draft = parsed[k]
        issues: dict[str, list[str]] = {k: [] for k in parsed}
        for check in critics:
            verdicts = critic.ask_json({k: check.prompt(items[k], d) for k, d in parsed.items()},
                                       lambda obj: Verdict.model_validate(obj), desc=f"{check.name} round {it + 1}",
                                       round_=it, schema=VERDICT_SCHEMA)
            for k in parsed:
                v, err = verdicts[k]
                if v is None:
                    issues[k].append(f"{check.name}: no usable verdict ({err})")
                elif not v.passed:
                    issues[k].extend(f"{check.name}: {i}" for i in v.issues or ["failed without a reason"])
        nxt = []
        for k in pending:
            if k in parsed and not issues[k]:
                outcomes[k].accepted = True
                outcomes[k].feedback.append([])
            else:
                if k in parsed:
                    outcomes[k].feedback.append(issues[k])
                nxt.append(k)
        pending = nxt
    return outcomes  # a rejected item keeps its last draft, for the failure record only
