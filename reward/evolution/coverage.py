"""Coverage and residual ambiguity of a taxonomy on HealthBench rows.

For one conversation q with positive rubric items I (points > 0, what a physician says a good
reply needs) and the leaves L_active the router switches on for q::

    coverage(q)  = sum(points of items some leaf of L_active matches) / sum(points of I)
    E(q)         = 1 - coverage(q)                    # the paper's residual ambiguity

and the same against *all* leaves. The gap between the two is routing recall (a leaf exists but
was not routed); what all leaves miss is a taxonomy gap, the part new leaves can close.
Aggregates are means over conversations (the paper sums E over queries); ``by_theme`` averages
the conversations carrying a ``theme:`` tag, ``by_axis`` computes each conversation's coverage
over its items tagged ``axis:<a>`` (as HealthBench scores rubric tags) and averages those.

Data flow: rows -> router (once per conversation) and matcher (once per distinct item text) ->
:class:`CoverageResult` (per item and per row records) -> :meth:`CoverageResult.summary`.
Routing with the ``llm`` router and matching with the ``llm`` matcher go through the judge's
durable cache, so an interrupted run resumes without asking anything twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward.evolution.encoder import CachedEncoder
from reward.evolution.matchers import Matcher
from reward.healthbench.schema import HealthBenchRow
from reward.router.base import CachedRouter, Router, as_conversation, tree_fingerprint
from reward.tree.graph import RubricTree

RouterName = Literal["embedding", "static", "llm"]


class RouterSpec(BaseModel):
    """Which router coverage uses, with its overrides (None keeps the router's default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: RouterName = "embedding"
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    emergency_threshold: float | None = Field(None, ge=0.0, le=1.0)


def make_router(spec: RouterSpec, tree: RubricTree, *, encoder: CachedEncoder, judge=None) -> Router:
    """Build the router of ``spec`` on ``tree``; the embedding router shares ``encoder``."""
    from reward.router import EmbeddingRouter, LLMTreeRouter, StaticRouter

    kw: dict[str, Any] = {k: v for k, v in (("threshold", spec.threshold),
                                            ("emergency_threshold", spec.emergency_threshold)) if v is not None}
    if spec.name == "static":
        return StaticRouter(tree)
    if spec.name == "embedding":
        return EmbeddingRouter(tree, model=encoder, model_name=f"cached:{encoder.name}", **kw)
    if judge is None:
        raise ValueError("the llm router needs a judge: give --judge-url or --judge-model")
    return CachedRouter(LLMTreeRouter(tree, judge, **kw), judge.cache)


class ItemCoverage(BaseModel):
    """One positive rubric item and what covers it."""

    model_config = ConfigDict(frozen=True)

    row: str
    index: int = Field(description="position of the item in the row's rubrics")
    criterion: str
    points: float
    axes: tuple[str, ...] = ()
    themes: tuple[str, ...] = ()
    matched: dict[str, float] = Field(default_factory=dict, description="leaves that check it, with score")
    covered: bool = Field(description="some routed (active) leaf matches it")
    covered_any_leaf: bool = Field(description="some leaf of the taxonomy matches it")
    best_leaf: str | None = None
    best_similarity: float | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.row, self.index)


class RowCoverage(BaseModel):
    """One conversation: its routed leaves and coverage."""

    model_config = ConfigDict(frozen=True)

    row: str
    themes: tuple[str, ...] = ()
    active: tuple[str, ...] = ()
    n_positive_active: int = Field(0, description="active leaves of positive polarity (ones a reply can earn)")
    coverage: float
    coverage_any_leaf: float


def _tag_values(tags: Sequence[str], prefix: str) -> tuple[str, ...]:
    return tuple(t[len(prefix):] for t in tags if t.startswith(prefix))


def _share(items: Sequence[ItemCoverage], attr: str) -> float | None:
    total = sum(i.points for i in items)
    return sum(i.points for i in items if getattr(i, attr)) / total if total > 0 else None


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


