"""Optional Weights & Biases logging of an evaluation's metrics.

Never required: without the ``wandb`` package, or with ``WANDB_MODE=disabled``, it logs a line
and returns. Without an API key and without ``WANDB_MODE`` it runs offline (a run folder to
``wandb sync`` later) instead of prompting for a login on a training node. A logging failure
never fails the evaluation that produced the numbers.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from reward._optional import is_available

log = logging.getLogger(__name__)


def flat_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Numbers of a ``metrics.json`` as flat ``eval/...`` keys (tags keep their ``theme:`` names)."""
    bench = metrics.get("benchmark", "eval")
    out: dict[str, float] = {}
    for key in ("score", "bootstrap_std", "n_samples", "n_scored", "n_unscored", "accuracy", "format_failures"):
        if isinstance(metrics.get(key), (int, float)):
            out[f"{bench}/{key}"] = metrics[key]
    for tag, m in (metrics.get("tags") or {}).items():
        out[f"{bench}/{tag}"] = m["score"]
    la = metrics.get("length_adjusted")
    if la:
        out[f"{bench}/length_adjusted_score"] = la["score"]
    for field, values in (metrics.get("categories") or {}).items():
        for value, m in values.items():
            out[f"{bench}/{field}={value}"] = m["accuracy"]
    return out


def log_to_wandb(metrics: dict[str, Any], out_dir: str | Path, project: str | None = None) -> bool:
    """Log ``metrics`` as one wandb run's summary; returns whether anything was logged.

    Args:
        metrics: a ``metrics.json`` content.
        out_dir: the evaluation folder (the run's name and where an offline run is kept).
        project: wandb project (default ``$WANDB_PROJECT`` or ``rubricstree-eval``).
    """
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode == "disabled" or not is_available("wandb"):
        log.warning("wandb logging skipped (%s)", "WANDB_MODE=disabled" if mode == "disabled" else "wandb not installed")
        return False
    if not mode and not os.environ.get("WANDB_API_KEY"):
        mode = "offline"
    try:
        import wandb

        out = Path(out_dir)
        run = wandb.init(project=project or os.environ.get("WANDB_PROJECT", "rubricstree-eval"),
                         name=f"{metrics.get('benchmark')}:{out.name}", dir=str(out), mode=mode or None,
                         job_type="eval", config={k: metrics.get(k) for k in ("model", "data", "grading",
                                                                             "system_prompt", "generation")},
                         reinit=True)
        run.log(flat_metrics(metrics))
        run.finish()
        return True
    except Exception as exc:  # a tracking outage must not lose an evaluation
        log.warning("wandb logging failed: %s", exc)
        return False
