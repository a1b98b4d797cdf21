"""Stage 3 on the row's own rubric items, and the per-axis diagnostics of rubric scores.

:func:`grade_rubric_rows` is the paper's stage 3 reward: each rollout ``(conversation, response,
rubric items)`` goes to the judge item by item (one ``grade`` call for the batch, each distinct
item once) and is scored as HealthBench points clipped to [0, 1]; a failed item leaves the rollout
unscored, never 0. The axis helpers group rubric items by their ``axis:`` tags (or tree leaves by
``tags.axis``) so a trainer can log one mean per HealthBench axis. Both trainer adapters and the
difficulty filter use these; nothing here imports a trainer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward.stages.reasoning import failure_score, graded_text

__all__ = ["RowScore", "axes_of", "grade_rubric_rows", "leaf_axis_scores", "mean", "results_items",
           "rubric_axis_scores"]


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


@dataclass(frozen=True)
class RowScore:
    """One rollout scored on its row's rubric items: ``score`` None when an item failed
    (``failures`` says why) or the row has no item with positive points; ``met`` per item."""

    score: float | None
    met: list[float | bool] | None
    failures: list[str]
    format_failure: bool = False
    verdicts: tuple = ()  # per item, the judge's verdict (none for a format failure)


async def grade_rubric_rows(judge, rollouts: Sequence[tuple[Sequence[Mapping[str, Any]], str,
                                                            Sequence[Mapping[str, Any]]]],
                            *, soft: bool = False, grade: str = "answer",
                            format_failure_score: float | str | None = 0.0, clip: bool = True) -> list[RowScore]:
    """The paper's stage 3 reward (TRL and verl share it): each rollout ``(conversation,
    response, rubric items)`` scored as HealthBench points clipped to [0, 1]
    (``reward.healthbench.scoring.rl_reward``); met is the verdict, or ``p_yes`` with ``soft``.
    All items go to the judge in one call, each distinct (conversation, response, item) once.
    ``grade="answer"``: the judge sees the text after ``</think>``; an unclosed think block is a
    format failure scored ``format_failure_score`` without a judge call (``reward.stages.reasoning``;
    ``floor``: below the worst score a finished answer to the row can get).
    ``clip=False``: the points score is not clipped below 0 (the stage 3 training default)."""
    from reward.healthbench.scoring import rl_reward
    from reward.judge.types import JudgeItem, Message

    index: dict[JudgeItem, int] = {}
    plans = []
    for conv, text, rows in rollouts:
        shown = graded_text(text, grade)  # type: ignore[arg-type]
        if shown.format_failure:
            plans.append(None)
            continue
        text = shown.text
        msgs = tuple(Message(**m) for m in conv)
        plans.append([index.setdefault(JudgeItem(conversation=msgs, response=text, criterion=str(r["criterion"]),
                                                 points=float(r["points"])), len(index)) for r in rows])
    verdicts = await judge.grade(list(index), on_failure="record") if index else []
    out = []
    for (_, _, rows), plan in zip(rollouts, plans):
        if plan is None:
            pts = [float(r["points"]) for r in rows]
            worst = rl_reward(pts, [p < 0 for p in pts], clip=clip) if any(p > 0 for p in pts) else None
            out.append(RowScore(failure_score(format_failure_score, worst), None, [], format_failure=True))
            continue
        vs = [verdicts[i] for i in plan]
        failures = [v.failure or "unknown failure" for v in vs if not v.ok]
        if failures or not any(float(r["points"]) > 0 for r in rows):
            out.append(RowScore(None, None, failures, verdicts=tuple(vs)))
            continue
        met = [float(v.p_yes) if soft and v.p_yes is not None else bool(v.met) for v in vs]
        out.append(RowScore(rl_reward([float(r["points"]) for r in rows], met, clip=clip), met, [], verdicts=tuple(vs)))
    return out


def results_items(results) -> list[list[float | bool] | None]:
    """Per rollout, the rubric items' met values (None for an unscored rollout)."""
    out = []
    for r in results:
        if r.score is None:
            out.append(None)
        else:
            out.append([(it.p_yes if it.p_yes is not None else bool(it.met)) if r.scoring == "soft" else bool(it.met)
                        for it in r.rubric_items])
    return out


def axes_of(tags: Sequence[str]) -> list[str]:
    return [t.split(":", 1)[1] for t in tags or [] if isinstance(t, str) and t.startswith("axis:")]