class CoverageResult(BaseModel):
    """Everything one coverage run measured; :meth:`summary` gives the report."""

    taxonomy: dict[str, Any]
    settings: dict[str, Any]
    rows: list[RowCoverage]
    items: list[ItemCoverage]
    skipped_rows: list[str] = Field(default_factory=list, description="rows without positive items")
    n_negative_items: int = 0
    judge_failures: int = 0

    @property
    def coverage(self) -> float:
        return _mean([r.coverage for r in self.rows]) or 0.0

    @property
    def coverage_any_leaf(self) -> float:
        return _mean([r.coverage_any_leaf for r in self.rows]) or 0.0

    def _group(self, attr: str) -> dict[str, dict[str, Any]]:
        by_row: dict[str, list[ItemCoverage]] = {}
        for it in self.items:
            by_row.setdefault(it.row, []).append(it)
        out: dict[str, dict[str, Any]] = {}
        if attr == "themes":
            groups: dict[str, list[RowCoverage]] = {}
            for r in self.rows:
                for th in r.themes:
                    groups.setdefault(th, []).append(r)
            for th, rs in sorted(groups.items()):
                cov, cov_all = _mean([r.coverage for r in rs]), _mean([r.coverage_any_leaf for r in rs])
                out[th] = {"coverage": cov, "residual_ambiguity": 1 - cov, "coverage_any_leaf": cov_all,
                           "n_rows": len(rs)}
            return out
        per_axis: dict[str, list[tuple[float, float]]] = {}
        for items in by_row.values():
            for ax in sorted({a for i in items for a in i.axes}):
                sub = [i for i in items if ax in i.axes]
                c, ca = _share(sub, "covered"), _share(sub, "covered_any_leaf")
                if c is not None and ca is not None:
                    per_axis.setdefault(ax, []).append((c, ca))
        for ax, vals in sorted(per_axis.items()):
            cov, cov_all = _mean([v[0] for v in vals]), _mean([v[1] for v in vals])
            out[ax] = {"coverage": cov, "residual_ambiguity": 1 - cov, "coverage_any_leaf": cov_all,
                       "n_rows": len(vals), "n_items": sum(1 for i in self.items if ax in i.axes)}
        return out

    def summary(self, examples: int = 20) -> dict[str, Any]:
        """The report: overall, by theme and axis, against all leaves, and the heaviest uncovered items."""
        cov, cov_all = self.coverage, self.coverage_any_leaf
        uncovered = sorted((i for i in self.items if not i.covered), key=lambda i: (-i.points, i.row, i.index))
        return {
            "coverage": cov,
            "residual_ambiguity": 1 - cov,
            "by_theme": self._group("themes"),
            "by_axis": self._group("axes"),
            "all_leaves": {"coverage": cov_all, "residual_ambiguity": 1 - cov_all},
            "routing_gap": cov_all - cov,
            "taxonomy_gap": 1 - cov_all,
            "uncovered_examples": [
                {"row": i.row, "index": i.index, "points": i.points, "axes": list(i.axes),
                 "criterion": i.criterion, "gap": "routing" if i.covered_any_leaf else "taxonomy",
                 "matched_leaves": sorted(i.matched), "best_leaf": i.best_leaf,
                 "best_similarity": None if i.best_similarity is None else round(i.best_similarity, 4)}
                for i in uncovered[:max(0, examples)]],
            "n_rows": len(self.rows),
            "n_items": len(self.items),
            "n_items_uncovered": len(uncovered),
            "n_items_taxonomy_gap": sum(not i.covered_any_leaf for i in self.items),
            "n_negative_items_ignored": self.n_negative_items,
            "skipped_rows": self.skipped_rows,
            "active_leaves_per_row": _mean([len(r.active) for r in self.rows]) or 0.0,
            "active_leaves_per_row_median": statistics.median([len(r.active) for r in self.rows]) if self.rows else 0.0,
            "active_leaves_per_row_max": max((len(r.active) for r in self.rows), default=0),
            "rows_without_positive_leaf": [r.row for r in self.rows if not r.n_positive_active],
            "judge_failures": self.judge_failures,
            "taxonomy": self.taxonomy,
            "settings": self.settings,
        }


