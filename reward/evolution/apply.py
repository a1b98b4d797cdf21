"""Apply accepted proposals to a taxonomy, in memory, refusing any that would break the DAG.

Each accepted proposal is applied in file order to a working copy of the nodes, and the copy is
validated by the tree's own validator (:class:`reward.tree.RubricTree`: unique ids, existing
children, no cycle, every node reachable from the root, leaves with criteria). A proposal the
validator rejects is *refused* with the validator's reason and leaves the working copy as it was;
later proposals still see the tree without it. Weights are not stored anywhere: the validated
tree recomputes them. Writing the new version to disk is :mod:`reward.evolution.taxonomy_io`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from reward.errors import TaxonomyError
from reward.evolution.proposals import GROUNDING_TODO, Proposal, draft_lint
from reward.tree.graph import RubricTree
from reward.tree.schema import Node


class Refusal(BaseModel):
    """A proposal that was not applied, and why."""

    model_config = ConfigDict(frozen=True)

    proposal: str
    reason: str


class ApplyResult(BaseModel):
    """The new node list (old order, new nodes appended) and what happened to each proposal."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tree: RubricTree
    nodes: list[Node]
    applied: list[str]
    refused: list[Refusal]
    changes: list[str]
    warnings: list[str]


def _with_children(node: Node, children: Sequence[str]) -> Node:
    return node.model_copy(update={"children": tuple(children)})


def _apply_one(nodes: dict[str, Node], p: Proposal) -> tuple[dict[str, Node], str]:
    """The node map after ``p`` (unvalidated) and a one-line description; ValueError when it
    cannot even be expressed (a missing field, an unknown node)."""
    missing = p.fields_missing()
    if missing:
        raise ValueError(f"field '{missing}' is required for a {p.kind} proposal")
    out = dict(nodes)

    def link(parent: str, child: str) -> None:
        if parent not in out:
            raise ValueError(f"parent '{parent}' is not a node")
        if out[parent].is_leaf:
            raise ValueError(f"parent '{parent}' is a leaf: a leaf cannot have children")
        if child in out[parent].children:
            raise ValueError(f"'{child}' is already a child of '{parent}'")
        out[parent] = _with_children(out[parent], [*out[parent].children, child])

    if p.kind in ("add_leaf", "add_node"):
        assert p.node is not None
        if p.node.id in out:
            raise ValueError(f"duplicate id: a node '{p.node.id}' already exists")
        out[p.node.id] = p.node.to_node(tuple(p.children) if p.kind == "add_node" else ())
        for parent in p.parents:
            link(parent, p.node.id)
        where = ", ".join(p.parents) or "no parent"
        return out, f"{p.id}: add {'leaf' if p.kind == 'add_leaf' else 'node'} {p.node.id} under {where}"
    assert p.target is not None
    if p.target not in out:
        raise ValueError(f"'{p.target}' is not a node")
    if p.kind == "add_edge":
        for parent in p.parents:
            link(parent, p.target)
        return out, f"{p.id}: link {p.target} also under {', '.join(p.parents)}"
    assert p.from_parent is not None and p.to_parent is not None
    if p.from_parent not in out or p.target not in out[p.from_parent].children:
        raise ValueError(f"'{p.target}' is not a child of '{p.from_parent}'")
    out[p.from_parent] = _with_children(out[p.from_parent],
                                        [c for c in out[p.from_parent].children if c != p.target])
    link(p.to_parent, p.target)
    return out, f"{p.id}: move {p.target} from {p.from_parent} to {p.to_parent}"


def check(tree: RubricTree, nodes: dict[str, Node], proposal_id: str) -> RubricTree:
    """Validate ``nodes`` as a tree; a :class:`TaxonomyError` names the proposal."""
    return RubricTree(list(nodes.values()), tree.root, name=tree.name, source=f"proposal {proposal_id}")


def apply_proposals(tree: RubricTree, proposals: Sequence[Proposal], *, accepted_only: bool = True,
                    lint: bool = True) -> ApplyResult:
    """Apply ``proposals`` (only those with ``decision: accept`` unless ``accepted_only`` is False).

    Returns the validated tree, refusals with reasons, a change line per applied proposal and
    warnings (e.g. a grounding still to be filled in). With ``lint`` (the default), a new leaf
    that ``tree lint``'s text rules flag, as its text stands now, is refused with the rule.
    """
    nodes = dict(tree.nodes)
    applied, refused, changes, warnings = [], [], [], []
    current = tree
    for p in proposals:
        if accepted_only and p.decision != "accept":
            continue
        issues = draft_lint(p.node) if lint and p.kind == "add_leaf" else []
        if issues:
            refused.append(Refusal(proposal=p.id, reason="tree lint flags the leaf: " + "; ".join(issues)))
            continue
        try:
            candidate, change = _apply_one(nodes, p)
            current = check(tree, candidate, p.id)
        except TaxonomyError as exc:
            where = f" (node '{exc.record}', field '{exc.field}')" if exc.record else ""
            refused.append(Refusal(proposal=p.id, reason=f"{exc.reason}{where}"))
            continue
        except ValueError as exc:
            refused.append(Refusal(proposal=p.id, reason=str(exc)))
            continue
        nodes = candidate
        applied.append(p.id)
        changes.append(change)
        if p.node is not None and p.kind == "add_leaf" and (not p.node.grounding or p.node.grounding == GROUNDING_TODO):
            warnings.append(f"{p.id}: leaf '{p.node.id}' has no grounding yet")
    return ApplyResult(tree=current, nodes=list(nodes.values()), applied=applied, refused=refused,
                       changes=changes, warnings=warnings)
