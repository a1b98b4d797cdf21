"""What the difficulty filter makes of its samples: each sample scored by the stage's reward, each
row routed by its mean (``DifficultyConfig.split_of``), and the results written: ``scores.jsonl``,
one JSONL of the original rows per split and ``stats.json`` last (:class:`FilterStats`: the counts,
the windows, the samples lost and the reward settings the samples were scored with). A launch
that reuses the results checks those settings against its own (:func:`check_filter_reward`)."""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from reward.errors import InputError

__all__ = ["FilterStats", "check_filter_reward", "filter_rows", "reward_record", "score_samples", "settings_diff"]

log = logging.getLogger("training.difficulty")  # the filter's one logger, wherever the code lives


def score_samples(reward_fn: Callable, dataset,
                  samples: Sequence[Sequence[str] | None]) -> list[list[float | None] | None]:
    """Score every sample with a TRL-style reward function (sync or async), one call per batch.

    ``dataset`` rows give the reward its columns (``answer``, ``options``, ``rubrics``, ...); a row
    without samples (None: it could not be sampled) gets None.
    """
    from reward.runtime import run_sync

    cols = [c for c in dataset.column_names if c != "prompt"]
    prompts, completions, kwargs = [], [], {c: [] for c in cols}
    for row, comps in zip(dataset, samples):
        for c in comps or ():
            prompts.append(row["prompt"])
            completions.append([{"role": "assistant", "content": c}])
            for col in cols:
                kwargs[col].append(row[col])
    result = reward_fn(prompts=prompts, completions=completions, completion_ids=None, **kwargs) if prompts else []
    if inspect.isawaitable(result):
        result = run_sync(result)
    flat = list(result) if prompts else []
    out: list[list[float | None] | None] = []
    pos = 0
    for comps in samples:
        if comps is None:
            out.append(None)
            continue
        out.append(flat[pos:pos + len(comps)])
        pos += len(comps)
    return out


class FilterStats(BaseModel):
    """What the filter did: counts per split, the windows, the samples lost, the reward settings
    it scored with, where the files are."""

    rows: int
    counts: dict[str, int]
    windows: dict[str, str]
    mean_of_means: float | None
    seconds: float
    out_dir: str | None = None
    partial: int = Field(0, description="rows kept with fewer than n samples (some lost after every retry)")
    samples_lost: int = Field(0, description="samples missing after every retry from the rows kept with fewer than n")
    reward: dict[str, Any] | None = Field(None, description="the reward settings the samples were scored with "
                                                            "(RewardSettings.record()); None for a reward without "
                                                            "settings (the MCQ rule reward)")


def reward_record(reward_fn: Any) -> dict[str, Any] | None:
    """The settings a reward function scores with, as runs record them (``RewardSettings.record()``);
    None for one that has none (the MCQ rule reward, a plain function)."""
    settings = getattr(reward_fn, "settings", None)
    record = getattr(settings, "record", None)
    return record() if callable(record) else None


