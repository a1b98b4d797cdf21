"""verl adapter: one ``compute_score`` dispatching on ``data_source``, and the group-aware core of
our verl reward manager (``reward/verl_manager.py``).

Nothing here imports verl (or torch) at module level; verl imports this module, not the reverse.

How verl 0.9.1 calls a custom reward (read from its source, ``verl/trainer/ppo/reward.py`` and
``verl/experimental/reward_loop/``):

* ``reward.custom_reward_function.{path,name}`` names the function; ``path`` may be a file or
  ``pkg://reward.verl_rewards`` (imported as a module: one copy of this module's state).
* ``reward.custom_reward_function.reward_kwargs`` (a key absent from verl's default config, so
  ``+reward.custom_reward_function.reward_kwargs.KEY=...`` on the command line) is merged into
  every call's keyword arguments, taking precedence. That is how our settings reach us:
  ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``.
  A YAML file named by ``config=...`` there, or by ``$RUBRICSTREE_VERL_CONFIG``, is read first
  and the inline keys override it. Unknown keys are an error (naming the file and the field).
* Rewards are computed per rollout: the agent loop sends each finished rollout, alone, to a
  random reward-loop worker (``reward.num_workers`` Ray actors), whose reward manager's
  ``run_single`` calls ``compute_score`` once. ``extra_info`` carries only what the data row put
  there. **So compute_score never sees a rollout's group.**

Failure policy (verl has no unscored value: the score goes into a float tensor):

* ``on_failure: raise`` - a judge failure raises :class:`reward.errors.JudgeError` with its reason.
  With ``trainer.use_v1=false`` this stops training. With the v1 trainer (verl's default) the
  agent loop logs the error and marks that prompt's group ``failure``; by default verl keeps the
  group's other rollouts (see ``trainer.v1.sampler.sync_refill_failed_groups``).
* ``on_failure: neutral`` - the failed rollout gets the mean score of the scored rollouts of its
  group, so its GRPO/GSPO advantage is zero, and its extra info says ``unscored: true`` with the
  reason. Only :class:`RubricsTreeRewardManager` (``reward/verl_manager.py``) sees groups: in
  plain ``compute_score`` there is no group, so ``neutral`` falls back to ``fallback_score``, a
  constant you must set explicitly (flagged the same way; it is *not* neutral), else it raises.
  Use the manager for judge-scored stages.
* A group in which no rollout was scored gets ``all_failed_score`` for every rollout (any constant
  gives the whole group zero advantage), flagged; ``all_failed_score: null`` raises instead.

Data sources (a small registry; :func:`register_data_source` refuses a taken name):

* ``mcq``, ``medqa``, ``medbullets``, ``medmcqa`` - the stage 1 rule reward (1 for the key, else 0).
  ``ground_truth`` is the key letter; ``extra_info.options`` (letter -> text, or its JSON) helps
  read answers given as text.
* ``error_rubric`` - stage 2: correctness minus the judge's error-rubric penalty
  (``reward.error_rubric``). ``ground_truth`` is the key letter; ``extra_info.judge_prompt`` the
  question the judge reads; ``extra_info.options``.
* ``clinical_rubric``, ``healthbench`` - stage 3: ``reward.rubric_reward.RubricReward`` (the routed
  tree and/or the row's rubric items). ``ground_truth`` is the row's rubric items as JSON (or
  empty for tree-only rows); ``extra_info.judge_prompt`` the conversation the judge reads.

Every result is ``{"score": float, **extra}`` with the same extra keys for every data source
(:data:`EXTRA_DEFAULTS`), because verl stacks each key across the batch and would fail on a key
that one rollout lacks; text values are skipped by verl's metrics, numbers and booleans averaged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reward.errors import InputError, JudgeError
from reward.mcq import DEFAULT_LETTERS, grade_mcq

log = logging.getLogger("rubricstree.verl")

CONFIG_ENV = "RUBRICSTREE_VERL_CONFIG"
JUDGE_URL_ENV = "RUBRICSTREE_JUDGE_URL"
# Keyword arguments verl itself may add to a compute_score call (reward-model plumbing), not ours.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")

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
    "judge_failures": 0,      # judge items that failed for this rollout
}


# ---------------------------------------------------------------------------------- settings
class VerlRewardSettings(BaseModel):
    """Settings of the verl reward (``reward_kwargs`` or a YAML file with the same keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_failure: Literal["raise", "neutral"] = Field(
        "neutral", description="raise: stop on a judge failure; neutral: group-mean score, flagged")
    fallback_score: float | None = Field(
        None, description="compute_score only (no group in sight): the flagged constant for a failed "
                          "rollout under 'neutral'; null raises. Prefer the reward manager")
    all_failed_score: float | None = Field(
        0.0, description="score of every rollout of a group with none scored (zero advantage); null raises")
    group_size: int | None = Field(
        None, ge=1, description="rollouts per prompt; default actor_rollout_ref.rollout.n (manager)")
    group_timeout_s: float = Field(
        600.0, gt=0, description="manager: longest wait of a failed rollout for its group's other rollouts")
    batch_window_s: float = Field(
        0.05, ge=0, description="manager: rollouts arriving within this window are scored in one batch")
    max_batch: int = Field(512, ge=1, description="manager: largest batch scored at once")
    judge: dict[str, Any] = Field(
        default_factory=dict, description="reward.trl_rewards.JudgeSpec fields (url, served_model, mode, ...); "
                                          f"url defaults to ${JUDGE_URL_ENV}")
    tree: str | None = Field(None, description="taxonomy YAML; null: the packaged one")
    router: str = Field("static", description="static, llm or embedding")
    router_options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the router")
    rubric_source: Literal["both", "tree", "rows"] = Field(
        "both", description="clinical: tree leaves and row items / tree only / row items only (the paper)")
    scoring: Literal["hard", "soft"] = Field("hard", description="judge yes/no or p_yes")
    combine: Literal["tree", "points", "mean"] = Field("tree", description="clinical reward when both exist")
    scoring_variant: Literal["paper", "penalty", "active", "penalty+active"] | None = Field(
        None, description="tree score variant (reward.scoring.variants); null: the default one")
    error_rubric: dict[str, Any] = Field(
        default_factory=dict, description="reward.error_rubric.ErrorRubricConfig fields (alpha, s_max, form, ...)")

    @model_validator(mode="after")
    def _check_nested(self) -> "VerlRewardSettings":
        # validated now, so a typo fails at load time and names its field
        from reward.error_rubric import ErrorRubricConfig
        from reward.trl_rewards import JudgeSpec

        try:
            JudgeSpec.model_validate(self.judge)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"judge.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        try:
            ErrorRubricConfig(**self.error_rubric)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"error_rubric.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        return self

    def judge_spec(self):
        from reward.trl_rewards import JudgeSpec

        spec = dict(self.judge)
        if not spec.get("url") and not spec.get("model") and os.environ.get(JUDGE_URL_ENV):
            spec["url"] = os.environ[JUDGE_URL_ENV]
        return JudgeSpec.model_validate(spec)


def _plain(value: Any) -> Any:
    """Python containers from what verl hands over (OmegaConf nodes, numpy arrays and scalars)."""
    if isinstance(value, (str, bytes, bool, int, float)) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        return [_plain(v) for v in value]
    return value


@lru_cache(maxsize=64)
def _settings_cached(path: str | None, mtime: float | None, inline_json: str) -> VerlRewardSettings:
    data: dict[str, Any] = {}
    src = path or "reward_kwargs"
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise InputError(f"invalid YAML: {exc}", file=path) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise InputError("the settings must be a mapping", file=path)
        data.update(loaded or {})
    inline = json.loads(inline_json)
    data.update(inline)
    try:
        return VerlRewardSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or None
        key = where.split(".")[0] if where else None
        file = "reward_kwargs" if key in inline else src
        raise InputError(first.get("msg", str(exc)), file=file, field=where) from exc


def load_settings(config: str | os.PathLike | None = None, **inline: Any) -> VerlRewardSettings:
    """Settings from a YAML file (``config``, else ``$RUBRICSTREE_VERL_CONFIG``) overridden by
    ``inline`` keys. Cached, so a per-rollout call costs a dictionary lookup.

    Raises:
        InputError: the file is missing or invalid, or a key is unknown or has a bad value.
    """
    path = str(config) if config else os.environ.get(CONFIG_ENV) or None
    mtime = None
    if path:
        if not Path(path).is_file():
            raise InputError("settings file not found", file=path)
        mtime = Path(path).stat().st_mtime
    inline_json = json.dumps(_plain(inline), sort_keys=True, default=str)
    return _settings_cached(path, mtime, inline_json)


# ---------------------------------------------------------------------------------- context
class RewardContext:
    """What the judge-based data sources need, built lazily once and reused: the judge, the tree,
    the router and the scorers. Tests pass their own ``judge``/``tree``/``router``.

    An HTTP judge's connection pool belongs to one event loop; :func:`get_context` keeps one
    context per (settings, loop), which in verl means one per reward worker.
    """

    def __init__(self, settings: VerlRewardSettings | None = None, *, judge: Any = None, tree: Any = None,
                 router: Any = None) -> None:
        self.settings = settings or VerlRewardSettings()
        self._judge, self._tree, self._router = judge, tree, router
        self._rubric_reward = None
        self._error_scorer = None

    @property
    def judge(self):
        if self._judge is None:
            spec = self.settings.judge_spec()
            if not spec.url and not spec.model:
                raise JudgeError("this data source needs a judge: set reward_kwargs judge.url (a vLLM server) "
                                 f"or judge.model, or ${JUDGE_URL_ENV}")
            self._judge = spec.build()
        return self._judge

    @property
    def tree(self):
        if self._tree is None:
            from reward.tree import load_tree

            self._tree = load_tree(self.settings.tree)
        return self._tree

    @property
    def router(self):
        if self._router is None:
            from reward.router import make_router

            opts = dict(self.settings.router_options)
            if self.settings.router == "llm":
                opts.setdefault("judge", self.judge)
            self._router = make_router(self.settings.router, self.tree, **opts)
        return self._router

    @property
    def rubric_reward(self):
        if self._rubric_reward is None:
            from reward.rubric_reward import RubricReward

            s = self.settings
            # failures come back as unscored results; our policy decides what they become
            from reward.scoring.variants import DEFAULT_SCORING_VARIANT

            self._rubric_reward = RubricReward(self.tree, self.router, self.judge, scoring=s.scoring,
                                               combine=s.combine, on_failure="skip",
                                               scoring_variant=s.scoring_variant or DEFAULT_SCORING_VARIANT)
        return self._rubric_reward

    @property
    def error_scorer(self):
        if self._error_scorer is None:
            from reward.error_rubric import ErrorRubricConfig, ErrorRubricScorer

            self._error_scorer = ErrorRubricScorer(self.judge, ErrorRubricConfig(**self.settings.error_rubric),
                                                   on_failure="skip")
        return self._error_scorer


_CONTEXTS: "weakref.WeakKeyDictionary[Any, dict[str, RewardContext]]" = weakref.WeakKeyDictionary()
_NO_LOOP: dict[str, RewardContext] = {}


def get_context(settings: VerlRewardSettings) -> RewardContext:
    """The context for ``settings`` in the running event loop, built on first use."""
    key = settings.model_dump_json()
    try:
        per_loop = _CONTEXTS.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        per_loop = _NO_LOOP
    ctx = per_loop.get(key)
    if ctx is None:
        ctx = per_loop[key] = RewardContext(settings)
    return ctx


# ---------------------------------------------------------------------------------- samples
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
                         "(register one with reward.verl_rewards.register_data_source)", field="data_source")
    return DATA_SOURCES[name]


