"""A judge whose routing answers are not random: the embedding router's relevance, served as the
LLM router's yes-probabilities, so the LLM walk expands the way real relevance makes it expand.

A random tiny judge answers every relevance question near 0.5, so the LLM router's walk stops
at the first level or opens everything, and a routing cost measured with it says little. This
judge answers the LLM router's two questions from the bundled MiniLM embedding model:

- RELEVANCE of a node (the item's criterion is the node's ``title: definition``): for an inner
  node its *gate*, the best relevance in its subtree (what decides whether the embedding router
  opens the branch), for a leaf its own relevance; relevance = clip((cos - lo) / (hi - lo)).
- URGENCY: the embedding router's urgency.

It counts what a served judge would be sent: items (one request each on a server) and rounds,
the sequential ``grade`` calls of one prompt's walk (the urgency question goes out together
with the first level, so it adds no round). It is a stand-in for a judge model in a cost
benchmark only, never in a test of the router or of the judge.

Data flow: LLMTreeRouter -> ``grade(items, template)`` -> conversation -> embedding similarities
(cached per conversation) -> p_yes per item; counters per conversation.
"""

from __future__ import annotations

import re

from reward.judge.base import Judge
from reward.judge.render import PromptRenderer
from reward.judge.templates import RELEVANCE, URGENCY, Template
from reward.judge.types import JudgeItem, Verdict
from reward.router.embedding import EmbeddingRouter
from reward.router.llm import node_text


class _Words:
    """The least a PromptRenderer needs (nothing is rendered: answers come from embeddings)."""

    chat_template = None
    pad_token_id = eos_token_id = 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {"yes": 1, "no": 2}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab) + 1) for w in text.split()]

    def __call__(self, text: str, add_special_tokens: bool = False, split_special_tokens: bool = False):
        return {"input_ids": self.encode(text)}



def _candidate(question: str) -> str:
    """The "Candidate: ..." line of a relevance question (the node's title and definition)."""
    m = re.search(r"^Candidate: .*$", question, re.MULTILINE)
    return m.group(0) if m else question

class EmbeddingRelevanceJudge(Judge):
    """Answers RELEVANCE and URGENCY items from an :class:`EmbeddingRouter`'s similarities."""

    def __init__(self, router: EmbeddingRouter) -> None:
        super().__init__(PromptRenderer(_Words()), model_id="embedding-oracle", cache=None)
        self.router = router
        # keyed by the question's "Candidate:" line: the rest of the question (the path from the
        # top of the tree) depends on the walk, so a lookup by the whole text missed every node
        # below the first level and answered it as a failure (counted relevant: everything opened)
        self.by_text = {_candidate(node_text(router.tree[nid])): nid for nid in router.tree.topological_order}
        self._answers: dict[tuple, tuple[dict[str, float], float]] = {}
        self.rounds: dict[tuple, int] = {}
        self.items: dict[tuple, int] = {}

    def reset(self) -> None:
        self.rounds.clear()
        self.items.clear()
        self.stats.reset()

    def _for(self, conversation: tuple) -> tuple[dict[str, float], float]:
        """(p per node, urgency) for one conversation, computed once."""
        if conversation not in self._answers:
            cos, urgency = self.router.similarities(conversation)
            tree = self.router.tree
            rel = {nid: self.router.relevance(c) for nid, c in cos.items()}
            gate: dict[str, float] = {}
            for nid in reversed(tree.topological_order):
                gate[nid] = max([rel[nid]] + [gate[c] for c in tree[nid].children])
            p = {nid: rel[nid] if tree[nid].is_leaf else gate[nid] for nid in tree.topological_order}
            self._answers[conversation] = (p, urgency)
        return self._answers[conversation]

    async def _grade_uncached(self, template: Template, items: list[JudgeItem], *, on_done=None) -> list[Verdict]:
        out = []
        for it in items:
            p, urgency = self._for(it.conversation)
            if template.name == URGENCY.name:
                q = urgency
            elif template.name == RELEVANCE.name and _candidate(it.criterion) in self.by_text:
                q = p[self.by_text[_candidate(it.criterion)]]
            else:
                out.append(Verdict.failed(f"the embedding oracle answers only routing questions ({template.name})"))
                continue
            out.append(Verdict(met=q >= 0.5, p_yes=q))
        if items:
            key = items[0].conversation
            self.items[key] = self.items.get(key, 0) + len(items)
            if template.name == RELEVANCE.name:  # urgency rides along with the first level
                self.rounds[key] = self.rounds.get(key, 0) + 1
        self.stats.requests += len(items)
        if on_done is not None:
            for i, v in enumerate(out):
                on_done(i, v)
        return out

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        return (await self._grade_uncached(template, [item]))[0]
