"""Propose new leaves where the taxonomy has gaps, ranked by predicted coverage gain per leaf.

Data flow: measure the taxonomy on the rows (:func:`reward.evolution.coverage.measure`) -> take
the positive items no leaf matches (taxonomy gaps; items a leaf matches but the router did not
activate are routing misses, not reasons for a duplicate leaf) -> cluster them
(:mod:`~reward.evolution.cluster`) -> draft one leaf per heavy cluster (:mod:`~reward.evolution.draft`)
-> predict by *simulation*: apply the candidate to an in-memory copy of the tree and measure again
with the same router, matcher and rows -> rank greedily by

    score = marginal coverage gain - lambda * leaves added          (the paper's complexity penalty)

where each step picks the candidate that raises coverage most given those already picked. The
figures written are exact for the same rows and settings when the first k proposals are accepted
unchanged: coverage after applying them is ``proposals[k-1].predicted.cumulative_coverage``.
Nothing here edits a taxonomy file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from reward.evolution.apply import apply_proposals
from reward.evolution.cluster import cluster_items
from reward.evolution.coverage import CoverageResult, RouterSpec, make_router, measure
from reward.evolution.draft import linted, llm_proposals, offline_proposal
from reward.evolution.encoder import CachedEncoder
from reward.evolution.matchers import Matcher
from reward.evolution.proposals import Prediction, Proposal, ProposalsFile
from reward.healthbench.schema import HealthBenchRow
from reward.tree.graph import RubricTree


class ProposeSettings(BaseModel):
    """How proposals are made and ranked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lambda_per_leaf: float = Field(0.005, ge=0.0, description="coverage a leaf must gain to be recommended")
    cluster_similarity: float = Field(0.6, gt=0.0, lt=1.0, description="average-linkage cosine to merge items")
    max_proposals: int = Field(10, ge=1, le=50, description="heaviest clusters drafted and ranked")
    drafter: Literal["offline", "llm"] = "offline"


async def _coverage_with(tree: RubricTree, props: Sequence[Proposal], rows, spec: RouterSpec, matcher: Matcher,
                         encoder: CachedEncoder, judge) -> tuple[float, CoverageResult]:
    # lint=False: a draft's predicted gain is measured as written; apply refuses it until it is fixed
    res = apply_proposals(tree, [p.model_copy(update={"decision": "accept"}) for p in props], lint=False)
    if res.refused:
        raise ValueError(f"proposal {res.refused[0].proposal} cannot be applied: {res.refused[0].reason}")
    cov = await measure(rows, res.tree, make_router(spec, res.tree, encoder=encoder, judge=judge), matcher)
    return cov.coverage, cov


async def propose(rows: Sequence[HealthBenchRow], tree: RubricTree, spec: RouterSpec, matcher: Matcher,
                  encoder: CachedEncoder, *, settings: ProposeSettings | None = None, judge=None,
                  base: dict | None = None, data: str | None = None, progress: bool = False) -> ProposalsFile:
    """Measure, cluster the gaps, draft and rank proposals (see the module docstring).

    Args:
        rows: the HealthBench rows the gains are measured on.
        tree: the base taxonomy.
        spec, matcher, encoder: the coverage settings (the same ones ``tree coverage`` uses).
        settings: penalty, clustering and drafting settings.
        judge: needed for the llm router, matcher or drafter.
        base: what to record about the base taxonomy (source, version, ...).
        data: the rows' file, for the record.
        progress: progress bar on stderr for the ranking.
    """
    from reward.progress import bar as progress_bar

    settings = settings or ProposeSettings()
    baseline = await measure(rows, tree, make_router(spec, tree, encoder=encoder, judge=judge), matcher)
    gaps = [i for i in baseline.items if not i.covered_any_leaf]
    clusters = cluster_items(gaps, encoder, settings.cluster_similarity)[: settings.max_proposals]
    taken = set(tree.nodes)
    drafts = [offline_proposal(f"p{k + 1:02d}", tree, c, encoder, taken) for k, c in enumerate(clusters)]
    if settings.drafter == "llm" and drafts:
        if judge is None:
            raise ValueError("the llm drafter needs a judge: give --judge-url or --judge-model")
        drafts = await llm_proposals(drafts, tree, judge, taken)
    drafts = [linted(p) for p in drafts]  # what lint still flags is recorded, and not recommended

    # Greedy ranking by exact re-measurement: n + (n-1) + ... evaluations, each cheap once the
    # encoder has seen the rows (only new leaf texts are encoded; judge answers are cached).
    chosen: list[Proposal] = []
    gains_alone: dict[str, float] = {}
    current = baseline.coverage
    remaining = list(drafts)
    n = len(drafts)
    bar = progress_bar(n * (n + 1) // 2, desc="ranking proposals", unit="eval", enabled=progress)
    try:
        while remaining:
            # lint-clean drafts rank first, so the recommended ones are a prefix of the ranking
            # (accepting the first k stays exact); flagged ones follow, measured after them
            pool = {p.id for p in remaining if not p.lint} or {p.id for p in remaining}
            scored = []
            for p in remaining if not chosen else [p for p in remaining if p.id in pool]:
                cov, _ = await _coverage_with(tree, [*chosen, p], rows, spec, matcher, encoder, judge)
                bar.update(1)
                if not chosen:
                    gains_alone[p.id] = cov - baseline.coverage
                if p.id in pool:
                    scored.append((cov, p))
            cov, best = max(scored, key=lambda x: (x[0], -drafts.index(x[1])))
            marginal = cov - current
            score = marginal - settings.lambda_per_leaf
            chosen.append(best.model_copy(update={
                "recommended": score > 0 and not best.lint,
                "predicted": Prediction(gain_alone=gains_alone[best.id], marginal_gain=marginal,
                                        cumulative_coverage=cov, score=score)}))
            remaining = [p for p in remaining if p.id != best.id]
            current = cov
    finally:
        bar.close()
    # Renumber in rank order, so p01 is the best and "accept the first k" reads naturally.
    ranked = [p.model_copy(update={"id": f"p{k + 1:02d}"}) for k, p in enumerate(chosen)]
    return ProposalsFile(
        base=base or {"source": tree.source, "name": tree.name, "leaves": len(tree.leaves),
                      **{k: v for k, v in baseline.taxonomy.items() if k == "fingerprint"}},
        measured_on={"data": data, **baseline.settings},
        baseline={"coverage": baseline.coverage, "coverage_any_leaf": baseline.coverage_any_leaf},
        lambda_per_leaf=settings.lambda_per_leaf, proposals=ranked)