def _options(sample: Sample) -> dict[str, str] | None:
    value = (sample.extra_info or {}).get("options")
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(f"{sample.where()}: extra_info.options is not JSON: {exc.msg}",
                             field="extra_info.options") from exc
    value = _plain(value)
    if not isinstance(value, dict):
        raise InputError(f"{sample.where()}: extra_info.options must map letters to texts", field="extra_info.options")
    # Arrow gives every row every letter; the absent ones come back as None
    return {str(k).strip().upper(): str(v) for k, v in value.items() if v is not None and str(v).strip()} or None


def _key(sample: Sample, options: dict[str, str] | None) -> str:
    gt = _plain(sample.ground_truth)
    letters = set(options) if options else set(DEFAULT_LETTERS)
    if isinstance(gt, str) and gt.strip().upper() in letters:
        return gt.strip().upper()
    raise InputError(f"{sample.where()}: ground_truth must be the key letter ({'/'.join(sorted(letters))}), "
                     f"got {gt!r}", field="reward_model.ground_truth")


def _conversation(sample: Sample) -> list[dict[str, str]]:
    info = sample.extra_info or {}
    msgs = info.get("judge_prompt")
    if msgs is None:
        msgs = info.get("prompt", sample.raw_prompt)
    msgs = _plain(msgs)
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
    gt = _plain(sample.ground_truth)
    if gt is None or (isinstance(gt, str) and not gt.strip()):
        gt = _plain((sample.extra_info or {}).get("rubrics"))
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
    """Stage 2: correctness - alpha * P (``reward.error_rubric``), one judge call per rollout."""
    from reward.error_rubric import ErrorRollout

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
    """Stage 3: the rubric reward (tree and/or the row's rubric items, by ``rubric_source``)."""
    if context.settings.rubric_source == "rows":
        return await _score_rows(samples, context)
    records = []
    for i, s in enumerate(samples):
        rubrics = _rubrics(s) if context.settings.rubric_source == "both" else None
        info = s.extra_info or {}
        rec: dict[str, Any] = {"id": f"{i}:{info.get('prompt_id', '')}", "prompt": _conversation(s),
                               "completion": s.solution_str, "rubrics": rubrics}
        if info.get("context"):
            rec["context"] = str(info["context"])
        if info.get("tool_calls"):
            rec["tool_calls"] = list(info["tool_calls"])
        records.append(rec)
    # one call for the batch: RubricReward groups by prompt and routes each prompt once
    results = await context.rubric_reward.score(records)
    out = []
    for r in results:
        n_fail = sum(lr.failure is not None for lr in r.leaves) + sum(it.failure is not None for it in r.rubric_items)
        extra = {"tree_score": r.tree_score, "points_score": r.points_score,
                 "n_active_leaves": r.routing.get("n_active"), "judge_failures": n_fail}
        failure = None if r.score is not None else "clinical rubric: " + "; ".join(r.failures[:3] or ["unscored"])
        out.append(SampleScore(r.score, extra, failure=failure))
    return out