def rubric_axis_scores(met_lists, rubrics, scoring: str) -> dict[str, list[float]]:
    """Per HealthBench axis (``axis:`` tags of the rubric items), each rollout's points score."""
    from reward.healthbench.scoring import rl_reward

    out: dict[str, list[float]] = {}
    for met, rows in zip(met_lists, rubrics):
        if met is None or not rows or len(met) != len(rows):
            continue
        groups: dict[str, list[int]] = {}
        for k, r in enumerate(rows):
            for ax in axes_of(r.get("tags") or []):
                groups.setdefault(ax, []).append(k)
        for ax, ks in groups.items():
            pts = [float(rows[k]["points"]) for k in ks]
            if any(p > 0 for p in pts):
                out.setdefault(ax, []).append(rl_reward(pts, [met[k] for k in ks]))
    return out


def leaf_axis_scores(tree, leaves) -> dict[str, float]:
    """Per tree axis (leaf ``tags.axis``), the weighted pass rate of one rollout's active leaves."""
    acc: dict[str, list[float]] = {}
    for lr in leaves:
        if lr.passed is None:
            continue
        ax = getattr(tree[lr.leaf_id].tags, "axis", None)
        if ax:
            w, s = acc.setdefault(ax, [0.0, 0.0])
            acc[ax] = [w + lr.weight, s + lr.weight * lr.passed]
    return {ax: s / w for ax, (w, s) in acc.items() if w > 0}


class RowRubricReward:
    """``rubric_source: rows`` as a reward object: each rollout scored on its row's rubric items
    alone (:func:`grade_rubric_rows`: no routing, no tree, each item graded once), with the same
    interface and records as ``RubricReward`` (``score(records) -> list[RolloutScore]``, ``stats``),
    so every command and trainer handles both the same way. Built by ``RewardSettings.build``.

    A rollout without rubric items, or none with positive points, is unscored with the reason.
    """

    tree = None  # no tree: the record's leaves are empty

    def __init__(self, judge, *, scoring: str = "hard", combine: str = "points", grade: str = "answer",
                 format_failure_score: float | str | None = "floor", clip_below_zero: bool = False,
                 on_failure: str = "skip", scoring_variant: str = "severity", **_tree_only: Any) -> None:
        from reward.stages.rescore import Rescorer

        self.judge, self.scoring, self.combine, self.grade = judge, scoring, combine, grade
        self.format_failure_score, self.clip_below_zero, self.on_failure = format_failure_score, clip_below_zero, on_failure
        self.scoring_variant = scoring_variant
        self.rescorer = Rescorer(None, scoring_variant=scoring_variant, combine="points", clip_below_zero=clip_below_zero)
        self.stats: dict[str, float] = dict.fromkeys(["rollouts", "scored", "unscored", "prompts", "prompts_routed",
                                                      "routing_judge_calls", "routing_failures", "active_leaves",
                                                      "judge_items", "format_failures", "confirm_items"], 0)

    def rescore(self, s, leaf_met, item_met):
        return self.rescorer.rescore(s, leaf_met, item_met)

    async def score(self, records) -> list:
        from reward.errors import JudgeError
        from reward.stages.results import ItemResult, RolloutScore, group_key
        from reward.stages.rollouts import parse_rollouts

        rollouts = parse_rollouts(records)
        graded = await grade_rubric_rows(
            self.judge, [([{"role": m.role, "content": m.content} for m in r.prompt], r.completion,
                          [it.model_dump() for it in r.rubrics or []]) for r in rollouts],
            soft=self.scoring == "soft", grade=self.grade, format_failure_score=self.format_failure_score,
            clip=self.clip_below_zero)
        out = []
        for r, g in zip(rollouts, graded):
            items = [ItemResult(criterion=it.criterion, points=it.points, met=v.met if v is not None else None,
                                p_yes=v.p_yes if v is not None else None, failure=v.failure if v is not None else None)
                     for it, v in zip(r.rubrics or [], g.verdicts or [None] * len(r.rubrics or []))]
            failures = list(g.failures)
            if not r.rubrics and not g.format_failure:
                failures.append("rubric_source rows: the rollout has no rubric items")
            res = RolloutScore(id=r.id, group=group_key(r.prompt_key), score=g.score, scoring=self.scoring,
                               combine="points", scoring_variant=self.scoring_variant,
                               points_score=None if g.format_failure else g.score, rubric_items=items,
                               failures=failures if g.score is None else [], format_failure=g.format_failure,
                               feedback="unclosed <think>: no final answer to grade" if g.format_failure else "")
            if res.score is None and not g.format_failure and self.on_failure == "raise":
                raise JudgeError(f"rollout '{r.id}': {'; '.join(failures[:3]) or 'unscored'}")
            self.stats["rollouts"] += 1
            self.stats["format_failures"] += g.format_failure
            self.stats["scored" if res.score is not None else "unscored"] += 1
            self.stats["judge_items"] += 0 if g.format_failure else len(r.rubrics or [])
            out.append(res)
        self.stats["prompts"] += len({r.prompt_key for r in rollouts})
        return out

    def score_sync(self, records) -> list:
        import asyncio

        return asyncio.run(self.score(records))
