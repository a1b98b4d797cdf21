"""The verl data sources: rollouts (:class:`Sample`), raw scores, the registry and its scorers.

Data flow: verl's ``(data_source, solution_str, ground_truth, extra_info)`` -> :class:`Sample`
-> :func:`score_samples` (one batch call per data source, sources concurrently) ->
:class:`SampleScore` (score None when unscored) -> the failure policy
(``reward.integrations.verl.policy``) -> :func:`finalize` -> ``{"score", **EXTRA_DEFAULTS}``.

Built-in sources (:func:`register_data_source` refuses a taken name):

* ``mcq``, ``medqa``, ``medbullets``, ``medmcqa``: stage 1 rule reward; ``ground_truth`` is the
  key letter, ``extra_info.options`` helps read answers given as text.
* ``error_rubric``: stage 2 (``reward.stages.error_rubric``); ``extra_info.judge_prompt`` is the
  question the judge reads.
* ``clinical_rubric``, ``healthbench``: stage 3 (``reward.stages.rubric_reward`` or, with
  ``rubric_source: rows``, ``reward.stages.row_rubrics``); ``ground_truth`` is the row's rubric
  items as JSON (empty for tree-only rows).

Every result carries the same extra keys (:data:`EXTRA_DEFAULTS`): verl stacks each key across
the batch and would fail on a key one rollout lacks.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reward.errors import InputError
from reward.integrations.monitors import rollout_facts
from reward.integrations.rollout_log import leaf_columns
from reward.integrations.verl.context import RewardContext
from reward.stages.cost import items_per_prompt, judge_items
from reward.stages.mcq import DEFAULT_LETTERS, grade_mcq
from reward.stages.rollout_text import key_letter, parse_options, to_plain

__all__ = ["DATA_SOURCES", "EXTRA_DEFAULTS", "Sample", "SampleScore", "finalize", "get_data_source",
           "register_data_source", "score_samples"]

# The extra info of every result, whatever its data source (see the module docstring).
EXTRA_DEFAULTS: dict[str, Any] = {
    "acc": None,              # correctness 0/1 where there is a key (MCQ, error rubric)
    "unscored": False,        # True: the judge failed and the score is a stand-in (see reason)
    "unscored_reason": "",
    "neutral_n": 0,           # scored group members the stand-in averages (0: a constant)
    "choice": "",             # the option letter read from the reply ("" when none)
    "format_failure": None,   # no answer could be read from the reply
    "penalty": None,          # error rubric: P in [0, 1]
    "severity_sum": None,
    "n_errors": None,
    "errors": "",             # error rubric: JSON severity sum per error class
    "tree_score": None,       # clinical: tree-weighted score
    "points_score": None,     # clinical: HealthBench points score of the row's rubric items
    "n_active_leaves": None,
    "judge_items": None,      # clinical: judge items this rollout asked for (leaves + rubric items)
    "judge_items_prompt": None,  # clinical: judge items of all rollouts of its prompt in the batch
    "judge_failures": 0,      # judge items that failed for this rollout
    "failed_leaves": "",      # clinical tree: routed leaves that failed the check (ids, bounded)
    "uncertain_leaves": "",   # clinical tree: leaves the judge could not decide (p_yes near 0.5)
    "leaf_verdicts": "",      # clinical tree: leaf=p_yes for every routed leaf (bounded)
    "rubric_record": "",      # clinical tree, with log_records: the full score record as JSON
    # gaming monitors (reward.integrations.monitors): per rollout, so verl's batch means are the shares
    "monitor_length": None,       # clinical: the reply's length in characters
    "monitor_escalated": None,    # clinical: 1 when a prompt read as routine got an emergency referral
    "monitor_refused": None,      # clinical: 1 when the reply deflected to a clinician without help
    "monitor_length_correlation": None,  # the batch's reward-length correlation within groups
}


@dataclass(frozen=True)
class Sample:
    """One rollout as verl describes it. ``uid`` (the prompt's group id) and ``raw_prompt`` are
    known only to a reward manager."""

    data_source: str
    solution_str: str
    ground_truth: Any
    extra_info: Mapping[str, Any] = field(default_factory=dict)
    uid: str | None = None
    raw_prompt: Any = None

    def where(self) -> str:
        info = self.extra_info or {}
        ident = info.get("prompt_id", info.get("row_id", info.get("index")))
        return f"data_source '{self.data_source}'" + (f", row {ident}" if ident is not None else "")


@dataclass
class SampleScore:
    """A data source's raw answer for one sample: ``score`` None means unscored (``failure`` says
    why); ``extra`` holds diagnostics (keys of :data:`EXTRA_DEFAULTS`, or a source's own)."""

    score: float | None
    extra: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None


ScoreFn = Callable[[list[Sample], RewardContext], Awaitable[list[SampleScore]]]
DATA_SOURCES: dict[str, ScoreFn] = {}


def register_data_source(name: str, *aliases: str) -> Callable[[ScoreFn], ScoreFn]:
    """Decorator registering an async batch scorer ``fn(samples, context) -> list[SampleScore]``
    under ``name`` and ``aliases``; a name is taken once (ValueError otherwise)."""
    names = (name, *aliases)

    def deco(fn: ScoreFn) -> ScoreFn:
        taken = [n for n in names if n in DATA_SOURCES]
        if taken:
            raise ValueError(f"data source {taken[0]!r} is already registered "
                             f"({getattr(DATA_SOURCES[taken[0]], '__qualname__', DATA_SOURCES[taken[0]])})")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate names in {names!r}")
        for n in names:
            DATA_SOURCES[n] = fn
        return fn

    return deco


def get_data_source(name: str) -> ScoreFn:
    if name not in DATA_SOURCES:
        raise InputError(f"unknown data_source {name!r}; known: {', '.join(sorted(DATA_SOURCES))} "
                         "(register one with reward.integrations.verl.register_data_source)", field="data_source")
    return DATA_SOURCES[name]


def _options(sample: Sample) -> dict[str, str] | None:
    try:
        return parse_options((sample.extra_info or {}).get("options"))
    except ValueError as exc:
        raise InputError(f"{sample.where()}: extra_info.{exc}", field="extra_info.options") from exc


def _key(sample: Sample, options: dict[str, str] | None) -> str:
    gt = to_plain(sample.ground_truth)
    key = key_letter(gt, None, options) if isinstance(gt, str) else None
    if key is not None:
        return key
    letters = set(options) if options else set(DEFAULT_LETTERS)
    raise InputError(f"{sample.where()}: ground_truth must be the key letter ({'/'.join(sorted(letters))}), "
                     f"got {gt!r}", field="reward_model.ground_truth")


def _conversation(sample: Sample) -> list[dict[str, str]]:
    info = sample.extra_info or {}
    msgs = info.get("judge_prompt")
    if msgs is None:
        msgs = info.get("prompt", sample.raw_prompt)
    msgs = to_plain(msgs)
    if isinstance(msgs, str):
        try:
            msgs = json.loads(msgs)
        except json.JSONDecodeError:
            msgs = [{"role": "user", "content": msgs}]
    if not msgs or not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m for m in msgs):
        raise InputError(f"{sample.where()}: the judge needs the conversation in extra_info.judge_prompt "
                         "(a list of {role, content})", field="extra_info.judge_prompt")
    return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in msgs]


