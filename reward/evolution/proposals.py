"""The proposals file: what ``tree propose`` writes, ``tree review`` decides and ``tree apply`` reads.

A YAML mapping (models below, strict: an unknown or mistyped field is an error that names the
file, the proposal and the field)::

    format: rubricstree-proposals/1
    base: {source, name, version, fingerprint, leaves}   # the taxonomy the figures were measured on
    measured_on: {data, rows, rows_digest, router, matcher, ...}
    baseline: {coverage, coverage_any_leaf}
    lambda_per_leaf: 0.005
    proposals:
      - id: p01
        kind: add_leaf            # add_leaf | add_node | add_edge | move
        decision: pending         # pending | accept | reject
        node: {id, title, trigger, criterion, polarity, grounding, tags}
        parents: [cm_clarity]
        predicted: {gain_alone, marginal_gain, cumulative_coverage, score}
        ...

Predicted figures assume the proposals are accepted in file order (greedy rank): accepting the
first k gives ``proposals[k-1].predicted.cumulative_coverage`` on the rows and settings of
``measured_on``. Editing a proposal's node marks its prediction stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError
from reward.textio import parse_yaml, read_text
from reward.tree.schema import LeafTags, Node

FORMAT = "rubricstree-proposals/1"
Decision = Literal["pending", "accept", "reject"]
Kind = Literal["add_leaf", "add_node", "add_edge", "move"]
GROUNDING_TODO = "TODO: name the guideline, label or consensus this leaf rests on"


class NodeDraft(BaseModel):
    """A node to add. For a leaf, ``trigger`` says when the check applies (it becomes the node's
    definition, which routers read); an internal node uses ``definition`` and has no criterion."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    trigger: str = ""
    definition: str = ""
    criterion: str | None = None
    polarity: Literal["positive", "negative"] = "positive"
    grounding: str | None = None
    tags: LeafTags = LeafTags()
    always_on: bool = False

    def to_node(self, children: tuple[str, ...] = ()) -> Node:
        """The taxonomy node (validated by the tree's own schema)."""
        return Node(id=self.id, title=self.title, definition=self.trigger or self.definition,
                    children=children, criterion=self.criterion, polarity=self.polarity,
                    grounding=self.grounding, tags=self.tags, always_on=self.always_on)


class Prediction(BaseModel):
    """Predicted coverage figures on the rows of ``measured_on`` (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    gain_alone: float = Field(description="coverage gained by this proposal applied alone")
    marginal_gain: float = Field(description="gain over the proposals ranked before it")
    cumulative_coverage: float = Field(description="coverage with this and every proposal before it")
    score: float = Field(description="marginal_gain - lambda * leaves added")
    leaves_added: int = 1
    stale: bool = Field(False, description="the proposal was edited after the prediction")


class Evidence(BaseModel):
    """The uncovered rubric items behind a proposal."""

    model_config = ConfigDict(extra="forbid")

    n_items: int = 0
    points: float = 0.0
    rows: list[str] = Field(default_factory=list)
    items: list[str] = Field(default_factory=list, description="their criteria, representative first")


class Proposal(BaseModel):
    """One change to the taxonomy.

    Kinds and their fields: ``add_leaf`` (``node`` with a criterion, ``parents``), ``add_node``
    (``node`` without criterion, ``parents``, ``children``), ``add_edge`` (existing ``target``
    gains ``parents``), ``move`` (``target`` leaves ``from_parent`` for ``to_parent``).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    kind: Kind = "add_leaf"
    decision: Decision = "pending"
    node: NodeDraft | None = None
    parents: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    target: str | None = None
    from_parent: str | None = None
    to_parent: str | None = None
    placement_alternatives: list[dict[str, Any]] = Field(default_factory=list)
    drafted_by: str = "hand"
    recommended: bool | None = None
    predicted: Prediction | None = None
    evidence: Evidence = Evidence()
    note: str = ""
    lint: list[str] = Field(default_factory=list, description=(
        "what tree lint's text rules flag in the drafted leaf (rewrite it: apply refuses it as it is)"))

    def fields_missing(self) -> str | None:
        """Why this proposal lacks a field its kind needs (None when complete)."""
        # add_leaf/add_node without parents is left to the validator: it refuses an unreachable node
        need = {"add_leaf": ("node",), "add_node": ("node", "children"),
                "add_edge": ("target", "parents"), "move": ("target", "from_parent", "to_parent")}[self.kind]
        for f in need:
            if not getattr(self, f):
                return f
        if self.kind == "add_leaf" and not (self.node and self.node.criterion and self.node.criterion.strip()):
            return "node.criterion"
        if self.kind == "add_node" and self.node and self.node.criterion is not None:
            return "node.criterion (an internal node has none: use add_leaf)"
        return None


def draft_lint(node: NodeDraft | None) -> list[str]:
    """``tree lint``'s text rules (trigger, vacuous wording, bundled checks) on a drafted leaf:
    one ``kind: message`` line per problem, empty when the draft is clean."""
    from reward.tree.lint import bundled_match, has_trigger, vacuous_reasons

    if node is None or not node.criterion:
        return []
    c = node.criterion
    out = [] if has_trigger(c) else ["missing_trigger: the criterion names no situation ('If the user ...')"]
    out += [f"vacuous: {why}" for why in vacuous_reasons(c)]
    if (frag := bundled_match(c)) is not None:
        out.append(f"bundled: '{frag}' joins a second check: split it into two leaves")
    return out


class ProposalsFile(BaseModel):
    """The whole proposals file."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["rubricstree-proposals/1"] = FORMAT
    base: dict[str, Any] = Field(default_factory=dict)
    measured_on: dict[str, Any] = Field(default_factory=dict)
    baseline: dict[str, float] = Field(default_factory=dict)
    lambda_per_leaf: float = 0.0
    proposals: list[Proposal] = Field(default_factory=list)


def load_proposals(path: str | Path) -> ProposalsFile:
    """Read and validate a proposals file; errors name the file, the proposal and the field."""
    path = Path(path)
    src = str(path)
    if not path.exists():
        raise InputError("file not found", file=src)
    text = read_text(path)  # a folder, or bytes that are not UTF-8: named with the file and line
    try:
        raw = parse_yaml(text, where=src)
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file=src) from exc
    if not isinstance(raw, dict):
        raise InputError("top level must be a mapping with 'proposals'", file=src)
    items = raw.get("proposals") or []
    if not isinstance(items, list):
        raise InputError("must be a list", file=src, field="proposals")
    props = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        ref = item.get("id", f"#{i + 1}") if isinstance(item, dict) else f"#{i + 1}"
        try:
            p = Proposal.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(first["msg"], file=src, record=f"proposal {ref}",
                             field=".".join(str(x) for x in first["loc"]) or None) from exc
        if p.id in seen:
            raise InputError("duplicate proposal id", file=src, record=f"proposal {p.id}", field="id")
        seen.add(p.id)
        props.append(p)
    try:
        return ProposalsFile.model_validate({**raw, "proposals": props})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"], file=src, field=".".join(str(x) for x in first["loc"]) or None) from exc


def save_proposals(doc: ProposalsFile, path: str | Path) -> None:
    """Write the file atomically (a kill mid-write leaves the old file, never half of one)."""
    path = Path(path)
    data = doc.model_dump(mode="json", exclude_none=True)
    text = ("# Taxonomy proposals (rubricstree tree propose). Review: set each `decision:` to accept,\n"
            "# reject or pending (or run `rubricstree tree review` here), then `rubricstree tree apply`.\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