def filter_rows(raw_rows: Sequence[dict], dataset, samples: Sequence[Sequence[str] | None], reward_fn: Callable,
                cfg: Any, out_dir: str | Path | None = None) -> tuple[dict[str, list[dict]], FilterStats]:
    """Score ``samples`` (per row of ``dataset``), split ``raw_rows`` by their mean reward and
    write the results under ``out_dir`` when given. A row without samples (None: the server could
    not sample enough of it) is ``skipped`` and counted; a row with fewer than ``cfg.n`` (some lost
    for good) is averaged over the ones it has and counted as ``partial``. The stats record the
    reward's settings (:func:`reward_record`). ``cfg``: the filter's ``DifficultyConfig`` (not
    imported here: that module imports this one). Returns ``{split: rows}`` and the stats."""
    t0 = time.perf_counter()
    rewards = score_samples(reward_fn, dataset, samples)
    splits: dict[str, list[dict]] = {s: [] for s in (*cfg.splits, "drop", "unscored", "too_few_scored", "skipped")}
    records = []
    means = []
    ids = (dataset["row_id"] if "row_id" in dataset.column_names
           else dataset["prompt_id"] if "prompt_id" in dataset.column_names else list(range(len(raw_rows))))
    partial = lost = 0
    for i, (raw, rs) in enumerate(zip(raw_rows, rewards)):
        if rs is None:
            splits["skipped"].append(raw)
            records.append({"index": i, "id": ids[i], "mean": None, "n_samples": 0, "n_scored": 0, "rewards": None,
                            "split": "skipped"})
            continue
        partial += len(rs) < cfg.n
        lost += max(0, cfg.n - len(rs))
        scored = [float(r) for r in rs if r is not None and not math.isnan(float(r))]
        mean = sum(scored) / len(scored) if scored else None
        split = cfg.split_of(mean)
        need = min(cfg.min_scored, cfg.n) if cfg.min_scored else len(rs)  # default: every sample drawn
        if mean is not None and len(scored) < need:  # a mean of 1 of 8 samples decides nothing
            split = "too_few_scored"
        splits[split].append(raw)
        if mean is not None:
            means.append(mean)
        records.append({"index": i, "id": ids[i], "mean": mean, "n_samples": len(rs),
                        "n_scored": len(scored), "rewards": rs, "split": split})
    counts = {k: len(v) for k, v in splits.items()}
    windows = {"keep": str(cfg.keep)} if cfg.mode == "keep" else {"rubric": str(cfg.rubric), "rule": str(cfg.rule)}
    stats = FilterStats(rows=len(raw_rows), counts=counts, windows=windows,
                        mean_of_means=sum(means) / len(means) if means else None,
                        seconds=time.perf_counter() - t0, out_dir=str(out_dir) if out_dir else None,
                        partial=partial, samples_lost=lost, reward=reward_record(reward_fn))
    log.info("difficulty filter: %d rows -> %s (windows %s)", len(raw_rows),
             ", ".join(f"{k} {v}" for k, v in counts.items()), windows)
    if counts["skipped"]:
        log.warning("difficulty filter: %d row(s) skipped: the server could not sample enough of them (retried; "
                    "see above)", counts["skipped"])
    if partial:
        log.warning("difficulty filter: %d row(s) kept with fewer than %d samples (%d samples lost in them)",
                    partial, cfg.n, lost)
    if counts["too_few_scored"]:
        log.warning("difficulty filter: %d row(s) dropped: fewer scored samples than min_scored (%s)",
                    counts["too_few_scored"], cfg.min_scored or "all")
    if out_dir is not None:
        from reward.jsonl import write_jsonl

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / "scores.jsonl", records)
        for split in cfg.splits:
            write_jsonl(out / f"{split}.jsonl", splits[split])
        # last, and atomically: its presence means the folder is complete (other ranks wait for it)
        tmp = out / "stats.json.tmp"
        tmp.write_text(stats.model_dump_json(indent=2))
        tmp.replace(out / "stats.json")
    return splits, stats


def settings_diff(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``key: A -> B`` for every key whose value differs between two settings records."""
    return [f"{k}: {before.get(k, '(absent)')!r} -> {now.get(k, '(absent)')!r}"
            for k in sorted(before.keys() | now.keys()) if before.get(k) != now.get(k)]


def check_filter_reward(stats: FilterStats, expected: dict[str, Any] | None, path: Path) -> None:
    """Refuse filter results scored under other reward settings than a run's filter would use
    (``expected``: :func:`reward_record` of it; None for a reward without settings).

    Raises:
        InputError: the results record other settings (each key named), or none.
    """
    if expected is None:
        return
    if stats.reward is None:
        raise InputError("these difficulty results do not record the reward settings they were scored with (made "
                         "before the filter recorded them), so they cannot be checked against this run's: delete "
                         "stats.json (and epoch.json, for a per-epoch filter) to score them again (samples.jsonl is "
                         "kept: nothing is sampled again)", file=str(path), field="reward")
    diffs = settings_diff(stats.reward, expected)
    if diffs:
        raise InputError("these difficulty results were scored with other reward settings than this run's ("
                         + "; ".join(diffs) + "): delete stats.json (and epoch.json, for a per-epoch filter) to "
                         "score them again (samples.jsonl is kept), or set difficulty.out_dir", file=str(path),
                         field="reward")