def _rubrics(sample: Sample) -> list[dict[str, Any]] | None:
    gt = to_plain(sample.ground_truth)
    if gt is None or (isinstance(gt, str) and not gt.strip()):
        gt = to_plain((sample.extra_info or {}).get("rubrics"))
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise InputError(f"{sample.where()}: ground_truth must be the rubric items as JSON: {exc.msg}",
                             field="reward_model.ground_truth") from exc
    if gt in (None, []):
        return None
    if not isinstance(gt, list) or not all(isinstance(r, dict) and "criterion" in r and "points" in r for r in gt):
        raise InputError(f"{sample.where()}: rubric items must be a list of {{criterion, points}}",
                         field="reward_model.ground_truth")
    return [{"criterion": str(r["criterion"]), "points": float(r["points"]), "tags": list(r.get("tags") or [])}
            for r in gt]


# ---------------------------------------------------------------------------------- built-in sources
@register_data_source("mcq", "medqa", "medbullets", "medmcqa")
async def score_mcq(samples: list[Sample], context: RewardContext) -> list[SampleScore]:
    """Stage 1 rule reward; needs no judge, never fails."""
    out = []
    for s in samples:
        options = _options(s)
        g = grade_mcq(s.solution_str, _key(s, options), options)
        out.append(SampleScore(g.reward, {"acc": g.reward, "choice": g.choice or "",
                                          "format_failure": g.format_failure}))
    return out


@register_data_source("error_rubric")
async def score_error_rubric(samples: list[Sample], context: RewardContext) -> list[SampleScore]:
    """Stage 2: correctness - alpha * P (``reward.stages.error_rubric``), one judge call per rollout."""
    from reward.stages.error_rubric import ErrorRollout

    rollouts, reads = [], []
    for i, s in enumerate(samples):
        options = _options(s)
        key = _key(s, options)
        reads.append(grade_mcq(s.solution_str, key, options))
        rollouts.append(ErrorRollout(id=i, prompt=tuple(_conversation(s)), completion=s.solution_str,
                                     answer_idx=key, options=options))
    scores = await context.error_scorer.score(rollouts)
    out = []
    for g, r in zip(reads, scores):
        extra = {"acc": r.correctness, "choice": g.choice or "", "format_failure": g.format_failure,
                 "penalty": r.penalty, "severity_sum": r.severity_sum, "n_errors": r.n_errors,
                 "errors": json.dumps(r.by_class, sort_keys=True) if r.by_class else "",
                 "judge_failures": int(r.score is None)}
        out.append(SampleScore(r.score, extra, failure=None if r.score is not None else f"error rubric: {r.failure}"))
    return out


