"""Run the oracle stress test: route each case's conversation, score its clean and perturbed
replies, and (optionally) the holistic baseline.

Data flow per case::

    conversation + context -> router (once per case) -> active leaves + expanded nodes
      oracle: verdicts from the labels (a labelled leaf fails, every other passes; the clean
              reply passes all) -> score_tree(variant)
      judge:  RubricReward (our judge grades every active leaf of both replies) -> tree score
      baseline (optional): one holistic 1-10 call per reply
    -> CaseResult (clean, perturbed, delta = clean - perturbed, label recall of the routing)

Oracle mode needs no model, so it isolates routing and scoring. Judge work is cached durably by
the judge (verdicts, JSON generations, routings): a killed run, restarted, grades nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from reward.aio import gather_or_cancel
from reward.router.base import Router, Routing, as_conversation
from reward.router.llm import with_context
from reward.scoring.tree_score import score_tree
from reward.scoring.variants import RULE_REASONS, SCORING_VARIANTS
from reward.stress.cases import StressCase
from reward.tree.graph import RubricTree

Mode = Literal["oracle", "judge"]


class CaseResult(BaseModel):
    """One case's outcome. Scores are None when the case is unscored (see ``failures``)."""

    id: str
    scenario: str
    perturbation: str
    clean: float | None = None
    perturbed: float | None = None
    baseline_clean: float | None = None
    baseline_perturbed: float | None = None
    n_active: int = 0
    n_not_applicable: int = Field(0, description="routed leaves the oracle labels call not applicable (not scored)")
    label_recall: float = Field(1.0, description="share of the labelled failed leaves the router activated")
    missed_labels: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    baseline_failures: list[str] = Field(default_factory=list)

    @property
    def delta(self) -> float | None:
        return None if self.clean is None or self.perturbed is None else self.clean - self.perturbed

    @property
    def baseline_delta(self) -> float | None:
        if self.baseline_clean is None or self.baseline_perturbed is None:
            return None
        return self.baseline_clean - self.baseline_perturbed


def oracle_met(tree: RubricTree, active: Sequence[str], failed: Sequence[str]) -> dict[str, bool]:
    """Judge verdicts ("criterion met") a perfect judge would give: a leaf in ``failed`` fails
    (a positive one is not met, a negative one is triggered), every other active leaf passes."""
    failed = set(failed)
    out = {}
    for lid in active:
        fails = lid in failed
        out[lid] = fails if tree[lid].polarity == "negative" else not fails
    return out


def oracle_applicable(tree: RubricTree, case: StressCase, routing: Routing) -> list[str]:
    """The routed leaves whose situation the case's labels say is present (all of them for a case
    without ``applicable`` labels); the others are not scored."""
    return [lid for lid in routing.leaf_ids if case.is_applicable(lid, tree[lid].conditional)]


def score_kwargs(routing: Routing, variant: str) -> dict[str, Any]:
    from reward.stages.guards import price_scale

    return {"variant": variant, "activated": set(routing.expanded),
            "rule_active": [a.leaf_id for a in routing.active if a.reason in RULE_REASONS],
            "price_scale": price_scale(routing.urgency)}


def oracle_scores(tree: RubricTree, case: StressCase, routing: Routing, variant: str) -> tuple[float, float]:
    """(clean, perturbed) tree scores of ``case`` with perfect verdicts and perfect applicability
    under ``variant``: inapplicable leaves leave the score; the clean reply fails ``clean_failed``
    (a safe non-answer), the perturbed one ``failed``."""
    scored = oracle_applicable(tree, case, routing)
    kw = score_kwargs(routing, variant)
    clean = score_tree(tree, oracle_met(tree, scored, case.clean_failed), **kw).score
    pert = score_tree(tree, oracle_met(tree, scored, case.failed), **kw).score
    return clean, pert


