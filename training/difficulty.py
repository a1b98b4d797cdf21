"""Difficulty filtering: keep the questions a policy sometimes, but not always, gets right.

For each row, sample ``n`` completions (temperature 1.0, n = 8 by default) from the policy,
score them with the stage's reward and take the mean. Fathom-Vaidya's windows:

* stages 1-2 (MCQ, ``mode="split"``): mean in [0.1, 0.4] -> ``rubric`` (the error-rubric stage),
  mean in (0.4, 0.7] -> ``rule`` (the rule-reward stage), anything else is dropped;
* stage 3 (clinical rubrics, ``mode="keep"``): mean in [0.15, 0.7] is kept, the rest dropped.

Windows are configurable (:class:`DifficultyConfig`). A row whose completions were all unscored
(judge failures) is dropped as ``unscored`` and counted, never treated as 0.

Generation goes to an OpenAI-compatible server (vLLM) when a URL is given, one request per sample
(``timeout_s``, ``max_retries`` and ``concurrency`` from the stage config's ``difficulty`` block):
a timeout costs one sample's retry, not a group of 8 long ones. A sample still lost after its
retries is asked for again once every other sample is drawn (``lost_sample_rounds``; the same
seed, so the same text). A prompt that still lacks samples keeps the ones it has when at least
``min_samples`` remain (default half of ``n``, at least 2), its mean over them, counted as
``partial``; with fewer it is ``skipped`` and counted. The filter degrades, and stops
(:class:`FilterRefused`) only when more than ``max_failed_fraction`` of the prompts are skipped
(the server is failing, not one prompt). Without a URL it runs in process with transformers
(``num_return_sequences``). Each sample's seed comes from its prompt's content and its index, so a
retry, a resume or a rerun draws the same text.

Results: ``scores.jsonl`` (every row: mean, rewards, split), one JSONL of the original rows per
split (``rubric.jsonl``/``rule.jsonl`` or ``keep.jsonl``) and ``stats.json`` (written last: the
counts, the windows, the samples lost and the reward settings the samples were scored with,
``RewardSettings.record()``, so a launch can refuse results scored under other settings);
counts are also logged, with a progress bar over the samples. Samples are appended to
``samples.jsonl`` as they are drawn, so a killed filter, or a rerun after a flaky server, draws
only what is missing.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from reward.errors import InputError
from training.difficulty_results import FilterStats, filter_rows, reward_record, score_samples

__all__ = ["DifficultyConfig", "FilterRefused", "FilterStats", "Window", "filter_rows", "generate_in_process",
           "generate_with_server", "read_rows", "reward_record", "run_filter", "sample_prompts", "score_samples"]

log = logging.getLogger(__name__)


class Window(BaseModel):
    """An interval of mean rewards; each end inclusive unless said otherwise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lo: float
    hi: float
    lo_inclusive: bool = True
    hi_inclusive: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if self.lo > self.hi:
            raise ValueError(f"window lo {self.lo} is above hi {self.hi}")
        return self

    def __contains__(self, x: float) -> bool:
        above = x >= self.lo if self.lo_inclusive else x > self.lo
        below = x <= self.hi if self.hi_inclusive else x < self.hi
        return above and below

    def __str__(self) -> str:
        return f"{'[' if self.lo_inclusive else '('}{self.lo}, {self.hi}{']' if self.hi_inclusive else ')'}"