@register_data_source("clinical_rubric", "healthbench")
async def score_clinical(samples: list[Sample], context: RewardContext) -> list[SampleScore]:
    """Stage 3: the rubric reward of the settings (tree and/or the row's rubric items, by ``rubric_source``)."""
    source = context.settings.rubric_source
    records = []
    for i, s in enumerate(samples):
        rubrics = _rubrics(s) if source != "tree" else None
        if source == "rows" and (not rubrics or not any(r["points"] > 0 for r in rubrics)):
            raise InputError(f"{s.where()}: rubric_source 'rows' needs rubric items with positive points "
                             "in ground_truth", field="reward_model.ground_truth")
        info = s.extra_info or {}
        rec: dict[str, Any] = {"id": f"{i}:{info.get('prompt_id', '')}", "prompt": _conversation(s),
                               "completion": s.solution_str, "rubrics": rubrics}
        if info.get("context"):
            rec["context"] = str(info["context"])
        if info.get("tool_calls"):
            rec["tool_calls"] = list(info["tool_calls"])
        records.append(rec)
    # one call for the batch: the reward groups by prompt and routes each prompt once
    results = await context.rubric_reward.score(records)
    cols = leaf_columns(results, ())  # the leaf verdicts behind each score, in verl's rollout dumps
    per_prompt = items_per_prompt(results, [repr((rec["prompt"], rec.get("context"))) for rec in records])
    facts = rollout_facts(results, [rec["completion"] for rec in records],
                          [s.uid or repr((rec["prompt"], rec.get("context"))) for s, rec in zip(samples, records)])
    out = []
    for j, (r, n_prompt) in enumerate(zip(results, per_prompt)):
        n_fail = sum(lr.failure is not None for lr in r.leaves) + sum(it.failure is not None for it in r.rubric_items)
        extra = {"tree_score": r.tree_score, "points_score": r.points_score,
                 "n_active_leaves": r.routing.get("n_active"), "judge_failures": n_fail,
                 "judge_items": judge_items(r), "judge_items_prompt": n_prompt,
                 "format_failure": r.format_failure, "failed_leaves": cols["failed_leaves"][j],
                 "uncertain_leaves": cols["uncertain_leaves"][j], "leaf_verdicts": cols["verdicts"][j]}
        fact = facts[j]
        extra.update({"monitor_length": fact.length, "monitor_escalated": int(fact.escalated),
                      "monitor_refused": int(fact.refused)})
        if context.settings.log_records:
            extra["rubric_record"] = r.model_dump_json()
        failure = None if r.score is not None else (
            "format failure: unclosed <think>, no final answer" if r.format_failure
            else "clinical rubric: " + "; ".join(r.failures[:3] or ["unscored"]))
        out.append(SampleScore(r.score, extra, failure=failure))
    return out


async def score_samples(samples: Sequence[Sample], context: RewardContext) -> list[SampleScore]:
    """Raw scores of ``samples`` (in order): one batch call per data source, sources concurrently."""
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        by_source.setdefault(s.data_source, []).append(i)
    fns = {name: get_data_source(name) for name in by_source}

    async def run(name: str, idx: list[int]) -> list[SampleScore]:
        got = await fns[name]([samples[i] for i in idx], context)
        if len(got) != len(idx):
            raise RuntimeError(f"data source {name!r} returned {len(got)} scores for {len(idx)} samples")
        return got

    parts = await asyncio.gather(*(run(n, idx) for n, idx in by_source.items()))
    out: list[SampleScore | None] = [None] * len(samples)
    for idx, got in zip(by_source.values(), parts):
        for i, r in zip(idx, got):
            if r.score is not None and not math.isfinite(r.score):
                r = SampleScore(None, r.extra, failure=f"non-finite score {r.score!r}")
            out[i] = r
    return out  # type: ignore[return-value]


# ---------------------------------------------------------------------------------- result
def finalize(raw: SampleScore, *, score: float | None = None, reason: str = "", neutral_n: int = 0) -> dict[str, Any]:
    """verl's result dict: ``score`` plus every key of :data:`EXTRA_DEFAULTS`. With ``score``
    given, the rollout was unscored and ``score`` stands in for it (flagged with ``reason``)."""
    out: dict[str, Any] = {**EXTRA_DEFAULTS, **raw.extra}
    if score is None:
        out["score"] = float(raw.score)  # type: ignore[arg-type]
    else:
        out.update(score=float(score), unscored=True, unscored_reason=reason, neutral_n=neutral_n)
    return out