def rows_digest(rows: Sequence[HealthBenchRow]) -> str:
    """A short hash of the rows' ids and rubric items (what the figures were measured on)."""
    h = hashlib.sha256()
    for r in rows:
        h.update(r.prompt_id.encode())
        for it in r.rubrics:
            h.update(f"\0{it.points}\0{it.criterion}".encode())
    return h.hexdigest()[:16]


async def measure(rows: Sequence[HealthBenchRow], tree: RubricTree, router: Router, matcher: Matcher, *,
                  concurrency: int = 8, progress: bool = False, version: int | None = None) -> CoverageResult:
    """Route every row, match every positive item, and return the per-item and per-row records.

    Args:
        rows: HealthBench rows (their ``rubrics`` say what each conversation needs).
        tree: the taxonomy measured (the router must route on it).
        router: chooses each conversation's active leaves.
        matcher: finds the leaves that check each item.
        concurrency: conversations routed at once.
        progress: show a progress bar on stderr.
        version: the taxonomy file's version, for the report.
    """
    from reward.progress import bar as progress_bar

    positive = [(r, i, it) for r in rows for i, it in enumerate(r.rubrics) if it.points > 0]
    texts = list(dict.fromkeys(it.criterion for _, _, it in positive))
    matches = dict(zip(texts, await matcher.match(tree, texts)))
    sim = matcher.similarities(tree, texts) if texts else None
    leaf_ids = [leaf.id for leaf in tree.leaves]
    best = {}
    if sim is not None:
        for t, row in zip(texts, sim):
            j = int(row.argmax())
            best[t] = (leaf_ids[j], float(row[j]))

    sem = asyncio.Semaphore(max(1, concurrency))
    bar = progress_bar(len(rows), unit="row", desc="routing", enabled=progress)

    routing_failures = 0

    async def route(r: HealthBenchRow) -> frozenset[str]:
        nonlocal routing_failures
        async with sem:
            routing = await router.route(as_conversation(r.prompt))
        routing_failures += routing.n_failures  # a failed relevance call activates the node anyway
        bar.update(1)
        return frozenset(routing.leaf_ids)

    try:
        active = dict(zip([r.prompt_id for r in rows], await asyncio.gather(*(route(r) for r in rows))))
    finally:
        bar.close()

    items: list[ItemCoverage] = []
    for r, i, it in positive:
        m = matches[it.criterion]
        bl, bs = best.get(it.criterion, (None, None))
        items.append(ItemCoverage(
            row=r.prompt_id, index=i, criterion=it.criterion, points=it.points,
            axes=_tag_values(it.tags, "axis:"), themes=_tag_values(r.example_tags, "theme:"), matched=m,
            covered=bool(set(m) & active[r.prompt_id]), covered_any_leaf=bool(m), best_leaf=bl,
            best_similarity=bs))
    by_row: dict[str, list[ItemCoverage]] = {}
    for it in items:
        by_row.setdefault(it.row, []).append(it)
    row_recs, skipped = [], []
    for r in rows:
        its = by_row.get(r.prompt_id, [])
        c, ca = _share(its, "covered"), _share(its, "covered_any_leaf")
        if c is None or ca is None:
            skipped.append(r.prompt_id)
            continue
        row_recs.append(RowCoverage(row=r.prompt_id, themes=_tag_values(r.example_tags, "theme:"),
                                    active=tuple(sorted(active[r.prompt_id])),
                                    n_positive_active=sum(tree[x].polarity == "positive" for x in active[r.prompt_id]),
                                    coverage=c, coverage_any_leaf=ca))
    inner = getattr(router, "inner", router)
    return CoverageResult(
        taxonomy={"name": tree.name, "source": tree.source, "version": version, "leaves": len(tree.leaves),
                  "fingerprint": tree_fingerprint(tree)[:16]},
        settings={"router": inner.name, "router_config": inner.config(), **matcher.config(),
                  "rows": len(rows), "rows_digest": rows_digest(rows)},
        rows=row_recs, items=items, skipped_rows=skipped,
        n_negative_items=sum(1 for r in rows for it in r.rubrics if it.points <= 0),
        judge_failures=getattr(matcher, "failures", 0) + routing_failures)