class DifficultyConfig(BaseModel):
    """How to sample and which windows route or keep a row."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(8, ge=1, description="completions sampled per row")
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(1024, ge=1, description="completion budget per sample")
    mode: Literal["split", "keep"] = Field("split", description="split: stages 1-2 routing; keep: stage 3 window")
    rubric: Window = Window(lo=0.1, hi=0.4)
    rule: Window = Window(lo=0.4, hi=0.7, lo_inclusive=False)
    keep: Window = Window(lo=0.15, hi=0.7)
    min_scored: int | None = Field(None, ge=1, description="fewest scored samples a row's mean may rest on "
                                                           "(default: all n); rows with fewer are set aside "
                                                           "as 'too_few_scored' and counted")
    batch_size: int = Field(8, ge=1, description="prompts per in-process generate call")
    concurrency: int = Field(32, ge=1, description="sample requests in flight to a generation server")
    timeout_s: float = Field(1800.0, gt=0, description="seconds one sample request may take (a 16k-token sample "
                                                       "decodes for minutes under load)")
    max_retries: int = Field(3, ge=0, description="retries of a failed sample request (timeouts, 5xx)")
    retry_backoff_s: float = Field(2.0, ge=0.0, description="wait before a request's first retry, doubled for each "
                                                            "further one (at most 30 s)")
    lost_sample_rounds: int = Field(1, ge=0, description="times a sample still lost after its retries is asked for "
                                                         "again, once every other sample is drawn")
    min_samples: int | None = Field(None, ge=1, description="fewest samples a prompt may keep when some are lost for "
                                                            "good (default: half of n, at least 2); a prompt with "
                                                            "fewer is skipped and counted")
    max_failed_fraction: float = Field(0.05, ge=0.0, le=1.0, description=(
        "share of prompts that may be skipped (fewer than min_samples samples after the retries); above it the "
        "filter stops: the server is failing"))
    seed: int | None = 0
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict,
                                                 description="e.g. {enable_thinking: false} for Qwen3")

    def split_of(self, mean: float | None) -> str:
        if mean is None or math.isnan(mean):
            return "unscored"
        if self.mode == "keep":
            return "keep" if mean in self.keep else "drop"
        if mean in self.rubric:
            return "rubric"
        if mean in self.rule:
            return "rule"
        return "drop"

    @property
    def splits(self) -> tuple[str, ...]:
        return ("keep",) if self.mode == "keep" else ("rubric", "rule")

    @property
    def samples_needed(self) -> int:
        """The fewest samples a prompt's mean may rest on when some were lost for good."""
        return min(self.n, self.min_samples or max(2, math.ceil(self.n / 2)))


# ---------------------------------------------------------------------------------- generation
OnSamples = Callable[[int, list[str]], None]
OnSample = Callable[[int, int, str], None]


def _settings(cfg: DifficultyConfig):
    from training.generation import GenerationSettings

    return GenerationSettings(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                              seed=cfg.seed or 0)


def sample_seed(cfg: DifficultyConfig, key: str, j: int | None = None) -> int | None:
    """The seed of a prompt's group (``j`` None) or of its sample ``j``: from the prompt's content,
    never its position, so a rerun, a resume or a retry draws the same text."""
    from training.generation.settings import prompt_seed

    return None if cfg.seed is None else prompt_seed(cfg.seed, key if j is None else f"{key}#{j}")


