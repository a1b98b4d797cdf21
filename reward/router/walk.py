"""The top-down walk over the rubric DAG with conditional relevance, shared by tree routers.

Data flow: the root is expanded; each round asks one batch of questions, one per edge
(parent -> child) leaving the frontier, "given that the parent applies, does the child?", and
gets p(child | parent) in [0, 1] (or None for a failed question: counted as 1, relevant). A
node's joint relevance is the product of the conditionals along its best root path (max over
parents, for a node of the DAG with several parents). Children whose joint relevance reaches
their threshold form the next frontier (internal nodes) or become active (leaves).

Why conditionals. v1 asked each node's relevance on its own ("is the sleep area relevant?") and
multiplied these unconditional answers along the path. An unconditional answer for a leaf
already contains the doubt about its parents (a sleep-hygiene leaf is only as likely as sleep
is), so the product counted that doubt twice and deep leaves sank under any threshold. Asked
given the parent, the product of conditionals is the chain rule: the joint is an estimate of
P(leaf applies), with no double discount.

What that means for the threshold. The joint is a probability that the leaf applies, so the
threshold is a decision cut-off on a probability: activating costs a judge call per rollout when
the leaf does not apply, missing costs an ungraded check when it does; the Bayes cut-off is
``cost_false_activation / (cost_false_activation + cost_miss)``. A missed safety check in an
emergency costs far more than an extra call, hence a lower threshold for urgent prompts, applied
to the safety branches only (elsewhere urgency does not change the costs). Because every
conditional is at most 1, the joint never grows down a path: a node below the threshold has no
descendant above it, so stopping the walk there loses nothing (pruning is exact), and one
threshold serves both expanding and activating. A deep leaf needs every step to be likely
(depth 4 at 0.5 needs a mean conditional of about 0.84), which is the point: it is the
probability that all of its ancestors and itself apply.

Nodes the caller marks ineligible (the agentic branch without tool calls) are never asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from reward.tree.graph import RubricTree

Edge = tuple[str, str]  # (parent, child)


@dataclass(frozen=True)
class Question:
    """One relevance question: does ``child`` apply, given that ``parent`` does? ``path`` holds
    the titles from the top of the tree down to the parent along the walk's best path (empty
    for a child of the root)."""

    parent: str
    child: str
    path: tuple[str, ...]


AskFn = Callable[[Sequence[Question]], Awaitable[Sequence[float | None]]]


@dataclass
class WalkResult:
    """What a walk found.

    Attributes:
        joint: joint relevance of every node reached (root 1.0).
        best_parent: the parent on each reached node's best path (root absent).
        expanded: internal nodes expanded (root excluded), with their joint relevance.
        routed: leaves whose joint relevance reached their threshold, in tree file order.
        failed: edges whose question failed (counted relevant).
        n_questions: relevance questions asked.
        n_rounds: batches asked one after another (the walk's sequential latency).
    """

    joint: dict[str, float] = field(default_factory=dict)
    best_parent: dict[str, str] = field(default_factory=dict)
    expanded: dict[str, float] = field(default_factory=dict)
    routed: list[str] = field(default_factory=list)
    failed: list[Edge] = field(default_factory=list)
    n_questions: int = 0
    n_rounds: int = 0


def path_titles(tree: RubricTree, best_parent: dict[str, str], node_id: str) -> list[str]:
    """Titles from the first level below the root down to ``node_id`` along the best path."""
    out, nid = [], node_id
    while nid != tree.root and nid in tree:
        out.append(tree[nid].title)
        nid = best_parent.get(nid, tree.root)
    return out[::-1]


def subtree(tree: RubricTree, roots: Sequence[str]) -> frozenset[str]:
    """``roots`` (those present in the tree) and every node beneath them."""
    seen: set[str] = set()
    todo = [r for r in roots if r in tree]
    while todo:
        nid = todo.pop()
        if nid not in seen:
            seen.add(nid)
            todo.extend(tree[nid].children)
    return frozenset(seen)


async def walk(tree: RubricTree, ask: AskFn, threshold_for: Callable[[str], float],
               eligible: Callable[[str], bool] = lambda _nid: True) -> WalkResult:
    """Walk ``tree`` from the root (see the module docstring).

    Args:
        ask: answers a batch of questions with p(child | parent) each, None for a failure.
        threshold_for: the threshold a node's joint relevance must reach (per node, so the
            safety branches can have a lower one).
        eligible: False for nodes never to consider (not asked, not reached).
    """
    res = WalkResult(joint={tree.root: 1.0})
    cond: dict[Edge, float] = {}
    frontier = [tree.root]
    while frontier:
        edges = [(p, c) for p in frontier for c in tree[p].children if eligible(c) and (p, c) not in cond]
        if edges:
            answers = await ask([Question(p, c, tuple(path_titles(tree, res.best_parent, p))) for p, c in edges])
            res.n_questions += len(edges)
            res.n_rounds += 1
            for edge, a in zip(edges, answers, strict=True):
                if a is None:
                    res.failed.append(edge)
                    a = 1.0
                cond[edge] = min(1.0, max(0.0, float(a)))
        updated: list[str] = []
        for p in frontier:
            if p != tree.root:
                res.expanded[p] = res.joint[p]
            for c in tree[p].children:
                if (p, c) not in cond:
                    continue
                j = cond[(p, c)] * res.joint[p]
                if j > res.joint.get(c, -1.0):
                    res.joint[c], res.best_parent[c] = j, p
                    updated.append(c)
        # A node whose joint rose through a better parent is expanded again: the edges already
        # asked cost nothing, only edges new to it are asked.
        frontier = [c for c in dict.fromkeys(updated)
                    if not tree[c].is_leaf and res.joint[c] >= threshold_for(c)]
    res.routed = [leaf.id for leaf in tree.leaves
                  if leaf.id in res.joint and res.joint[leaf.id] >= threshold_for(leaf.id)]
    return res