async def _score_rows(samples: list[Sample], context: RewardContext) -> list[SampleScore]:
    """The row's rubric items alone: the HealthBench points score clipped to [0, 1] (the paper's
    stage 3 reward); no tree, no routing."""
    from reward.trl_rewards import grade_rubric_rows

    rollouts = []
    for s in samples:
        rubrics = _rubrics(s)
        if not rubrics or not any(r["points"] > 0 for r in rubrics):
            raise InputError(f"{s.where()}: rubric_source 'rows' needs rubric items with positive points "
                             "in ground_truth", field="reward_model.ground_truth")
        rollouts.append((_conversation(s), s.solution_str, rubrics))
    graded = await grade_rubric_rows(context.judge, rollouts, soft=context.settings.scoring == "soft")
    out = []
    for g in graded:
        extra = {"judge_failures": len(g.failures)}
        if g.score is None:
            out.append(SampleScore(None, extra, failure=f"clinical rubric: {len(g.failures)} rubric item(s) failed; "
                                                        f"first: {g.failures[0]}"))
            continue
        out.append(SampleScore(g.score, {**extra, "points_score": g.score}))
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


# ---------------------------------------------------------------------------------- failure policy
def finalize(raw: SampleScore, *, score: float | None = None, reason: str = "", neutral_n: int = 0) -> dict[str, Any]:
    """verl's result dict: ``score`` plus every key of :data:`EXTRA_DEFAULTS`. With ``score``
    given, the rollout was unscored and ``score`` stands in for it (flagged with ``reason``)."""
    out: dict[str, Any] = {**EXTRA_DEFAULTS, **raw.extra}
    if score is None:
        out["score"] = float(raw.score)  # type: ignore[arg-type]
    else:
        out.update(score=float(score), unscored=True, unscored_reason=reason, neutral_n=neutral_n)
    return out


