"""What the rubric reward says of one rollout: :class:`RolloutScore` and its per-leaf and per-item
verdicts. ``rubricstree score`` writes one per line; the trainers' records and the inspector read
them; :class:`reward.stages.rescore.Rescorer` scores one again under other verdicts."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

from reward.scoring.variants import DEFAULT_SCORING_VARIANT

__all__ = ["ItemResult", "LeafResult", "RolloutScore", "group_key"]


def group_key(prompt_key: tuple) -> str:
    """A short, stable id of a prompt (``Rollout.prompt_key``: conversation, context, tools): the
    rollouts that share it form one GRPO group, and a scores file groups by it without the prompt."""
    conv, context, tools = prompt_key
    blob = json.dumps([[[m.role, m.content] for m in conv], context, bool(tools)], ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


class LeafResult(BaseModel):
    """The verdict on one active leaf for one rollout."""

    leaf_id: str
    title: str
    polarity: str
    met: bool | None
    p_yes: float | None
    passed: float | None = Field(description="pass value after polarity (hard: 0/1, soft: probability)")
    relevance: float
    weight: float = Field(description="effective weight under the scoring variant")
    reason: str
    failure: str | None = None
    readings: int = Field(1, description="judge readings behind the verdict: 2-3 when a failure was confirmed")
    overturned: bool = Field(False, description="confirmation turned the first reading's failure into a pass")
    p_fail: float | None = Field(None, description="posterior verdicts: P(the reply fails the leaf | every reading), "
                                                   "from the judges' calibrations; the score takes it in place of "
                                                   "the reading (``met`` and ``p_yes`` stay the judge's own)")
    panel: bool | None = Field(None, description="the second judge's reading (True: it read the leaf failed); "
                                                 "None: not read by a second judge")


class ItemResult(BaseModel):
    """The verdict on one of the row's own rubric items."""

    criterion: str
    points: float
    met: bool | None
    p_yes: float | None
    failure: str | None = None
    readings: int = 1
    overturned: bool = False


class RolloutScore(BaseModel):
    """The reward of one rollout with its diagnostics.

    ``score`` is None when the rollout is unscored (see ``failures``); it is in [0, 1] otherwise
    (a points score may be negative when the reward does not clip below zero).
    """

    id: str
    score: float | None
    group: str | None = Field(None, description="the prompt's id (group_key): the rollouts of one prompt share it")
    tree_score: float | None = None
    points_score: float | None = None
    scoring: str
    combine: str
    scoring_variant: str = DEFAULT_SCORING_VARIANT
    leaves: list[LeafResult] = Field(default_factory=list)
    nodes: dict[str, dict[str, float]] = Field(default_factory=dict)
    rubric_items: list[ItemResult] = Field(default_factory=list)
    routing: dict[str, Any] = Field(default_factory=dict)
    not_applicable: list[str] = Field(default_factory=list, description=(
        "routed leaves whose situation is absent from the conversation: not graded, not scored"))
    failures: list[str] = Field(default_factory=list)
    confirm_items: int = Field(0, description="extra judge items this rollout asked to confirm its failures")
    feedback: str = ""
    format_failure: bool = Field(False, description="an unclosed <think>: no final answer; scored format_failure_score")

    @property
    def scored(self) -> bool:
        return self.score is not None
