"""Does some generated rubric item test what a reference item tests? Two matchers.

:class:`EmbeddingMatcher` (offline default): cosine similarity of the bundled all-MiniLM-L6-v2
sentence embeddings, a reference item matched when its best generated item reaches ``threshold``.
:class:`LLMMatcher`: the judge answers yes/no per reference item, given the generated list as the
"response" and the reference criterion as the "criterion" (one batched ``Judge.grade`` call, its
verdict cache included); a failed verdict is reported, never counted as a match or a miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reward.judge.templates import Template

__all__ = ["MATCH_TEMPLATE", "EmbeddingMatcher", "LLMMatcher"]


class EmbeddingMatcher:
    """Cosine matcher; ``model`` is a SentenceTransformer (default: the bundled MiniLM)."""

    name = "embedding"

    def __init__(self, threshold: float = 0.7, model: Any = None) -> None:
        self.threshold = threshold
        self._model = model

    def _encode(self, texts: Sequence[str]):
        if self._model is None:
            from reward.router.embedding import load_default_model

            self._model = load_default_model()
        return self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                  show_progress_bar=False)

    def match_many(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool | None]]:
        """For each ``(reference, generated)`` pair of criterion lists: matched flags per reference item."""
        texts = sorted({t for ref, gen in pairs for t in (*ref, *gen)})
        index = {t: i for i, t in enumerate(texts)}
        vecs = self._encode(texts) if texts else None
        out: list[list[bool | None]] = []
        for ref, gen in pairs:
            if not gen:
                out.append([False] * len(ref))
                continue
            g = vecs[[index[t] for t in gen]]
            out.append([bool((g @ vecs[index[r]]).max() >= self.threshold) for r in ref])
        return out


MATCH_TEMPLATE = Template(
    name="rubricstree-rubric-match-v1",
    mode="choice",
    system=("You compare grading rubrics for an AI health assistant's reply. You are given a list of "
            "generated rubric items and one reference item. Decide whether some generated item checks "
            "essentially the same behaviour as the reference item (same idea; wording, points and detail "
            "may differ). Reply with exactly one word: yes or no."),
    user=("Generated items:\n{{response}}\n\nReference item: {{criterion}}\n\n"
          "Does some generated item check the same thing? Answer yes or no."),
)


class LLMMatcher:
    """Judge-based matcher (the published protocol uses an LLM for this)."""

    name = "llm"

    def __init__(self, judge: Any) -> None:
        self.judge = judge

    def match_many(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool | None]]:
        from reward.judge.types import JudgeItem
        from reward.runtime import run_sync

        items, where = [], []
        for p, (ref, gen) in enumerate(pairs):
            listing = "\n".join(f"- {g}" for g in gen) or "(none)"
            for j, r in enumerate(ref):
                items.append(JudgeItem(conversation=(), response=listing, criterion=r))
                where.append((p, j))
        verdicts = run_sync(self.judge.grade(items, MATCH_TEMPLATE)) if items else []
        out: list[list[bool | None]] = [[None] * len(ref) for ref, _ in pairs]
        for (p, j), v in zip(where, verdicts, strict=True):
            out[p][j] = v.met if v.ok else None
        return out
