"""Matchers: which leaves of a taxonomy check a given rubric item.

A rubric item (a physician's criterion for one conversation) is *covered* by a leaf when grading
a reply against the leaf would settle the item. Two matchers, one interface
(``await match(tree, items) -> [{leaf_id: score}]``, the leaves that match each item):

- ``embedding`` (default, no judge): cosine similarity between the item and the leaf's criterion
  with the packaged all-MiniLM-L6-v2; a leaf matches at ``cos >= threshold``. It is a proxy: at
  cos 0.5 two texts share a topic more often than a check, so it overstates coverage.
- ``llm`` (precision): the embedding shortlists the ``shortlist`` most similar leaves (cos at
  least ``floor``), and the judge answers one yes/no question per (item, leaf) pair: does this
  leaf check this item? Verdicts go through the judge's durable cache, so a rerun, or a new
  taxonomy version that keeps a leaf's criterion, asks nothing twice.

Leaves are compared by their criterion text alone (like with like: both are checks); negative
leaves count, since a failure check settles the item that asks for the opposite behaviour.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from reward.evolution.encoder import CachedEncoder
from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Message
from reward.tree.graph import RubricTree

DEFAULT_THRESHOLD = 0.55

# Our own wording. The item goes first (in the conversation slot) so the shortlisted leaves of one
# item share the prompt prefix on a prefix-caching server.
MATCH = Template(
    name="rubricstree-leaf-match-v1",
    mode="choice",
    system=("You maintain a taxonomy of yes/no checks used to grade replies of an AI health assistant."
            " You are shown one rubric item a physician wrote for a specific conversation, and one"
            " general check (a leaf) from the taxonomy. Decide whether grading a reply against the leaf"
            " would settle whether the rubric item is satisfied: the leaf tests the same behaviour, or"
            " its failure, in a situation that includes this one. A leaf on the same topic that tests"
            " something else does not settle it. Reply with exactly one word: yes or no."),
    user=("Rubric item:\n{{conversation}}\n\nTaxonomy leaf: {{criterion}}\n\n"
          "Does the leaf settle the rubric item? Answer yes or no."),
)


def leaf_text(tree: RubricTree, leaf_id: str) -> str:
    """What a leaf is matched by: its criterion."""
    return tree[leaf_id].criterion or ""


class Matcher(ABC):
    """Finds the leaves that check each rubric item."""

    name: ClassVar[str] = "matcher"

    def __init__(self, encoder: CachedEncoder) -> None:
        self.encoder = encoder

    def similarities(self, tree: RubricTree, items: Sequence[str]):
        """Cosine of every item (rows) with every leaf's criterion (columns, tree file order)."""
        q = self.encoder.encode(list(items))
        leaves = self.encoder.encode([leaf_text(tree, leaf.id) for leaf in tree.leaves])
        return q @ leaves.T

    @abstractmethod
    async def match(self, tree: RubricTree, items: Sequence[str]) -> list[dict[str, float]]:
        """For each item, the matching leaves with their score (cosine or p_yes)."""

    def config(self) -> dict[str, Any]:
        return {"matcher": self.name}


class EmbeddingMatcher(Matcher):
    """A leaf matches an item when their cosine reaches ``threshold``."""

    name = "embedding"

    def __init__(self, encoder: CachedEncoder, threshold: float = DEFAULT_THRESHOLD) -> None:
        super().__init__(encoder)
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"the match threshold is a cosine in [-1, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def config(self) -> dict[str, Any]:
        return {"matcher": self.name, "model": self.encoder.name, "threshold": self.threshold}

    async def match(self, tree: RubricTree, items: Sequence[str]) -> list[dict[str, float]]:
        if not items:
            return []
        sim = self.similarities(tree, items)
        ids = [leaf.id for leaf in tree.leaves]
        return [{ids[j]: float(row[j]) for j in (row >= self.threshold).nonzero()[0]} for row in sim]


class LLMMatcher(Matcher):
    """Shortlist by embedding, confirm with the judge (see the module docstring).

    Args:
        encoder: the shortlist's encoder.
        judge: answers the MATCH question (its verdict cache makes reruns free).
        shortlist: most leaves asked about per item.
        floor: leaves below this cosine are never asked about.
    """

    name = "llm"

    def __init__(self, encoder: CachedEncoder, judge, shortlist: int = 5, floor: float = 0.3) -> None:
        super().__init__(encoder)
        if shortlist < 1:
            raise ValueError(f"shortlist must be at least 1, got {shortlist}")
        self.judge, self.shortlist, self.floor = judge, int(shortlist), float(floor)
        self.failures = 0

    def config(self) -> dict[str, Any]:
        return {"matcher": self.name, "model": self.encoder.name, "judge": self.judge.model_id,
                "template": MATCH.version, "shortlist": self.shortlist, "floor": self.floor}

    async def match(self, tree: RubricTree, items: Sequence[str]) -> list[dict[str, float]]:
        import numpy as np

        if not items:
            return []
        sim = self.similarities(tree, items)
        ids = [leaf.id for leaf in tree.leaves]
        pairs: list[tuple[int, str]] = []
        for i, row in enumerate(sim):
            top = np.argsort(-row, kind="stable")[: self.shortlist]
            pairs += [(i, ids[j]) for j in top if row[j] >= self.floor]
        asks = [JudgeItem(conversation=(Message(role="item", content=items[i]),), response="",
                          criterion=leaf_text(tree, lid)) for i, lid in pairs]
        verdicts = await self.judge.grade(asks, MATCH, on_failure="record")
        out: list[dict[str, float]] = [{} for _ in items]
        for (i, lid), v in zip(pairs, verdicts):
            if not v.ok:  # unknown is not a match: counted so the report can say how many
                self.failures += 1
                continue
            if v.met:
                out[i][lid] = float(v.p_yes if v.p_yes is not None else 1.0)
        return out


MATCHERS = ("embedding", "llm")


def make_matcher(name: str, encoder: CachedEncoder, *, threshold: float = DEFAULT_THRESHOLD, judge=None,
                 shortlist: int = 5, floor: float = 0.3) -> Matcher:
    """The matcher ``name`` (``embedding`` or ``llm``; the latter needs ``judge``)."""
    if name == "embedding":
        return EmbeddingMatcher(encoder, threshold)
    if name == "llm":
        if judge is None:
            raise ValueError("the llm matcher needs a judge: give --judge-url or --judge-model")
        return LLMMatcher(encoder, judge, shortlist=shortlist, floor=floor)
    raise ValueError(f"unknown matcher '{name}'; known: {', '.join(MATCHERS)}")
