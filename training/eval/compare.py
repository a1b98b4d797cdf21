"""Compare evaluation folders: a table and a plot across checkpoints, and a paired bootstrap of
each checkpoint's difference from the first.

Pairing is per example id (``prompt_id`` for HealthBench, the row id for MCQ): only examples
scored in both folders count, and resampling draws the same examples for both, which removes
the between-prompt variance that dominates an unpaired comparison. The difference reported is
the one ``eval healthbench --baseline`` reports (``training.eval.headline.baseline_delta``): the
difference of the clipped means on the shared examples (the reference's score), with a
percentile 95% interval over seeded resamples.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.errors import InputError

DEFAULT_RESAMPLES = 1000


def load_run(folder: str | Path) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """``(metrics, scores, length_adjusted_scores)`` of an evaluation folder; scores by example id.

    Raises:
        InputError: the folder has no ``metrics.json`` or ``example_scores.jsonl``.
    """
    folder = Path(folder)
    mpath, spath = folder / "metrics.json", folder / "example_scores.jsonl"
    if not mpath.is_file() or not spath.is_file():
        raise InputError("not an evaluation folder (metrics.json and example_scores.jsonl are needed)",
                         file=str(folder))
    metrics = json.loads(mpath.read_text(encoding="utf-8"))
    scores: dict[str, float] = {}
    adjusted: dict[str, float] = {}
    for line in spath.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            scores[str(rec["id"])] = float(rec["score"])
            if rec.get("score_length_adjusted") is not None:
                adjusted[str(rec["id"])] = float(rec["score_length_adjusted"])
    return metrics, scores, adjusted


def paired_bootstrap(a: dict[str, float], b: dict[str, float], *, n_resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0) -> dict[str, Any]:
    """``b``'s gain over ``a`` (the baseline), computed as ``eval healthbench --baseline`` computes
    it (:func:`training.eval.headline.baseline_delta`: the clipped mean of ``b`` minus that of ``a``
    on the ids both have, with its paired 95% bootstrap interval).

    Returns:
        ``{"n_paired", "mean_diff", "ci95": [low, high], "p_not_better"}``; ``mean_diff`` is None
        when no id is shared.
    """
    from training.eval.headline import baseline_delta

    d = baseline_delta(b, a, n_bootstrap=n_resamples, seed=seed)
    return {"n_paired": d["n_common"], "mean_diff": d["delta"], "ci95": d["delta_ci95"],
            "p_not_better": d["p_not_better"]}


def _headline(metrics: dict[str, Any], adjusted: bool) -> tuple[float | None, float | None, int]:
    if metrics.get("benchmark") == "mcq":
        return metrics.get("accuracy"), metrics.get("std_error"), metrics.get("n_scored", 0)
    src = metrics.get("length_adjusted") if adjusted else metrics
    if not src:
        return None, None, 0
    return src.get("score"), src.get("bootstrap_std"), src.get("n_samples", 0)


def _breakdown(metrics: dict[str, Any], adjusted: bool) -> dict[str, dict[str, Any]]:
    """Per-theme (HealthBench) or per-category (MCQ) values, for the table and plot."""
    if metrics.get("benchmark") == "mcq":
        return {f"{f}={v}": {"score": m["accuracy"], "std": m.get("std_error")}
                for f, vals in (metrics.get("categories") or {}).items() for v, m in vals.items()}
    src = (metrics.get("length_adjusted") if adjusted else metrics) or {}
    return {t: {"score": m["score"], "std": m["bootstrap_std"]}
            for t, m in (src.get("tags") or {}).items() if t.startswith("theme:")}


def compare_runs(folders: Sequence[str | Path], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 length_adjusted: bool = False) -> dict[str, Any]:
    """Compare evaluation folders against the first one.

    Args:
        folders: two or more evaluation folders of the same benchmark.
        n_resamples, seed: the paired bootstrap's settings.
        length_adjusted: compare HealthBench's length-adjusted scores (the runs must have them).

    Returns:
        ``{"baseline", "runs": [...], "warnings": [...]}``; each run has its headline score,
        std, n, per-theme/category values and (except the first) ``diff`` from the paired
        bootstrap.

    Raises:
        InputError: fewer than two folders, or folders of different benchmarks.
    """
    if len(folders) < 2:
        raise InputError("give at least two evaluation folders to compare")
    loaded = [load_run(f) for f in folders]
    benches = {m.get("benchmark") for m, _, _ in loaded}
    if len(benches) > 1:
        raise InputError(f"the folders hold different benchmarks: {sorted(map(str, benches))}")
    warnings = []
    base_m, base_s, base_a = loaded[0]
    for key in ("grading", "data"):
        ref = {k: v for k, v in (base_m.get(key) or {}).items() if k not in ("limit", "source")}
        for f, (m, _, _) in zip(folders[1:], loaded[1:]):
            other = {k: v for k, v in (m.get(key) or {}).items() if k not in ("limit", "source")}
            if other != ref:
                warnings.append(f"{f}: {key} differs from {folders[0]}; the difference mixes models and {key}")
    runs = []
    for i, (f, (m, s, a)) in enumerate(zip(folders, loaded)):
        if length_adjusted and m.get("benchmark") == "healthbench" and not m.get("length_adjusted"):
            raise InputError("no length-adjusted scores in this folder (run it with --length-adjust)", file=str(f))
        score, std, n = _headline(m, length_adjusted)
        entry = {"dir": str(f), "model": m.get("model"), "score": score, "std": std, "n": n,
                 "n_unscored": m.get("n_unscored", 0), "breakdown": _breakdown(m, length_adjusted)}
        if i:
            pa, pb = (base_a, a) if length_adjusted else (base_s, s)
            entry["diff"] = paired_bootstrap(pa, pb, n_resamples=n_resamples, seed=seed)
        runs.append(entry)
    return {"benchmark": benches.pop(), "baseline": str(folders[0]), "length_adjusted": length_adjusted,
            "n_resamples": n_resamples, "seed": seed, "runs": runs, "warnings": warnings}


def compare_plot(result: dict[str, Any], path: str | Path) -> Path:
    """Grouped bars: the headline and each theme/category, one bar per run, std error bars; the
    published figures in ``result["published"]`` as dashed lines marked "(copied)"."""
    from training.eval.report import _pyplot

    plt = _pyplot()
    runs = result["runs"]
    cats = ["overall"] + sorted({k for r in runs for k in r["breakdown"]})
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(cats) * max(1, len(runs) / 2) + 1.5))
    for j, r in enumerate(runs):
        vals = [r["score"] if c == "overall" else r["breakdown"].get(c, {}).get("score") for c in cats]
        errs = [r["std"] if c == "overall" else r["breakdown"].get(c, {}).get("std") for c in cats]
        ys = [i + j * width for i in range(len(cats))]
        ax.barh(ys, [v or 0.0 for v in vals], height=width, xerr=[e or 0.0 for e in errs], capsize=2,
                label=f"{Path(r['dir']).name} ({r['model']})")
    for k, ref in enumerate(result.get("published") or []):  # another lab's number, not a run of ours
        ax.axvline(ref["score"], color=f"C{(len(runs) + k) % 10}", linestyle="--", linewidth=1.2,
                   label=f"{ref['model']}: {ref['score']:.3f} (copied; {ref['setting']})")
    ax.set_yticks([i + width * (len(runs) - 1) / 2 for i in range(len(cats))], cats)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("accuracy" if result["benchmark"] == "mcq" else "HealthBench score")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Comparison (error bars: bootstrap std / standard error)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def attach_published(result: dict, first_dir: str | Path, path: str | Path | None = None) -> dict:
    """Add ``result["published"]``: the figures for the compared benchmark (read from the first
    folder's metrics), each as a plain dict; a warning when there is none."""
    from training.eval.published import benchmark_key, figures_for, load_published

    metrics, _, _ = load_run(first_dir)
    key = benchmark_key(metrics)
    figs = figures_for(key, load_published(path))
    result["published"] = [f.model_dump() for f in figs]
    if not figs:
        result.setdefault("warnings", []).append(f"no published figure for benchmark {key!r}")
    return result