async def route_cases(router: Router, cases: Sequence[StressCase], *, concurrency: int = 4) -> list[Routing]:
    """One routing per case (a router that wraps a cache routes a repeated prompt once)."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(c: StressCase) -> Routing:
        async with sem:
            return await router.route(as_conversation(c.prompt), c.context)

    return await gather_or_cancel(one(c) for c in cases)


def _recall(routing: Routing, case: StressCase) -> tuple[float, list[str]]:
    active = set(routing.leaf_ids)
    missed = [x for x in case.failed if x not in active]
    return 1.0 - len(missed) / len(case.failed), missed


async def run_stress(cases: Sequence[StressCase], tree: RubricTree, router: Router, *, mode: Mode = "oracle",
                     variant: str, judge: Any = None, baseline_judge: Any = None, concurrency: int = 4,
                     progress: bool = True, reward: Any = None) -> tuple[list[CaseResult], list[Routing]]:
    """Score every case (see the module docstring); returns the results and the routings, in order.

    Args:
        cases: the stress cases.
        tree: the rubric tree the router routes on.
        router: any router (wrap it in a ``CachedRouter`` to route repeated prompts once).
        mode: ``oracle`` (labels are the verdicts) or ``judge`` (``judge`` grades the leaves).
        variant: the tree scoring variant.
        judge: the judge for ``judge`` mode.
        baseline_judge: the judge for the holistic baseline; None skips the baseline.
        reward: judge mode: the reward, built from its settings (``RewardSettings.build`` on
            ``router`` and ``judge``; its applicability step and failure confirmation as they are
            set); default: ``RewardSettings(scoring_variant=variant)``'s. Oracle mode reads
            applicability from the case labels and models confirmation in ``reward.stress.noise``.
    """
    from reward.progress import bar as progress_bar

    if mode == "judge" and judge is None:
        raise ValueError("judge mode needs a judge (--judge-url or --judge-model)")
    routings = await route_cases(router, cases, concurrency=concurrency)
    results = []
    for c, r in zip(cases, routings):
        recall, missed = _recall(r, c)
        n_app = len(oracle_applicable(tree, c, r))
        results.append(CaseResult(id=c.id, scenario=c.scenario, perturbation=c.perturbation,
                                  n_active=len(r.active), n_not_applicable=len(r.active) - n_app,
                                  label_recall=recall, missed_labels=missed))
    if mode == "oracle":
        for res, c, r in zip(results, cases, routings):
            res.clean, res.perturbed = oracle_scores(tree, c, r, variant)
    else:
        if reward is None:
            from reward.settings import RewardSettings

            reward = RewardSettings(scoring_variant=variant).build(judge, tree=tree, router=router,
                                                                  cache_routing=False)
        sem = asyncio.Semaphore(max(1, concurrency))
        bar = progress_bar(len(cases), unit="case", desc="judging cases", enabled=progress)

        async def one(res: CaseResult, c: StressCase) -> None:
            rows = [{"id": f"{c.id}/clean", "prompt": [m.model_dump() for m in c.prompt], "completion": c.clean,
                     "context": c.context},
                    {"id": f"{c.id}/perturbed", "prompt": [m.model_dump() for m in c.prompt],
                     "completion": c.perturbed, "context": c.context}]
            async with sem:
                clean, pert = await reward.score(rows)
            res.clean, res.perturbed = clean.score, pert.score
            res.n_not_applicable = len(clean.not_applicable)
            res.failures = clean.failures + pert.failures
            bar.update(1)

        try:
            await gather_or_cancel(one(res, c) for res, c in zip(results, cases))
        finally:
            bar.close()
    if baseline_judge is not None:
        from reward.stress.baseline import holistic_scores

        pairs = []
        for c in cases:
            conv = with_context(as_conversation(c.prompt), c.context)
            pairs += [(conv, c.clean), (conv, c.perturbed)]
        scored = await holistic_scores(baseline_judge, pairs)
        for i, res in enumerate(results):
            (bc, fc), (bp, fp) = scored[2 * i], scored[2 * i + 1]
            res.baseline_clean, res.baseline_perturbed = bc, bp
            res.baseline_failures = [f for f in (fc, fp) if f]
    return results, routings


def oracle_variant_table(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing],
                         margin: float) -> dict[str, dict[str, Any]]:
    """Oracle summary of every scoring variant on the same routings (cheap: no model)."""
    from reward.stress.metrics import summarise

    out = {}
    for v in SCORING_VARIANTS:
        rows = []
        for c, r in zip(cases, routings):
            res = CaseResult(id=c.id, scenario=c.scenario, perturbation=c.perturbation)
            res.clean, res.perturbed = oracle_scores(tree, c, r, v)
            rows.append(res)
        out[v] = summarise(rows, margin=margin, variant=v)
    return out


def with_labels(tree: RubricTree, routing: Routing, case: StressCase) -> Routing:
    """``routing`` with the case's labelled leaves added as if the router had reached them, the
    ancestors on their best-covered path expanded: the routing of a router with perfect recall,
    to measure scoring alone."""
    from reward.router.base import ActiveLeaf
    from reward.scoring.variants import best_paths

    ids = set(routing.leaf_ids) | set(case.failed)
    expanded = dict(routing.expanded)
    opened = set(expanded) | {tree.root}
    for lid in case.failed:
        for path in best_paths(tree, lid, opened):
            for anc in path[1:-1]:
                expanded.setdefault(anc, 1.0)
    have = {a.leaf_id: a for a in routing.active}
    active = tuple(have.get(leaf.id) or ActiveLeaf(leaf_id=leaf.id, relevance=1.0, weight=tree.leaf_weights[leaf.id],
                                                   reason="label")
                   for leaf in tree.leaves if leaf.id in ids)
    return routing.model_copy(update={"active": active, "expanded": expanded})