def _failure(sample: Sample, raw: SampleScore) -> str:
    return f"{sample.where()}: {raw.failure or 'unscored'}"


def single_policy(sample: Sample, raw: SampleScore, settings: VerlRewardSettings) -> dict[str, Any]:
    """The policy when the group is out of sight (plain compute_score)."""
    if raw.score is not None:
        return finalize(raw)
    reason = _failure(sample, raw)
    if settings.on_failure == "raise":
        raise JudgeError(f"{reason} (on_failure: raise)")
    if settings.fallback_score is None:
        raise JudgeError(f"{reason}. compute_score sees one rollout, not its group, so it cannot give the "
                         "group-mean (zero-advantage) score that on_failure 'neutral' asks for: use the "
                         "RubricsTreeRewardManager (reward/verl_manager.py), or set fallback_score to accept "
                         "a flagged constant")
    log.warning("unscored rollout given fallback_score=%s: %s", settings.fallback_score, reason)
    return finalize(raw, score=settings.fallback_score, reason=reason + " (fallback_score: no group in sight)")


def group_policy(samples: Sequence[Sample], raws: Sequence[SampleScore],
                 settings: VerlRewardSettings) -> list[dict[str, Any]]:
    """The policy over a whole batch: a failed rollout gets the mean of its group's (same ``uid``)
    scored rollouts; a group with none scored gets ``all_failed_score``; both flagged."""
    failed = [i for i, r in enumerate(raws) if r.score is None]
    if failed and settings.on_failure == "raise":
        raise JudgeError(f"{len(failed)} of {len(raws)} rollouts unscored; first: "
                         f"{_failure(samples[failed[0]], raws[failed[0]])} (on_failure: raise)")
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.uid if s.uid is not None else ("#", i), []).append(i)
    out: list[dict[str, Any] | None] = [None] * len(raws)
    for members in groups.values():
        scored = [raws[i].score for i in members if raws[i].score is not None]
        for i in members:
            out[i] = _stand_in(samples[i], raws[i], scored, settings, complete=True)
    return out  # type: ignore[return-value]