def generate_with_server(prompts: Sequence[list[dict]], *, url: str, model: str | None, cfg: DifficultyConfig,
                         todo: Sequence[tuple[int, int]] | None = None, keys: Sequence[str] | None = None,
                         on_sample: OnSample | None = None) -> dict[tuple[int, int], str | None]:
    """One request per sample from an OpenAI-compatible ``/v1/chat/completions`` endpoint
    (``model`` None: the first it serves): a timed-out request costs one sample, not a group of
    ``n`` long ones. ``todo``: the (prompt, sample) pairs to draw (default all); each is retried
    under ``cfg.max_retries`` with ``cfg.timeout_s`` per request, ``cfg.concurrency`` in flight.

    Returns (prompt, sample) -> text, or None for a sample that still failed (its error logged);
    ``on_sample(i, j, text)`` is called as each arrives."""
    from reward.serving import RetryPolicy
    from training.generation import GenRequest, HTTPGenerator

    keys = list(keys) if keys is not None else [str(i) for i in range(len(prompts))]
    todo = list(todo) if todo is not None else [(i, j) for i in range(len(prompts)) for j in range(cfg.n)]
    retry = RetryPolicy(max_retries=cfg.max_retries, backoff_s=cfg.retry_backoff_s, max_backoff_s=30.0)
    generator = HTTPGenerator(url, model, _settings(cfg), concurrency=cfg.concurrency, timeout_s=cfg.timeout_s,
                              retry=retry, chat_template_kwargs=cfg.chat_template_kwargs)
    out: dict[tuple[int, int], str | None] = {}

    def done(key: str, output) -> None:
        i, j = (int(x) for x in key.split("/"))
        if not output.ok:
            log.warning("difficulty filter: sample %d of prompt %d failed after %d tries: %s", j, i,
                        cfg.max_retries + 1, output.error)
            out[(i, j)] = None
            return
        out[(i, j)] = output.samples[0]
        if on_sample is not None:
            on_sample(i, j, output.samples[0])

    requests = [GenRequest(f"{i}/{j}", list(prompts[i]), n=1, seed=sample_seed(cfg, keys[i], j)) for i, j in todo]
    try:
        generator.generate(requests, done, desc="difficulty: sample")
    finally:
        generator.close()
    return out


def generate_in_process(prompts: Sequence[list[dict]], *, model: Any, cfg: DifficultyConfig,
                        tokenizer: Any = None, on_done: OnSamples | None = None) -> list[list[str] | None]:
    """``n`` samples per prompt with transformers ``generate`` (``num_return_sequences``); None for
    a prompt whose generation failed.

    Args:
        model: a model name/path or a loaded ``PreTrainedModel`` (e.g. the trainer's policy).
        tokenizer: required when ``model`` is a loaded model without a name to load one from.
        on_done: called as ``on_done(i, samples)`` after each batch, for each of its prompts.
    """
    from training.generation import GenRequest, TransformersGenerator

    generator = TransformersGenerator(model, _settings(cfg), batch_size=cfg.batch_size, tokenizer=tokenizer,
                                      chat_template_kwargs=cfg.chat_template_kwargs)
    requests = [GenRequest(str(i), list(p), n=cfg.n, seed=None if cfg.seed is None else cfg.seed + i)
                for i, p in enumerate(prompts)]
    out: dict[int, list[str] | None] = {}

    def done(key: str, output) -> None:
        if not output.ok:
            log.warning("difficulty filter: prompt %s failed: %s", key, output.error)
            out[int(key)] = None
            return
        out[int(key)] = list(output.samples)
        if on_done is not None:
            on_done(int(key), out[int(key)])

    try:
        generator.generate(requests, done, desc="difficulty: sample")
    finally:
        generator.close()
    return [out.get(i) for i in range(len(prompts))]


