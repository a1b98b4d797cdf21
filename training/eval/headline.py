"""The headline of a HealthBench run as published figures are written: a percentage with a 95%
bootstrap interval; against a baseline folder, the difference with its paired interval; and the
published figures for the same benchmark beside it.

The interval resamples examples with replacement (seeded), takes the mean of the unclipped
example scores and clips it to [0, 1], as the overall score is computed; the 2.5th and 97.5th
percentiles bound it. The difference to a baseline resamples the examples both runs scored
(paired: one index draw for both), so what the two runs share cancels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reward.errors import InputError

LEVEL = 0.95


def _clip(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, 1.0)


def _percentiles(values: np.ndarray) -> list[float]:
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return [float(lo), float(hi)]


def score_interval(scores: Sequence[float], *, n_bootstrap: int = 1000, seed: int = 0) -> list[float] | None:
    """95% percentile interval of the clipped mean of ``scores`` (unclipped example scores)."""
    x = np.asarray(scores, dtype=float)
    if len(x) < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_bootstrap, len(x)))
    return _percentiles(_clip(x[idx].mean(axis=1)))


def read_example_scores(folder: str | Path) -> dict[str, float]:
    """``{prompt_id: unclipped score}`` of an evaluation folder's ``example_scores.jsonl``.

    Raises:
        InputError: the folder holds no finished HealthBench evaluation.
    """
    path = Path(folder) / "example_scores.jsonl"
    if not path.is_file():
        raise InputError("no example_scores.jsonl: not a finished HealthBench evaluation folder", file=str(path))
    out = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                out[str(row["id"])] = float(row["score"])
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"unreadable example score: {exc}", file=str(path), record=f"line {n}") from exc
    return out


def baseline_delta(ours: Mapping[str, float], base: Mapping[str, float], *, n_bootstrap: int = 1000,
                   seed: int = 0) -> dict[str, Any]:
    """The gain over a baseline, the one way every command computes it (``eval healthbench
    --baseline``, ``eval compare``): on the examples both runs scored, our clipped mean minus the
    baseline's (the reference's score: the mean of the unclipped example scores, clipped to
    [0, 1]), with a paired 95% bootstrap interval of that same difference (one index draw for
    both, ids in sorted order so the draws depend only on the ids and the seed) and
    ``p_not_better``, the share of resamples whose difference is <= 0."""
    ids = sorted(i for i in ours if i in base)
    if not ids:
        return {"n_common": 0, "delta": None, "delta_ci95": None, "p_not_better": None}
    a = np.array([ours[i] for i in ids])
    b = np.array([base[i] for i in ids])
    out: dict[str, Any] = {"n_common": len(ids), "ours_on_common": float(_clip(a.mean())),
                           "baseline_on_common": float(_clip(b.mean()))}
    out["delta"] = out["ours_on_common"] - out["baseline_on_common"]
    out["delta_ci95"] = out["p_not_better"] = None
    if len(ids) >= 2:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(ids), size=(n_bootstrap, len(ids)))
        draws = _clip(a[idx].mean(axis=1)) - _clip(b[idx].mean(axis=1))
        out["delta_ci95"] = _percentiles(draws)
        out["p_not_better"] = float(np.mean(draws <= 0))
    return out


def add_headline(metrics: dict[str, Any], example_scores: Mapping[str, float], *, baseline: str | None,
                 n_bootstrap: int, seed: int) -> None:
    """Add ``score_ci95``, ``baseline`` (when given) and ``published`` (figures for the same
    benchmark, copied from papers) to ``metrics``."""
    metrics["score_ci95"] = score_interval(list(example_scores.values()), n_bootstrap=n_bootstrap, seed=seed)
    if baseline:
        base_metrics_path = Path(baseline) / "metrics.json"
        base_metrics = json.loads(base_metrics_path.read_text(encoding="utf-8")) if base_metrics_path.is_file() else {}
        delta = baseline_delta(example_scores, read_example_scores(baseline), n_bootstrap=n_bootstrap, seed=seed)
        same_data = (base_metrics.get("data") or {}).get("sha256") == (metrics.get("data") or {}).get("sha256")
        metrics["baseline"] = {"folder": str(baseline), "model": base_metrics.get("model"),
                               "score": base_metrics.get("score"), "same_data_file": same_data, **delta}
    from training.eval.published import benchmark_key, figures_for, load_published

    metrics["published"] = [f.model_dump() for f in figures_for(benchmark_key(metrics), load_published())]


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def headline_text(m: Mapping[str, Any]) -> str:
    """``41.2% (95% CI 38.9-43.5%, n=1000)`` and, with a baseline, the difference."""
    if m.get("score") is None:
        return "no example could be scored"
    ci = m.get("score_ci95")
    s = pct(m["score"])
    s += f" (95% CI {pct(ci[0])} to {pct(ci[1])}, n={m['n_samples']})" if ci else f" (n={m['n_samples']})"
    la = m.get("length_adjusted")
    if la:
        s += f"; length-adjusted ({la['variant']}, p={la['p']}): {pct(la['score'])}"
    return s


def baseline_text(m: Mapping[str, Any]) -> str | None:
    b = m.get("baseline")
    if not b:
        return None
    if b.get("delta") is None:
        return f"baseline {b['folder']}: no example scored by both runs"
    ci = b.get("delta_ci95")
    s = (f"vs baseline {b.get('model') or b['folder']}: {100 * b['delta']:+.1f} points "
         + (f"(95% paired CI {100 * ci[0]:+.1f} to {100 * ci[1]:+.1f}) " if ci else "")
         + f"on the {b['n_common']} examples both scored ({pct(b['ours_on_common'])} vs {pct(b['baseline_on_common'])})")
    if not b.get("same_data_file"):
        s += "; WARNING: the baseline graded another data file"
    return s


def published_lines(m: Mapping[str, Any]) -> list[str]:
    return [f"published (copied): {f['model']}: {pct(f['score'])}; setting: {f['setting']}; grader: {f['grader']}; "
            f"source: {f['source']}" for f in m.get("published") or []]