def _stand_in(sample: Sample, raw: SampleScore, scored: Sequence[float], settings: VerlRewardSettings, *,
              complete: bool) -> dict[str, Any]:
    if raw.score is not None:
        return finalize(raw)
    reason = _failure(sample, raw)
    note = "" if complete else f" (group incomplete after {settings.group_timeout_s:g}s)"
    if scored:
        mean = sum(scored) / len(scored)
        log.warning("unscored rollout given its group's mean %.4f over %d scored%s: %s",
                    mean, len(scored), note, reason)
        return finalize(raw, score=mean, reason=reason + note, neutral_n=len(scored))
    if settings.all_failed_score is None:
        raise JudgeError(f"no rollout of the group was scored; first failure: {reason} (all_failed_score: null)")
    log.warning("no rollout of the group scored; all get all_failed_score=%s: %s", settings.all_failed_score, reason)
    return finalize(raw, score=settings.all_failed_score, reason=reason + " (no rollout of the group scored)" + note)


# ---------------------------------------------------------------------------------- compute_score
def _split_kwargs(kw: dict[str, Any]) -> tuple[VerlRewardSettings, RewardContext | None]:
    for k in VERL_KWARGS:
        kw.pop(k, None)
    context = kw.pop("context", None)
    settings = kw.pop("settings", None)
    if settings is None:
        settings = context.settings if context is not None else load_settings(kw.pop("config", None), **kw)
    return settings, context


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                        **kwargs: Any) -> dict[str, Any]:
    """verl's custom reward function: ``{"score": float, **extra}`` for one rollout.

    Args:
        data_source: a registered data source (see the module docstring).
        solution_str: the decoded response.
        ground_truth: ``reward_model.ground_truth`` of the row (the key letter, or rubric items JSON).
        extra_info: the row's ``extra_info`` (options, judge_prompt, prompt_id, ...).
        **kwargs: ``reward_kwargs`` from verl's config: settings keys (:class:`VerlRewardSettings`)
            and ``config`` (a YAML file of them). Tests may pass ``context`` (a :class:`RewardContext`).

    Raises:
        JudgeError: a judge failure under ``on_failure: raise``, or under ``neutral`` without
            ``fallback_score`` (this function cannot see the group; use the reward manager).
        InputError: the row lacks what its data source needs (the message names the field).
    """
    settings, context = _split_kwargs(dict(kwargs))
    context = context or get_context(settings)
    sample = Sample(str(data_source), solution_str or "", ground_truth, _plain(extra_info) or {})
    [raw] = await score_samples([sample], context)
    return single_policy(sample, raw, settings)


_SYNC_LOOP: asyncio.AbstractEventLoop | None = None
_SYNC_LOCK = threading.Lock()


def compute_score_sync(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                       **kwargs: Any) -> dict[str, Any]:
    """Blocking :func:`compute_score` for verl's legacy synchronous managers
    (``verl.workers.reward_manager``), run on one long-lived background loop so the judge's
    connections survive between calls."""
    global _SYNC_LOOP
    with _SYNC_LOCK:
        if _SYNC_LOOP is None or _SYNC_LOOP.is_closed():
            _SYNC_LOOP = asyncio.new_event_loop()
            threading.Thread(target=_SYNC_LOOP.run_forever, name="rubricstree-verl-reward", daemon=True).start()
    coro = compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    return asyncio.run_coroutine_threadsafe(coro, _SYNC_LOOP).result()


