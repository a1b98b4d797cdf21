"""Reward functions for TRL's ``GRPOTrainer``: a thin adapter over ``reward.stages``.

Three picklable callable classes, one per Fathom-Vaidya stage, with TRL's reward signature
``f(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]`` (every dataset
column arrives as a keyword list; TRL adds ``trainer_state``, ``log_extra``, ``log_metric``):

* :class:`MCQRuleReward` (stage 1): 1 for the key, 0 otherwise; reads ``answer_idx`` or
  ``answer`` (a letter, or the key's text) and ``options``.
* :class:`ErrorRubricReward` (stage 2): correctness minus the judge's error-rubric penalty
  (``reward.stages.error_rubric``); reads ``answer``/``options`` for correctness.
* :class:`RubricRewardFunc` (stage 3): the reward of a ``reward.settings.RewardSettings`` (its
  defaults: the stage-3 recipe), built by ``RewardSettings.build``: route each prompt once, grade
  the active tree leaves and the row's ``rubrics`` column when present, or with
  ``rubric_source="rows"`` the row's rubric items alone (HealthBench points, the paper's reward).
  With ``records_dir`` it writes each rollout's score record beside the run
  (``reward.integrations.records``) for ``rubricstree inspect``.

Data flow: TRL columns -> ``reward.stages.rollout_text`` (plain text, messages, key letters) ->
the stage scorer -> scores (None for an unscored rollout) and metrics through ``log_metric``.

The judge rewards are ``async`` (TRL awaits them concurrently). A rollout whose judge calls
failed gets None (TRL leaves it out of that reward), or, with ``on_failure="raise"``, the batch
raises :class:`reward.errors.JudgeError`. The ``__name__`` (TRL's metric key, default ``mcq_rule``,
``error_rubric``, ``clinical_rubric``) is stable and settable. Through ``log_metric`` each logs
its diagnostics (per-macro-capability and per-axis means, penalties, unscored fraction) and the
judge counters of the batch (requests, cache hits, failures, retries, tokens). The stage 3 tree
reward also logs, through ``log_extra``, per-completion columns of its leaf verdicts (failed and
uncertain leaves, macro scores: ``reward.integrations.rollout_log``) for TRL's completions table.

A judge is given as :class:`reward.settings.JudgeSettings` (or its dict), built lazily in the
process that calls the reward and dropped when pickled, or as a live :class:`reward.judge.Judge`
(tests, notebooks). Nothing here imports trl, torch or transformers at module level, and nothing
else imports logic from here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from reward.integrations.columns import require_rubrics
from reward.integrations.monitors import RewardMonitor, rollout_facts
from reward.integrations.records import RecordWriter
from reward.integrations.rollout_log import leaf_columns
from reward.integrations.trl_combined import CombinedReward, fill_group_mean, group_keys  # noqa: F401  (the TRL adapters' names)
from reward.settings import ErrorRubricSettings, JudgeSettings, MonitorSettings, RewardSettings, RubricRewardSettings
from reward.stages.mcq import grade_mcq
from reward.stages.rollout_text import (
    completion_text,
    key_letter,
    parse_options,
    prompt_messages,
)
from reward.stages.row_rubrics import (
    leaf_axis_scores,
    mean,
    results_items,
    rubric_axis_scores,
)

__all__ = ["CombinedReward", "ErrorRubricReward", "MCQRuleReward", "RubricRewardFunc"]

# what TRL passes beside the dataset's columns (its ``prompt`` column arrives as ``prompts``)
_log = logging.getLogger(__name__)
TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "completion_ids")
JUDGE_COUNTERS = ("requests", "cache_hits", "failures", "retries", "prompt_tokens", "cached_tokens",
                  "completion_tokens", "probe_items")  # probe_items: the identity watch's requests (its cost)
# What a rollout whose judge calls failed gets: "skip" None (alone, TRL leaves the rollout out of
# its group; beside other reward functions TRL sums with nansum, so prefer one of the next two),
# "group_mean" the mean of the scored rollouts of its group (this reward then adds nothing to the
# failed rollout's advantage; the other reward functions still do; but the filled value narrows the
# group's spread, so under TRL's std scaling the siblings' advantages grow by sqrt((n-1)/(n-2)) for
# one failure among n), "raise" stops the batch. ``CombinedReward`` leaves the whole rollout out and
# leaves the siblings as they were: prefer it.
ON_FAILURE = ("skip", "group_mean", "raise")


def _column(kwargs: Mapping[str, Any], name: str, n: int) -> list[Any] | None:
    col = kwargs.get(name)
    if col is None:
        return None
    col = list(col)
    if len(col) != n:
        raise ValueError(f"column '{name}' has {len(col)} values for {n} completions")
    return col


class _JudgeReward:
    """Shared plumbing: lazy judge, pickling without live clients, metric logging."""

    _transient = ("_judge", "_runtime", "_loop")

    def __init__(self, judge: Any, name: str, on_failure: str) -> None:
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
        self.__name__ = name
        self.on_failure = on_failure
        self._judge = None
        self._runtime = None
        self._loop = None
        if isinstance(judge, Mapping):
            judge = JudgeSettings.model_validate(dict(judge))
        if isinstance(judge, JudgeSettings) or callable(judge) and not hasattr(judge, "grade"):
            self.judge_spec = judge  # a spec or a picklable factory: built on first use
        elif judge is not None and hasattr(judge, "grade"):
            self.judge_spec = None
            self._judge = judge
        else:
            raise ValueError("give a judge: a JudgeSettings (or dict), a factory, or a Judge")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_loop"] = None
        if state.get("judge_spec") is not None:  # rebuildable: drop live clients and models
            for k in self._transient:
                state[k] = None
        return state

    def _bind_loop(self) -> None:
        """An HTTP judge's client and locks belong to the event loop that first used them. When
        a call comes from another loop (TRL's loop after the difficulty filter's, a second
        trainer), a judge built from a spec is rebuilt; a live judge is used as it is."""
        loop = asyncio.get_running_loop()
        bound = self._loop() if self._loop is not None else None
        if bound is not None and bound is not loop and self.judge_spec is not None:
            self._judge = None
            self._runtime = None
        self._loop = weakref.ref(loop)

    @property
    def judge(self):
        if self._judge is None:
            spec = self.judge_spec
            self._judge = spec.build() if isinstance(spec, JudgeSettings) else spec()
        return self._judge

    def _log(self, log_metric: Callable[[str, float], None] | None, values: Mapping[str, float | None]) -> None:
        if log_metric is None:
            return
        for k, v in values.items():
            if v is not None:
                log_metric(f"{self.__name__}/{k}", float(v))

    def _counters(self) -> dict[str, int]:
        stats = self.judge.stats.as_dict()
        watch = getattr(self.judge, "watch", None)
        stats["probe_items"] = watch.stats.probe_items if watch is not None else 0
        return {k: int(stats.get(k, 0)) for k in JUDGE_COUNTERS}

    def _counter_delta(self, before: Mapping[str, int]) -> dict[str, float]:
        after = self._counters()
        return {f"judge/{k}": float(after[k] - before[k]) for k in JUDGE_COUNTERS}


# ---------------------------------------------------------------------------------- stage 1
class MCQRuleReward:
    """Stage 1 rule reward: 1.0 when the completion's chosen option is the key, else 0.0.

    Columns: ``answer_idx`` (the key letter) or ``answer`` (a letter or the key's text), and
    ``options`` (letter -> text; helps read answers given as text). A row whose key cannot be
    read gets None (never a silent 0). Logs ``accuracy`` and ``format_failures`` (the share of
    completions with no readable answer).
    """

    def __init__(self, name: str = "mcq_rule") -> None:
        self.__name__ = name

    def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                 **kwargs: Any) -> list[float | None]:
        n = len(completions)
        idx = _column(kwargs, "answer_idx", n) or [None] * n
        ans = _column(kwargs, "answer", n) or [None] * n
        opts = _column(kwargs, "options", n) or [None] * n
        out: list[float | None] = []
        unreadable = 0
        for c, i, a, o in zip(completions, idx, ans, opts):
            options = parse_options(o)
            key = key_letter(i, a, options)
            if key is None:
                out.append(None)
                continue
            res = grade_mcq(completion_text(c), key, options)
            unreadable += res.format_failure
            out.append(res.reward)
        log = kwargs.get("log_metric")
        if log is not None and n:
            scored = [r for r in out if r is not None]
            if scored:
                log(f"{self.__name__}/accuracy", sum(scored) / len(scored))
            log(f"{self.__name__}/format_failures", unreadable / n)
        return out


# ---------------------------------------------------------------------------------- stage 2
class ErrorRubricReward(_JudgeReward):
    """Stage 2: correctness (the MCQ rule) traded off against the judge's listed errors.

    Args:
        judge: a :class:`JudgeSettings`/dict/factory (built lazily) or a live Judge.
        alpha, s_max, form, ...: see :class:`reward.settings.ErrorRubricSettings` (passed as
            keywords or as ``config``).
        on_failure: ``"skip"`` (None for that rollout), ``"group_mean"`` or ``"raise"`` (see ``ON_FAILURE``).

    Columns: ``answer``/``answer_idx``, ``options``; ``judge_prompt`` (else ``prompts``) is the
    question the judge sees.
    """

    def __init__(self, judge: Any, *, config: Any = None, on_failure: str = "skip",
                 name: str = "error_rubric", **config_kw: Any) -> None:
        super().__init__(judge, name, on_failure)
        if config is None:
            config = ErrorRubricSettings(**config_kw)
        elif isinstance(config, Mapping):
            config = ErrorRubricSettings(**{**config, **config_kw})
        self.config = config

    async def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                       **kwargs: Any) -> list[float | None]:
        from reward.judge.types import Message
        from reward.stages.error_rubric import ErrorRollout, ErrorRubricScorer

        self._bind_loop()
        n = len(completions)
        idx = _column(kwargs, "answer_idx", n) or [None] * n
        ans = _column(kwargs, "answer", n) or [None] * n
        opts = _column(kwargs, "options", n) or [None] * n
        shown = _column(kwargs, "judge_prompt", n) or prompts
        rollouts, where = [], []
        out: list[float | None] = [None] * n
        for j, (p, c, i, a, o) in enumerate(zip(shown, completions, idx, ans, opts)):
            options = parse_options(o)
            key = key_letter(i, a, options)
            if key is None:
                continue
            conv = tuple(Message(**m) for m in prompt_messages(p))
            rollouts.append(ErrorRollout(id=j, prompt=conv, completion=completion_text(c), answer_idx=key,
                                         options=options))
            where.append(j)
        before = self._counters()
        scorer_policy = "raise" if self.on_failure == "raise" else "skip"
        scores = await ErrorRubricScorer(self.judge, self.config, on_failure=scorer_policy).score(rollouts)
        for j, s in zip(where, scores):
            out[j] = s.score
        if self.on_failure == "group_mean":
            out = fill_group_mean(out, group_keys(list(prompts)))
        ok = [s for s in scores if s.score is not None]
        metrics: dict[str, float | None] = {
            "correctness": mean([s.correctness for s in scores]),
            "penalty": mean([s.penalty for s in ok]),
            "n_errors": mean([s.n_errors for s in ok]),
            "invalid_entries": mean([s.n_invalid for s in ok]),
            "unscored": (n - len(ok)) / n if n else None,
        }
        for cls in ("knowledge", "causal_reasoning", "context"):
            metrics[f"severity/{cls}"] = mean([s.by_class.get(cls, 0) for s in ok])
        metrics.update(self._counter_delta(before))
        self._log(kwargs.get("log_metric"), metrics)
        return out


# ---------------------------------------------------------------------------------- stage 3
class RubricRewardFunc(_JudgeReward):
    """Stage 3: the rubric reward (tree and/or the row's HealthBench-style rubric items).

    Args:
        judge: a :class:`JudgeSettings`/dict/factory (built lazily) or a live Judge.
        settings: the recipe, a :class:`reward.settings.RewardSettings` or its mapping (default:
            the stage-3 recipe); keyword arguments named like its fields (``router``,
            ``router_options``, ``rubric_source``, ``scoring``, ``combine``, ``scoring_variant``,
            ``grade``, ``format_failure_score``, ``clip_below_zero``, ``applicability``,
            ``confirm_failures``, ...) override it, validated by the same model (an unknown key
            fails). ``tree`` and ``router`` may also be a live ``RubricTree`` / ``Router``.
        name: the metric key (TRL's ``__name__``).
        on_failure: ``"skip"`` (None), ``"group_mean"`` or ``"raise"`` (see ``ON_FAILURE``).
        records_dir: write each rollout's score record (with its prompt, completion and step) to
            ``records_dir/step-N.jsonl`` and the recipe to ``records_dir/settings.json``:
            ``rubricstree inspect records_dir`` (or the run's output_dir) opens them. None: none.
        records_max_chars: the first N characters of each prompt turn and completion kept there.

    Columns: ``rubrics`` (the row's rubric items; required unless ``rubric_source`` is ``tree``: a
    dataset without it is refused, :meth:`check_columns`, never quietly scored by the tree alone),
    ``judge_prompt`` (else ``prompts``) is the conversation the router and judge see. Each prompt is routed once per batch (the reward groups by prompt).
    Logs, besides the means below, each routed leaf's pass rate as ``<name>/leaf/<leaf id>``.
    """

    def __init__(self, judge: Any, settings: RewardSettings | Mapping[str, Any] | None = None, *,
                 name: str = "clinical_rubric", on_failure: str = "skip", records_dir: str | Path | None = None,
                 records_max_chars: int | None = 4000, applicability_scope: str | None = None,
                 monitors: MonitorSettings | Mapping[str, Any] | None = None, **recipe: Any) -> None:
        super().__init__(judge, name, on_failure)
        self.monitor = RewardMonitor(MonitorSettings.model_validate(dict(monitors or {})), name=name)
        self.applicability_scope = applicability_scope
        if isinstance(recipe.get("tree"), os.PathLike):
            recipe["tree"] = os.fspath(recipe["tree"])
        self._tree_obj = recipe.pop("tree", None) if not isinstance(recipe.get("tree"), (str, type(None))) else None
        self._router_obj = recipe.pop("router", None) if not isinstance(recipe.get("router"), (str, type(None))) else None
        base = settings.model_dump() if isinstance(settings, BaseModel) else dict(settings or {})
        self.settings = RewardSettings.model_validate({**{k: v for k, v in base.items()
                                                          if k in RewardSettings.model_fields},
                                                       **{k: v for k, v in recipe.items()
                                                          if v is not None or k not in ("router", "tree")}})
        self.records = RecordWriter(records_dir, self.settings, name=name, max_chars=records_max_chars,
                                    monitors=self.monitor.settings.model_dump(mode="json")) \
            if records_dir is not None else None

    # the recipe's fields, read as attributes (tests, launchers)
    router_source = property(lambda self: self._router_obj or self.settings.router)
    tree_source = property(lambda self: self._tree_obj or self.settings.tree)
    router_options = property(lambda self: self.settings.router_options)
    rubric_source = property(lambda self: self.settings.rubric_source)
    scoring = property(lambda self: self.settings.scoring)
    combine = property(lambda self: self.settings.combine)
    scoring_variant = property(lambda self: self.settings.scoring_variant)
    grade = property(lambda self: self.settings.grade)
    format_failure_score = property(lambda self: self.settings.format_failure_score)
    clip_below_zero = property(lambda self: self.settings.clip_below_zero)
    applicability = property(lambda self: self.settings.applicability)
    confirm_failures = property(lambda self: self.settings.confirm_failures)

    @classmethod
    def from_settings(cls, judge: Any, settings: RubricRewardSettings | Mapping[str, Any],
                      **kwargs: Any) -> RubricRewardFunc:
        """The reward of a :class:`reward.settings.RubricRewardSettings` (or its mapping); ``kwargs``:
        ``records_dir``, ``records_max_chars``, ``applicability_scope`` (the run the applicability
        answers belong to: the TRL launcher passes the output folder's run id)."""
        s = RubricRewardSettings.model_validate(settings)
        return cls(judge, s.recipe(), name=s.name, on_failure=s.on_failure, monitors=s.monitors.model_dump(), **kwargs)

    def as_pass_rate(self) -> RubricRewardFunc:
        """This reward as the difficulty filter reads it: a pass rate in 0..1 per sample, not the
        shaped training reward. Same judge, tree, router and settings, except that an unfinished
        answer (unclosed ``<think>``) is a failed attempt scoring 0, whatever ``format_failure_score``
        gives it in training (its ``floor`` sits below the row's worst answer), and a harmful
        answer's negative points count as 0, as HealthBench clips a score."""
        import copy

        raw = copy.copy(self)
        raw.settings = self.settings.model_copy(update={"format_failure_score": 0.0, "clip_below_zero": True})
        raw.records = None
        raw._runtime = None  # the scorer is rebuilt with these settings (the judge is shared)
        return raw

    def check_columns(self, columns) -> None:
        """Refuse a dataset without a column the recipe needs (``reward.integrations.columns``):
        the TRL launcher calls this at start-up, ``__call__`` on every batch."""
        require_rubrics(columns, self.rubric_source)

    def _reward(self):
        if self._runtime is None:
            self._runtime = self.settings.build(self.judge, tree=self._tree_obj, router=self._router_obj,
                                                on_failure="raise" if self.on_failure == "raise" else "skip",
                                                applicability_scope=self.applicability_scope)
        return self._runtime

    def score_sync(self, prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        """The reward from synchronous code (a notebook, a script): ``__call__`` is a coroutine that
        TRL awaits; this runs it on the package's background event loop and returns the scores."""
        from reward.runtime import run_sync

        return run_sync(self(prompts, completions, **kwargs))

    async def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                       **kwargs: Any) -> list[float | None]:
        self._bind_loop()
        n = len(completions)
        shown = _column(kwargs, "judge_prompt", n) or prompts
        self.check_columns(["prompt", *(k for k in kwargs if k not in TRL_KWARGS)])
        rubrics = _column(kwargs, "rubrics", n) if self.rubric_source != "tree" else None
        before = self._counters()
        reward = self._reward()
        recs = []
        for j, (p, c) in enumerate(zip(shown, completions)):
            rec: dict[str, Any] = {"id": str(j), "prompt": prompt_messages(p), "completion": completion_text(c)}
            rows = [dict(r) for r in rubrics[j]] if rubrics is not None and rubrics[j] else []
            if rows and any(float(r.get("points", 0)) > 0 for r in rows):
                rec["rubrics"] = rows
            recs.append(rec)
        bare = sum("rubrics" not in r for r in recs) if rubrics is not None else 0
        if bare and not getattr(self, "_said_bare_rows", False):  # rows without items, for a recipe that reads
            self._said_bare_rows = True                              # them: said once per reward
            _log.warning("%s: %d of %d rollouts' rows carry no rubric item with positive points, so the recipe's row "
                         "part does not score them (rubric_source %r: %s)", self.__name__, bare, len(recs),
                         self.rubric_source, "the tree alone does" if self.rubric_source == "both" else "nothing does")
        results = await reward.score(recs)
        metrics = self._metrics(reward, results, recs, rubrics, kwargs.get("log_extra"))
        metrics["unscored"] = sum(r.score is None for r in results) / n if n else None
        # an unclosed <think> (no final answer): scored format_failure_score, not a judge failure
        metrics["format_failures"] = sum(r.format_failure for r in results) / n if n else None
        facts = rollout_facts(results, [rec["completion"] for rec in recs], group_keys(list(shown)))
        figures = self.monitor.observe(facts)
        metrics.update({f"monitor/{k}": v for k, v in figures.items()})
        if self.records is not None and figures:
            self.records.write_monitors(figures, kwargs.get("trainer_state"))
        metrics.update(self._counter_delta(before))
        self._log(kwargs.get("log_metric"), metrics)
        if self.records is not None:
            self.records.write(results, recs, kwargs.get("trainer_state"))
        scores = [r.score for r in results]
        if self.on_failure == "group_mean":
            scores = fill_group_mean(scores, group_keys(list(shown)))
        return scores

    def _metrics(self, reward, results, recs, rubrics, log_extra=None) -> dict[str, float | None]:
        tree = reward.tree
        if log_extra is not None and tree is not None:  # the leaf verdicts behind each reward, as table columns
            for col, vals in leaf_columns(results, tree.macro_capabilities).items():
                log_extra(f"{self.__name__}/{col}", vals)
        metrics: dict[str, float | None] = {}
        macro: dict[str, list[float]] = {}
        axis: dict[str, list[float]] = {}
        leaf: dict[str, list[float]] = {}
        for res in results:
            if res.score is None:
                continue
            for lr in res.leaves:
                if lr.passed is not None:
                    leaf.setdefault(lr.leaf_id, []).append(lr.passed)
            if tree is None:
                continue
            for mid in tree.macro_capabilities:
                if mid in res.nodes:
                    macro.setdefault(mid, []).append(res.nodes[mid]["score"])
            for ax, v in leaf_axis_scores(tree, res.leaves).items():
                axis.setdefault(ax, []).append(v)
        for mid, vals in macro.items():
            metrics[f"macro/{mid}"] = mean(vals)
        for ax, vals in axis.items():
            metrics[f"tree_axis/{ax}"] = mean(vals)
        for lid, vals in sorted(leaf.items()):  # each routed leaf's pass rate over the scored rollouts
            metrics[f"leaf/{lid}"] = mean(vals)
        if rubrics is not None:
            for ax, vals in rubric_axis_scores(results_items(results), rubrics, self.scoring).items():
                metrics[f"axis/{ax}"] = mean(vals)
        if tree is not None:
            from reward.stages.cost import judge_cost

            for k, v in judge_cost(results, [repr(rec["prompt"]) for rec in recs]).items():
                metrics[f"cost/{k}"] = v
            metrics["tree_score"] = mean([r.tree_score for r in results if r.score is not None])
            metrics["points_score"] = mean([r.points_score for r in results if r.score is not None])
        return metrics