class FilterRefused(InputError):
    """More prompts than ``max_failed_fraction`` could not be sampled: the server is failing (an
    InputError naming the setting, so launchers report it as one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="difficulty.max_failed_fraction")


def sample_prompts(prompts: Sequence[list[dict]], *, model: Any, cfg: DifficultyConfig,
                   generate_url: str | None = None, served_model: str | None = None, tokenizer: Any = None,
                   out_dir: str | Path | None = None) -> list[list[str] | None]:
    """``cfg.n`` samples per prompt from a server (``generate_url``, one request per sample) or in
    process (one group per prompt).

    A sample lost after its request's retries is asked for again, after every other sample, up to
    ``cfg.lost_sample_rounds`` times. A prompt that still lacks some keeps the samples it has
    (in index order) when at least ``cfg.samples_needed`` remain; with fewer it gets None (skipped
    and counted by :func:`filter_rows`).

    With ``out_dir``, every sample is appended to ``out_dir/samples.jsonl`` as soon as it exists,
    keyed by the prompt and everything that decides it (model, n, temperature, top_p, budget,
    template options) and its index: a filter killed after hours of sampling, or rerun after a
    flaky server lost some, draws only what is missing (same seeds, so the same text).

    Raises:
        FilterRefused: more than ``cfg.max_failed_fraction`` of the prompts were left with fewer
            than ``cfg.samples_needed`` samples (what was drawn stays in ``samples.jsonl``: a
            rerun resumes).
    """
    import hashlib

    from reward.jsonl import JsonlLog

    ident = (served_model or generate_url) if generate_url else (
        str(model) if isinstance(model, (str, Path)) else getattr(getattr(model, "config", None), "_name_or_path", ""))
    settings = json.dumps({"model": ident, "n": cfg.n, "temperature": cfg.temperature, "top_p": cfg.top_p,
                           "max_new_tokens": cfg.max_new_tokens, "chat_template_kwargs": cfg.chat_template_kwargs},
                          sort_keys=True)
    keys = [hashlib.sha256((settings + json.dumps(p, sort_keys=True)).encode()).hexdigest()[:32] for p in prompts]
    log_ = JsonlLog(Path(out_dir) / "samples.jsonl") if out_dir is not None else None
    have: dict[str, dict[int, str]] = {}
    for rec in log_.load() if log_ is not None else []:
        k = rec.get("key")
        if not isinstance(k, str):
            continue
        if isinstance(rec.get("samples"), list) and len(rec["samples"]) == cfg.n:  # a whole group
            have.setdefault(k, dict(enumerate(rec["samples"])))
        elif isinstance(rec.get("index"), int) and 0 <= rec["index"] < cfg.n and isinstance(rec.get("text"), str):
            have.setdefault(k, {}).setdefault(rec["index"], rec["text"])

    def missing() -> list[tuple[int, int]]:
        return [(i, j) for i, k in enumerate(keys) for j in range(cfg.n) if j not in have.get(k, {})]

    todo = missing()
    reused = len(prompts) * cfg.n - len(todo)
    if reused:
        log.info("difficulty filter: reusing %d of %d samples from %s", reused, len(prompts) * cfg.n, log_.path)
    try:
        for round_ in range(1 + cfg.lost_sample_rounds):
            if not todo:
                break
            if round_:
                log.warning("difficulty filter: asking again for %d lost sample(s) (round %d of %d)", len(todo),
                            round_ + 1, 1 + cfg.lost_sample_rounds)
            _draw(prompts, todo, keys, have, log_, model=model, cfg=cfg, generate_url=generate_url,
                  served_model=served_model, tokenizer=tokenizer)
            todo = missing()
    finally:
        if log_ is not None:
            log_.close()
    return _enough_samples(keys, have, cfg, log_.path if log_ is not None else None)


def _draw(prompts: Sequence[list[dict]], todo: list[tuple[int, int]], keys: list[str], have: dict[str, dict[int, str]],
          log_: Any, *, model: Any, cfg: DifficultyConfig, generate_url: str | None, served_model: str | None,
          tokenizer: Any) -> None:
    """Draw the ``todo`` (prompt, sample) pairs into ``have`` (and ``samples.jsonl``)."""

    def record_sample(i: int, j: int, text: str) -> None:
        have.setdefault(keys[i], {})[j] = text
        if log_ is not None:
            log_.append({"key": keys[i], "index": j, "text": text})

    t0 = time.perf_counter()
    if generate_url:
        generate_with_server(prompts, url=generate_url, model=served_model, cfg=cfg, todo=todo, keys=keys,
                             on_sample=record_sample)
    else:
        chosen = sorted({i for i, _ in todo})

        def record_group(c: int, samples: list[str]) -> None:
            have[keys[chosen[c]]] = dict(enumerate(samples))
            if log_ is not None:
                log_.append({"key": keys[chosen[c]], "samples": samples})

        generate_in_process([prompts[i] for i in chosen], model=model, cfg=cfg, tokenizer=tokenizer,
                            on_done=record_group)
    log.info("difficulty filter: drew %d samples in %.1fs", len(todo), time.perf_counter() - t0)


def _enough_samples(keys: list[str], have: dict[str, dict[int, str]], cfg: DifficultyConfig,
                    log_path: Path | None) -> list[list[str] | None]:
    """Each prompt's samples in index order, None for one with fewer than ``cfg.samples_needed``;
    refuses when more than ``cfg.max_failed_fraction`` of the prompts are None."""
    need = cfg.samples_needed
    out = [[got[j] for j in sorted(got)] if len(got := have.get(k, {})) >= need else None for k in keys]
    lost = sum(o is None for o in out)
    short = sum(o is not None and len(o) < cfg.n for o in out)
    if short:
        log.warning("difficulty filter: %d prompt(s) kept with fewer than %d samples (at least %d each): some "
                    "samples were lost after %d retries and %d more round(s)", short, cfg.n, need, cfg.max_retries,
                    cfg.lost_sample_rounds)
    if lost:
        share = lost / len(keys)
        msg = (f"difficulty filter: {lost} of {len(keys)} prompts ({share:.1%}) have fewer than {need} of {cfg.n} "
               f"samples after {cfg.max_retries} retries of {cfg.timeout_s:g} s per request and "
               f"{cfg.lost_sample_rounds} more round(s)")
        if share > cfg.max_failed_fraction:
            raise FilterRefused(f"{msg}, more than max_failed_fraction = {cfg.max_failed_fraction:g}: the policy "
                                "server is failing. What was drawn is kept"
                                + (f" in {log_path}: rerun to draw only the rest" if log_path is not None else ""))
        log.warning("%s: skipped and counted (at most difficulty.max_failed_fraction = %g)", msg,
                    cfg.max_failed_fraction)
    return out


def read_rows(path: str | Path) -> list[dict]:
    from reward.jsonl import iter_jsonl

    return [obj for _, obj in iter_jsonl(path)]


def run_filter(data: str | Path, *, model: Any, out_dir: str | Path | None, kind: str = "mcq",
               cfg: DifficultyConfig | None = None, generate_url: str | None = None,
               served_model: str | None = None, reward_fn: Callable | None = None,
               system_prompt: str | None = None, limit: int | None = None,
               tokenizer: Any = None) -> tuple[dict[str, list[dict]], FilterStats]:
    """Filter a data file end to end: build prompts, sample, score, split, write.

    Args:
        data: MCQ JSONL (``kind="mcq"``) or HealthBench-format JSONL (``kind="healthbench"``).
        model: the policy (name/path, or a loaded model with ``tokenizer``); with
            ``generate_url`` the server's model (``served_model``, default: the first it serves).
        reward_fn: the stage's reward; default the MCQ rule reward for ``mcq``. Required for
            ``healthbench`` (e.g. a ``RubricRewardFunc``).
        cfg: windows and sampling; default ``split`` for MCQ and ``keep`` for HealthBench.
    """
    from training.data import build_healthbench_dataset, build_mcq_dataset

    raw = read_rows(data)[:limit] if limit else read_rows(data)
    if kind == "mcq":
        dataset = build_mcq_dataset(raw, system_prompt=system_prompt or "none")
        cfg = cfg or DifficultyConfig(mode="split")
        if reward_fn is None:
            from reward.integrations.trl import MCQRuleReward

            reward_fn = MCQRuleReward()
    elif kind == "healthbench":
        dataset = build_healthbench_dataset(raw, system_prompt=system_prompt or "ours")
        cfg = cfg or DifficultyConfig(mode="keep")
        if reward_fn is None:
            raise ValueError("the HealthBench filter needs a reward function (e.g. RubricRewardFunc)")
    else:
        raise ValueError(f"unknown data kind {kind!r}: use 'mcq' or 'healthbench'")
    samples = sample_prompts([row["prompt"] for row in dataset], model=model, cfg=cfg, generate_url=generate_url,
                             served_model=served_model, tokenizer=tokenizer, out_dir=out_dir)
    return filter_rows(raw, dataset, samples, reward_fn, cfg, out_dir)