# ---------------------------------------------------------------------------------- streaming groups
@dataclass
class _Group:
    scores: list[float] = field(default_factory=list)
    arrived: int = 0
    waiters: int = 0
    born: float = field(default_factory=time.monotonic)
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)


class GroupBoard:
    """Where the rollouts of a group meet when verl hands them over one at a time.

    Every rollout reports on arrival (its score, or None when unscored). A failed rollout then
    waits until ``group_size`` rollouts of its ``uid`` have reported, or ``timeout_s``, and gets
    the scores of the scored ones. Entries are dropped once complete with no waiter, or after
    ``4 * timeout_s`` (validation batches may be padded with repeats of a uid).
    """

    def __init__(self, group_size: int, timeout_s: float) -> None:
        self.group_size, self.timeout_s = group_size, timeout_s
        self._groups: dict[str, _Group] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def _prune(self) -> None:
        old = time.monotonic() - 4 * self.timeout_s
        for uid in [u for u, g in self._groups.items() if g.born < old and not g.waiters]:
            del self._groups[uid]

    async def report(self, uid: str, score: float | None, *, wait: bool = False) -> tuple[list[float], bool]:
        """Report one rollout of group ``uid`` (``score`` None: unscored). With ``wait``, wait
        for the group and return ``(scores of its scored rollouts, complete)``; a group that is
        still short of ``group_size`` after ``timeout_s`` returns what it has (complete False)."""
        g = self._groups.setdefault(uid, _Group())
        g.arrived += 1
        if score is not None:
            g.scores.append(score)
        if wait:
            g.waiters += 1  # before the drop below, so a waiting rollout keeps its group alive
        async with g.cond:
            g.cond.notify_all()
        self._drop_if_done(uid, g)
        self._prune()
        if not wait:
            return list(g.scores), g.arrived >= self.group_size
        try:
            async with g.cond:
                await asyncio.wait_for(g.cond.wait_for(lambda: g.arrived >= self.group_size), self.timeout_s)
            complete = True
        except asyncio.TimeoutError:
            complete = False
        finally:
            g.waiters -= 1
            self._drop_if_done(uid, g)
        return list(g.scores), complete

    def _drop_if_done(self, uid: str, g: _Group) -> None:
        if g.arrived >= self.group_size and not g.waiters and self._groups.get(uid) is g:
            del self._groups[uid]


class StreamingScorer:
    """Scores rollouts handed over one at a time (verl's ``run_single``), group-aware.

    Rollouts that arrive within ``batch_window_s`` are scored in one batch (one judge call per
    data source; RubricReward routes each prompt once). A failed rollout under ``neutral`` waits on
    the :class:`GroupBoard` for its group and takes the mean of the scored ones. This needs every
    rollout of a group in this process: run verl with ``reward.num_workers=1``.
    """

    def __init__(self, settings: VerlRewardSettings, context: RewardContext, group_size: int) -> None:
        self.settings, self.context = settings, context
        self.board = GroupBoard(group_size, settings.group_timeout_s)
        self._pending: list[tuple[Sample, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self.counts = {"rollouts": 0, "unscored": 0, "neutral": 0, "constant": 0}

    async def score(self, sample: Sample) -> dict[str, Any]:
        self.counts["rollouts"] += 1
        raw: SampleScore | None = None
        uid = sample.uid
        try:
            raw = await self._submit(sample)
        except BaseException:
            # report the loss, so that no sibling waits for this rollout
            if uid is not None:
                await self.board.report(uid, None)
            raise
        if raw.score is not None:
            if uid is not None:
                await self.board.report(uid, raw.score)
            return finalize(raw)
        self.counts["unscored"] += 1
        if self.settings.on_failure == "raise":
            if uid is not None:
                await self.board.report(uid, None)
            raise JudgeError(f"{_failure(sample, raw)} (on_failure: raise)")
        if uid is None:  # no group id: nothing to average over
            scored, complete = [], True
        else:
            scored, complete = await self.board.report(uid, None, wait=True)
        result = _stand_in(sample, raw, scored, self.settings, complete=complete)
        self.counts["neutral" if scored else "constant"] += 1
        return result

    async def _submit(self, sample: Sample) -> SampleScore:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._pending.append((sample, fut))
        if len(self._pending) >= self.settings.max_batch or self.settings.batch_window_s == 0:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.settings.batch_window_s, self._flush)
        return await fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[Sample, asyncio.Future]]) -> None:
        try:
            raws = await score_samples([s for s, _ in batch], self.context)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), raw in zip(batch, raws):
            if not fut.done():
                fut.set_result(raw)
