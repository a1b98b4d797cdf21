"""The rubric reward: route each prompt once, grade the active leaves, score every rollout.

Data flow for a batch of rollouts::

    group by prompt -> route each distinct prompt once (concurrently; CachedRouter)
      -> one judge.grade call for every (rollout x active leaf) and every row rubric item
      -> per rollout: tree score (score_tree), points score (rl_reward), combined score,
         per-leaf verdicts, per-node breakdown, failures, feedback

One grade call for the whole batch lets the judge stage requests by shared prefix (all criteria
of one rollout, all rollouts of one prompt) and de-duplicates identical items.

Scoring. ``hard`` feeds the judge's yes/no to the scorers; ``soft`` feeds p_yes (a denser reward:
expected pass for a leaf, expected points for a rubric item). ``combine`` picks the reward when the
rollout also carries HealthBench-style rubric items: ``tree`` (the tree score; the points score is
reported alongside), ``points`` (the points score) or ``mean`` (their average). A rollout without
rubric items is scored by the tree; one with no active leaf by its rubric items. ``scoring_variant``
picks the tree score's weights and failure semantics (``reward.scoring.variants``); each leaf's
reported ``weight`` and the per-node breakdown are those of the variant.

Failures. A judge failure is never a 0. If any judge item of a rollout failed (an active leaf or a
rubric item), the rollout is unscored: ``score`` is None and ``failures`` says why. We do not score
the remaining leaves: dropping a failed leaf would silently change which checks the reward stands
for, and it would do so more often for long rollouts (more calls, more chances to fail). With
``on_failure="raise"`` the first failure raises :class:`JudgeError` instead. Routing failures do not
unscore anything: the router counts a failed relevance call as relevant, so it only adds checks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Literal

from reward.aio import gather_or_cancel
from reward.errors import JudgeError
from reward.judge.base import Judge
from reward.judge.types import JudgeItem, Verdict
from reward.router.applicability import Applicability, ApplicabilityJudge
from reward.router.base import (
    CachedRouter,
    Router,
    Routing,
    tree_fingerprint,
)
from reward.router.llm import with_context
from reward.scoring.tree_score import score_tree
from reward.scoring.variants import (
    DEFAULT_SCORING_VARIANT,
    RULE_REASONS,
    check_variant,
    effective_weights,
)
from reward.stages.confirm import confirm_failures as confirm_batch
from reward.stages.feedback import reviser_feedback
from reward.stages.guards import price_scale
from reward.stages.reasoning import Grade, failure_score, graded_text
from reward.stages.rescore import Rescorer
from reward.stages.results import ItemResult, LeafResult, RolloutScore, group_key  # noqa: F401  (re-exported)
from reward.stages.rollouts import Rollout, load_rollouts, parse_rollouts  # noqa: F401  (re-exported: the records scored here)
from reward.tree.graph import RubricTree

Scoring = Literal["hard", "soft"]
Combine = Literal["tree", "points", "mean"]
OnFailure = Literal["skip", "raise"]


# ---------------------------------------------------------------------- the reward
class RubricReward:
    """Score rollouts with the rubric tree (see the module docstring).

    This is the engine: each step is off unless asked for. The reward that trains, scores and is
    measured is built from ``reward.settings.RewardSettings`` (``RewardSettings().build(judge)``:
    the stage-3 recipe's defaults), never by hand.

    Args:
        tree: the rubric tree.
        router: chooses the active leaves per prompt; wrapped in a :class:`CachedRouter` on the
            judge's durable cache unless it is one already (or ``cache_routing`` is False).
        judge: grades (conversation, completion, criterion) items.
        scoring: ``hard`` (yes/no) or ``soft`` (p_yes).
        combine: ``tree``, ``points`` or ``mean``, for rows that carry rubric items.
        on_failure: ``skip`` (the rollout is unscored, with reasons) or ``raise`` (JudgeError).
        feedback_limit: most failed checks listed in a rollout's feedback.
        scoring_variant: ``paper``, ``penalty``, ``active`` or ``penalty+active`` (the tree
            score's weights and failure semantics; default :data:`DEFAULT_SCORING_VARIANT`).
        grade: ``answer`` (the judge sees the text after ``</think>``; an unclosed think block is a
            format failure, not judged) or ``full`` (the completion as is).
        format_failure_score: the score of a format failure: a number, None (unscored), or
            ``floor``/``floor-M`` (below the worst score a finished answer to the row can get:
            ``reward.stages.reasoning.failure_score``).
        clip_below_zero: clip the points score of the row's items to [0, 1] (True here, a report's
            per-example score); the stage 3 training settings default to False (unclipped below 0).
        applicability: decide once per prompt which routed conditional leaves apply
            (``reward.router.applicability``); the others are neither graded nor scored and are
            listed in ``RolloutScore.not_applicable``. Off: every routed leaf is graded.
        confirm_failures: read every failing verdict (a positive criterion not met, a negative one
            met; leaves and rubric items) again with another prompt, and a third time when the two
            disagree; the majority stands (``reward.stages.confirm``). The extra items are counted
            in ``judge_items`` and per rollout in ``RolloutScore.confirm_items``.
        applicability_scope: the run the applicability answers belong to (a training run passes
            its own id, so its resume reuses them and another run asks afresh); None: this
            reward's own scope (``reward.router.applicability``).
        use_rubric_items: grade the rows' own rubric items (False: ``rubric_source: tree``, the
            leaves alone).
        posterior: a :class:`reward.scoring.posterior.Posterior` (``reward.stages.panel``): each
            leaf is scored at P(met | every reading of it), the judge's measured errors undone;
            None: the (confirmed) reading as it is.
        panel_judge, panel_leaves: a second judge that reads ``panel_leaves`` (None: every leaf)
            once per rollout; its reading enters the posterior (never an AND/OR of verdicts).

    Attributes:
        stats: counters over this object's lifetime (rollouts, scored, unscored, prompts routed,
            routing judge calls and failures, judge items graded, seconds routing and grading).
    """

    def __init__(self, tree: RubricTree, router: Router, judge: Judge, *, scoring: Scoring = "hard",
                 combine: Combine = "tree", on_failure: OnFailure = "skip", cache_routing: bool = True,
                 feedback_limit: int = 10, scoring_variant: str = DEFAULT_SCORING_VARIANT,
                 grade: Grade = "answer", format_failure_score: float | str | None = 0.0,
                 clip_below_zero: bool = True, applicability: bool = False,
                 applicability_threshold: float = 0.5, confirm_failures: bool = False,
                 applicability_scope: str | None = None, use_rubric_items: bool = True,
                 posterior=None, panel_judge: Judge | None = None, panel_leaves: frozenset[str] | None = None
                 ) -> None:
        check_variant(scoring_variant)
        if scoring not in ("hard", "soft"):
            raise ValueError(f"scoring must be 'hard' or 'soft', got {scoring!r}")
        if combine not in ("tree", "points", "mean"):
            raise ValueError(f"combine must be 'tree', 'points' or 'mean', got {combine!r}")
        if on_failure not in ("skip", "raise"):
            raise ValueError(f"on_failure must be 'skip' or 'raise', got {on_failure!r}")
        # Compare content, not names: every taxonomy without a ``name`` is called "taxonomy", and a
        # router on another tree would activate leaves this one lacks or weighs differently.
        if router.tree is not tree and tree_fingerprint(router.tree) != tree_fingerprint(tree):
            raise ValueError(f"the router routes on another tree ('{router.tree.name}' from {router.tree.source}) "
                             f"than the reward scores on ('{tree.name}' from {tree.source})")
        self.tree, self.judge = tree, judge
        self.scoring, self.combine, self.on_failure = scoring, combine, on_failure
        self.scoring_variant = scoring_variant
        self.feedback_limit = feedback_limit
        self.grade, self.format_failure_score = grade, format_failure_score
        self.clip_below_zero = clip_below_zero
        self.confirm_failures = confirm_failures
        self.applicability_threshold = applicability_threshold
        self.use_rubric_items = use_rubric_items
        self.rescorer = Rescorer(tree, scoring_variant=scoring_variant, combine=combine,
                                 clip_below_zero=clip_below_zero)
        graded_text("", grade)  # validates grade
        if cache_routing and not isinstance(router, CachedRouter):
            router = CachedRouter(router, judge.cache)
        self.router = router
        self.applicability = (ApplicabilityJudge(tree, judge, threshold=applicability_threshold,
                                                 scope=applicability_scope) if applicability else None)
        if panel_judge is not None and posterior is None:
            raise ValueError("a panel's readings combine through the posterior: give posterior too")
        self.posterior, self.panel_judge, self.panel_leaves = posterior, panel_judge, panel_leaves
        self.stats: dict[str, float] = dict.fromkeys(
            ["rollouts", "scored", "unscored", "prompts", "prompts_routed", "routing_judge_calls",
             "routing_failures", "active_leaves", "judge_items", "routing_s", "grading_s", "format_failures",
             "applicability_judge_calls", "not_applicable_leaves", "applicability_rescued", "confirm_items",
             "confirm_overturned", "confirm_failed_readings", "panel_items", "panel_failed_readings"], 0)

    # ------------------------------------------------------------------ routing
    async def route(self, rollouts: Sequence[Rollout | dict]) -> dict[tuple, Routing]:
        """Route each distinct prompt of ``rollouts`` once, concurrently; prompt key -> routing."""
        rollouts = parse_rollouts(rollouts)
        keys = list(dict.fromkeys(r.prompt_key for r in rollouts))
        t0 = time.perf_counter()
        routings = await gather_or_cancel(self.router.route(conv, ctx, tools) for conv, ctx, tools in keys)
        self.stats["routing_s"] += time.perf_counter() - t0
        self.stats["prompts"] += len(keys)
        for r in routings:
            if not r.cached:
                self.stats["prompts_routed"] += 1
                self.stats["routing_judge_calls"] += r.n_judge_calls
                self.stats["routing_failures"] += r.n_failures
            self.stats["active_leaves"] += len(r.active)
        return dict(zip(keys, routings))

    async def decide_applicability(self, routings: dict[tuple, Routing]) -> dict[tuple, Applicability]:
        """Per prompt key, which routed leaves apply (all of them when applicability is off or the
        routing failed); decided from the conversation and context, once per prompt."""
        out = {key: Applicability() for key in routings}
        if self.applicability is None:
            return out
        todo = [k for k, r in routings.items() if not r.n_failures]
        apps = await asyncio.gather(*(self.applicability.decide(with_context(k[0], k[1]), routings[k]) for k in todo))
        for k, a in zip(todo, apps):
            out[k] = a
            self.stats["applicability_judge_calls"] += a.n_judge_calls
            self.stats["not_applicable_leaves"] += len(a.not_applicable)
            self.stats["applicability_rescued"] += len(a.rescued)
        return out

    # ------------------------------------------------------------------ scoring
    async def score(self, rollouts: Sequence[Rollout | dict]) -> list[RolloutScore]:
        """Score ``rollouts`` (Rollout models or dicts), in order.

        Raises:
            InputError: a rollout is invalid (the error names the record and field).
            JudgeError: a judge item failed and ``on_failure="raise"``.
        """
        rollouts = parse_rollouts(rollouts)
        if not self.use_rubric_items:
            rollouts = [r.model_copy(update={"rubrics": None}) for r in rollouts]
        if not rollouts:
            return []
        routings = await self.route(rollouts)
        apps = await self.decide_applicability(routings)

        # Every (rollout x criterion) item of the batch, de-duplicated, in one grade call.
        index: dict[JudgeItem, int] = {}
        bad_when_met: dict[int, bool] = {}  # item -> whether "met" is the failing verdict
        plans: list[tuple[list[int], list[int]] | None] = []
        for r in rollouts:
            if routings[r.prompt_key].n_failures:  # unscored below: grade nothing for it
                plans.append(([], []))
                continue
            shown = graded_text(r.completion, self.grade)
            if shown.format_failure:  # no final answer: nothing for the judge
                plans.append(None)
                continue
            conv = with_context(r.conversation, r.context, r.tool_calls)
            keep = set(apps[r.prompt_key].keep(routings[r.prompt_key].leaf_ids))
            leaf_idx = [index.setdefault(JudgeItem(conversation=conv, response=shown.text,
                                                   criterion=self.tree[a.leaf_id].criterion), len(index))
                        for a in routings[r.prompt_key].active if a.leaf_id in keep]
            item_idx = [index.setdefault(JudgeItem(conversation=conv, response=shown.text,
                                                   criterion=it.criterion, points=it.points), len(index))
                        for it in (r.rubrics or [])]
            for i, a in zip(leaf_idx, (a for a in routings[r.prompt_key].active if a.leaf_id in keep)):
                bad_when_met.setdefault(i, self.tree[a.leaf_id].polarity == "negative")
            for i, it in zip(item_idx, r.rubrics or []):
                bad_when_met.setdefault(i, it.points < 0)
            plans.append((leaf_idx, item_idx))
        items = list(index)
        t0 = time.perf_counter()
        verdicts = await self.judge.grade(items, on_failure="record") if items else []
        extra, overturned = [0] * len(items), [False] * len(items)
        reads = [[bool(v.met) == bad_when_met[i]] if v.ok else [] for i, v in enumerate(verdicts)]
        if self.confirm_failures and items:
            conf = await confirm_batch(self.judge, items, verdicts, [bad_when_met[i] for i in range(len(items))])
            verdicts, extra, overturned, reads = conf.verdicts, conf.extra, conf.overturned, conf.readings
            self.stats["confirm_items"] += sum(extra)
            self.stats["confirm_overturned"] += sum(overturned)
            self.stats["confirm_failed_readings"] += conf.failed_readings
        panel_reads = await self._panel_readings(items, rollouts, plans, routings, bad_when_met)
        for i in panel_reads:
            extra[i] += 1
        self.stats["grading_s"] += time.perf_counter() - t0
        self.stats["judge_items"] += len(items) + sum(extra)
        evidence = {i: [reads[i], panel_reads.get(i, [])] for i in range(len(items))} if self.posterior else {}

        out = []
        for r, plan in zip(rollouts, plans):
            if plan is None:
                self.stats["rollouts"] += 1
                self.stats["format_failures"] += 1
                fail = failure_score(self.format_failure_score,
                                     self._worst(r, routings[r.prompt_key], apps[r.prompt_key]))
                self.stats["scored" if fail is not None else "unscored"] += 1
                # the prompt was routed and its applicability step ran all the same: the record says
                # so, and a group whose rollouts are all unfinished still counts the cost (stages.cost)
                out.append(RolloutScore(id=r.id, score=fail, scoring=self.scoring,
                                        combine=self.combine, format_failure=True,
                                        routing=self._routing_info(routings[r.prompt_key], apps[r.prompt_key]),
                                        feedback="unclosed <think>: no final answer to grade"))
                continue
            leaf_idx, item_idx = plan
            res = self._score_one(r, routings[r.prompt_key], [verdicts[i] for i in leaf_idx],
                                  [verdicts[i] for i in item_idx], apps[r.prompt_key],
                                  [evidence[i] for i in leaf_idx] if evidence else None)
            for res_part, idx in ((res.leaves, leaf_idx), (res.rubric_items, item_idx)):
                for one, i in zip(res_part, idx):
                    one.readings, one.overturned = 1 + extra[i], overturned[i]
            res.confirm_items = sum(extra[i] for i in leaf_idx + item_idx)
            if res.failures and self.on_failure == "raise":
                raise JudgeError(f"rollout '{r.id}': {len(res.failures)} judge item(s) failed; "
                                 f"first: {res.failures[0]}")
            self.stats["rollouts"] += 1
            self.stats["scored" if res.scored else "unscored"] += 1
            out.append(res)
        for r, res in zip(rollouts, out):
            res.group = group_key(r.prompt_key)
        return out

    async def _panel_readings(self, items: list[JudgeItem], rollouts, plans, routings, bad_when_met
                              ) -> dict[int, list[bool]]:
        """The second judge's reading ("fails") of each panel leaf item of the batch, by item index
        (an item whose reading failed is left out: the first judge's readings stand alone)."""
        if self.panel_judge is None or not items:
            return {}
        want: set[int] = set()
        for r, plan in zip(rollouts, plans):
            if not plan:
                continue
            kept = [a for a in routings[r.prompt_key].active]
            by_criterion = {self.tree[a.leaf_id].criterion: a.leaf_id for a in kept}
            for i in plan[0]:
                lid = by_criterion.get(items[i].criterion)
                if lid is not None and (self.panel_leaves is None or lid in self.panel_leaves):
                    want.add(i)
        todo = sorted(want)
        if not todo:
            return {}
        got = await self.panel_judge.grade([items[i] for i in todo], on_failure="record")
        out = {}
        for i, v in zip(todo, got):
            if v.ok:
                out[i] = [bool(v.met) == bad_when_met[i]]
            else:
                self.stats["panel_failed_readings"] += 1
        self.stats["panel_items"] += len(todo)
        return out

    async def readings(self, rollouts: Sequence[Rollout | dict], results: Sequence[RolloutScore]
                       ) -> dict[str, dict[str, Any]]:
        """Every reading failure confirmation could take, for each scored rollout of ``results``:
        ``{id: {"leaves": {leaf id: [p1, p2, p3]}, "items": [[p1, p2, p3], ...]}}``, each ``p`` the
        judge's p(criterion met) under the first prompt and the two confirmation prompts
        (``reward.stages.confirm``; in the first reading's sense; None where the reading failed).
        Stability re-sampling above temperature 0 draws the readings from these, as ``score``
        would read them, instead of dropping confirmation."""
        from reward.stages.confirm import readings as confirm_readings

        rollouts = parse_rollouts(rollouts)
        by_id = {s.id: s for s in results}
        index: dict[JudgeItem, int] = {}
        plan: dict[str, tuple[list[tuple[str, int]], list[int]]] = {}
        for r in rollouts:
            s = by_id.get(r.id)
            if s is None or s.score is None or s.format_failure:
                continue
            shown = graded_text(r.completion, self.grade)
            conv = with_context(r.conversation, r.context, r.tool_calls)

            leaf_items = [JudgeItem(conversation=conv, response=shown.text, criterion=self.tree[lr.leaf_id].criterion)
                          for lr in s.leaves]
            row_items = [JudgeItem(conversation=conv, response=shown.text, criterion=it.criterion, points=it.points)
                         for it in s.rubric_items]
            plan[r.id] = ([(lr.leaf_id, index.setdefault(x, len(index))) for lr, x in zip(s.leaves, leaf_items)],
                          [index.setdefault(x, len(index)) for x in row_items])
        items = list(index)
        if not items:
            return {}
        second, third = confirm_readings(self.judge.config.mode)
        first = await self.judge.grade(items, on_failure="record")
        got2 = await self.judge.grade(items, second.template, on_failure="record")
        got3 = await self.judge.grade(items, third.template, on_failure="record")

        def p(v: Verdict, reading=None) -> float | None:
            if not v.ok:
                return None
            met, prob = (bool(v.met), v.p_yes) if reading is None else reading.met(v)
            return float(prob) if prob is not None else float(met)

        ps = [[p(a), p(b, second), p(c, third)] for a, b, c in zip(first, got2, got3)]
        return {rid: {"leaves": {lid: ps[i] for lid, i in leaves}, "items": [ps[i] for i in its]}
                for rid, (leaves, its) in plan.items()}

    def score_sync(self, rollouts: Sequence[Rollout | dict]) -> list[RolloutScore]:
        """Blocking wrapper for scripts; inside a running event loop use ``await score``."""
        return asyncio.run(self.score(rollouts))

    def _value(self, v: Verdict) -> bool | float:
        if self.scoring == "soft" and v.p_yes is not None:
            return float(v.p_yes)
        return bool(v.met)

    @staticmethod
    def _routing_info(routing: Routing, app: Applicability) -> dict[str, Any]:
        """What a score record says of its prompt's routing and applicability step (the same for a
        graded rollout and an unfinished one: the step ran and cost the same for both)."""
        return {"threshold": routing.threshold, "urgency": routing.urgency,
                "n_active": len(routing.active), "cached": routing.cached,
                "n_judge_calls": routing.n_judge_calls, "n_failures": routing.n_failures,
                "n_not_applicable": len(app.not_applicable), "n_applicability_calls": app.n_judge_calls,
                "expanded": sorted(routing.expanded)}

    def _score_one(self, r: Rollout, routing: Routing, leaf_v: list[Verdict], item_v: list[Verdict],
                   app: Applicability | None = None, evidence: list | None = None) -> RolloutScore:
        if routing.n_failures:  # a failed relevance/urgency call changes the leaf set: no score
            info = {"n_active": len(routing.active), "n_failures": routing.n_failures,
                    "failed_nodes": list(routing.failed_nodes)}
            why = (f"routing: {routing.n_failures} judge call(s) failed after a retry "
                   f"(nodes: {', '.join(routing.failed_nodes)}); the active leaf set is unknown")
            return RolloutScore(id=r.id, score=None, scoring=self.scoring, combine=self.combine, routing=info,
                                failures=[why])
        failures: list[str] = []
        leaves: list[LeafResult] = []
        met: dict[str, bool | float] = {}
        activated = set(routing.expanded)
        app = app or Applicability()
        kept = set(app.keep(routing.leaf_ids))
        active = [a for a in routing.active if a.leaf_id in kept]  # inapplicable leaves leave the score
        eff = effective_weights(self.tree, [a.leaf_id for a in active], self.scoring_variant, activated)
        language = self._language(r) if evidence else None
        for k, (a, v) in enumerate(zip(active, leaf_v)):
            node = self.tree[a.leaf_id]
            passed = p_fail = None
            if v.ok:
                met[a.leaf_id] = value = self._value(v)
                if evidence:  # the readings, with the judges' measured errors undone
                    p_fail = self.posterior.p_fail(a.leaf_id, self.tree.severity[a.leaf_id], node.polarity,
                                                   evidence[k], language)
                    met[a.leaf_id] = value = self.posterior.met_value(node.polarity, p_fail)
                passed = float(value) if node.polarity == "positive" else 1.0 - float(value)
            else:
                failures.append(f"leaf {a.leaf_id}: {v.failure}")
            leaves.append(LeafResult(leaf_id=a.leaf_id, title=node.title, polarity=node.polarity,
                                     met=v.met, p_yes=v.p_yes, passed=passed, relevance=a.relevance,
                                     weight=eff[a.leaf_id], reason=a.reason, failure=v.failure, p_fail=p_fail,
                                     panel=None if not evidence or not evidence[k][1] else evidence[k][1][0]))
        rubric_items: list[ItemResult] = []
        for i, (it, v) in enumerate(zip(r.rubrics or [], item_v)):
            if not v.ok:
                failures.append(f"rubric item {i}: {v.failure}")
            rubric_items.append(ItemResult(criterion=it.criterion, points=it.points, met=v.met,
                                           p_yes=v.p_yes, failure=v.failure))
        base = {"id": r.id, "scoring": self.scoring, "combine": self.combine,
                "scoring_variant": self.scoring_variant, "leaves": leaves,
                "rubric_items": rubric_items, "routing": self._routing_info(routing, app),
                "not_applicable": list(app.not_applicable)}
        if failures:
            return RolloutScore(score=None, failures=failures, feedback=self._feedback(leaves, rubric_items),
                                **base)

        tree_score = nodes = None
        if met:
            rule = [a.leaf_id for a in active if a.reason in RULE_REASONS]
            ts = score_tree(self.tree, met, variant=self.scoring_variant, activated=activated, rule_active=rule,
                            price_scale=price_scale(routing.urgency))
            tree_score, nodes = ts.score, {k: dict(v) for k, v in ts.nodes.items()}
        points_score = None
        if r.rubrics:
            points_score = self.rescorer.points_score([it.points for it in r.rubrics], [self._value(v) for v in item_v])
        score = self.rescorer.combined(tree_score, points_score)
        if score is None:
            failures.append("no active leaf and no rubric item: nothing to score")
        return RolloutScore(score=score, tree_score=tree_score, points_score=points_score,
                            nodes=nodes or {}, failures=failures,
                            feedback=self._feedback(leaves, rubric_items), **base)

    @staticmethod
    def _language(r: Rollout) -> str:
        from reward.router.language import language_of, user_text

        return language_of(user_text(r.conversation))

    def _worst(self, r: Rollout, routing: Routing, app: Applicability) -> float | None:
        """The lowest score a finished answer to ``r``'s row can get: every positive criterion
        missed and every negative one met (the tree and points scores are monotone in them), over
        the leaves a finished answer is graded on (inapplicable ones leave the score)."""
        points_worst = None
        kept = set(app.keep(routing.leaf_ids))
        active = [a for a in routing.active if a.leaf_id in kept]
        tree_worst = self.rescorer.tree_score({a.leaf_id: self.tree[a.leaf_id].polarity == "negative" for a in active},
                                              expanded=sorted(routing.expanded),
                                              rule_leaves=[a.leaf_id for a in active if a.reason in RULE_REASONS],
                                              price_scale=price_scale(routing.urgency))
        points = [it.points for it in (r.rubrics or [])]
        if any(p > 0 for p in points):
            points_worst = self.rescorer.points_score(points, [p < 0 for p in points])
        return self.rescorer.combined(tree_worst, points_worst)

    def rescore(self, s: RolloutScore, leaf_met: dict[str, bool | float], item_met: Sequence[bool | float]
                ) -> float | None:
        """The score ``score`` would have given ``s``'s rollout had the judge answered ``leaf_met``
        (active leaf -> verdict) and ``item_met`` (one per rubric item) instead: the same routing
        (the expanded nodes and rule-activated leaves ``s`` records) and the same scoring and
        combination (:class:`~reward.stages.rescore.Rescorer`). Stability re-sampling and the
        inspector score with this, never with a function of their own."""
        return self.rescorer.rescore(s, leaf_met, item_met)

    def _feedback(self, leaves: list[LeafResult], items: list[ItemResult]) -> str:
        return reviser_feedback(self.tree, self.scoring_variant, self.feedback_limit, leaves, items)
