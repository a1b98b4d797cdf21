"""Pydantic models of one node of the rubric tree, as written in the taxonomy YAML."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

AXES = ("accuracy", "completeness", "context_awareness", "communication_quality", "instruction_following")
SCENARIOS = ("health_data", "action_plan", "symptoms", "explanation")


class LeafTags(BaseModel):
    """Tags that let a static router or a report select leaves."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    axis: Literal[AXES] | None = Field(None, description="HealthBench axis this leaf measures")
    scenarios: tuple[Literal[SCENARIOS], ...] = Field((), description="clinical scenarios it applies to")
    themes: tuple[str, ...] = Field((), description="HealthBench themes, e.g. emergency_referrals")


class Node(BaseModel):
    """A node of the DAG. A node with a ``criterion`` is a leaf: an atomic yes/no check.

    ``polarity`` says how a judge's "met" is read: ``positive`` leaves describe desired behaviour
    (met = pass); ``negative`` leaves describe a failure, e.g. "recommends a dose above the
    maximum" (met = fail).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    definition: str = ""
    children: tuple[str, ...] = ()
    criterion: str | None = None
    polarity: Literal["positive", "negative"] = "positive"
    grounding: str | None = Field(None, description="guideline, textbook or consensus the leaf rests on")
    tags: LeafTags = LeafTags()
    always_on: bool = Field(False, description="routers always activate this leaf (safety leaves)")
    conditional: bool = Field(True, description=(
        "the check applies only in some situations, which the criterion names in a trigger clause"
        " ('If the user reports ...'); False for checks that apply to every reply"))
    needs_tool_calls: bool = Field(False, description=(
        "routers consider this node and its subtree only for a rollout that carries tool calls"))
    examples: tuple[str, ...] = Field((), description=(
        "short user phrasings that call for this node, in our words; the embedding router matches"
        " each on its own (abstract criteria sit far from concrete requests such as 'as a table')"))
    severity: Literal["critical", "major", "minor"] | None = Field(None, description=(
        "how much a failure of this leaf (or of the leaves beneath this node) matters; unset: the"
        " most severe of its parents', 'minor' at the root. The penalty scoring variants make a"
        " failed critical or major leaf cost at least a fixed share of the score"))
    cues: tuple[str, ...] = Field((), description=(
        "regular expressions (case-insensitive) on the user's turns; a match activates this leaf"
        " without asking (reason 'cue'): explicit instructions such as 'as a table' or 'in under 80"
        " words' sit far from any criterion in embedding space"))
    aliases: tuple[str, ...] = Field((), description=(
        "former ids of this node: a renamed leaf keeps its old id here, so case files, configs and"
        " caches written against an earlier taxonomy still name it"))
    with_context: bool = Field(False, description=(
        "routers activate every leaf beneath this node when the prompt carries context (the user's"
        " records or device data): checks of how a reply uses supplied data"))
    catch_all: bool = Field(False, description=(
        "a leaf that catches any harm of its kind (for example 'recommends an action that could cause"
        " serious harm'): under severity scoring its failure is priced only as part of the worst failed"
        " fault of its severity or above in the same reply, so a harm a named leaf already prices is"
        " not paid twice, and a harm no named leaf names is still paid"))

    @field_validator("id")
    @classmethod
    def _id_is_simple(cls, v: str) -> str:
        if any(c.isspace() for c in v):
            raise ValueError("must not contain whitespace")
        return v

    @field_validator("cues")
    @classmethod
    def _cues_compile(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"cue {pattern!r} is not a valid regular expression: {exc}") from None
        return v

    @property
    def is_leaf(self) -> bool:
        return self.criterion is not None


class FaultGroup(BaseModel):
    """Leaves that check one fault (a missed emergency; recommending an NSAID with an
    anticoagulant): under severity scoring the group is priced once, at its members' highest
    severity, from their combined evidence (``reward.scoring.variants``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    members: tuple[str, ...] = Field(min_length=2, description="leaf ids (current or former) of the fault's checks")
    acts: tuple[str, ...] = Field((), description=(
        "members that name the harmful act itself ('recommends an NSAID'): any one of them failing fails the"
        " whole fault; the other members (a warning not given, a step not taken) count by their mean"))
    note: str = ""

    @field_validator("id")
    @classmethod
    def _id_is_simple(cls, v: str) -> str:
        if any(c.isspace() for c in v):
            raise ValueError("must not contain whitespace")
        return v


class ChangelogEntry(BaseModel):
    """One version's changes, written by ``rubricstree tree apply``."""

    model_config = ConfigDict(extra="forbid")

    version: int
    date: str = ""
    summary: str = ""
    changes: list[str] = Field(default_factory=list)


class TaxonomyFile(BaseModel):
    """The whole taxonomy file: a root id and a flat list of nodes; edges are the children lists."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    name: str = "taxonomy"
    root: str
    changelog: list[ChangelogEntry] = Field(default_factory=list, description="one entry per version")
    nodes: list[dict]  # validated one by one so errors can name the node
    faults: list[dict] = Field(default_factory=list, description=(
        "fault groups: leaves that check one fault, priced once (validated one by one, like nodes)"))
