"""Stress-test metrics: detection rate and mean penalty, overall, by perturbation, by scenario and
by cell (scenario x perturbation).

For a case, ``delta = score(clean) - score(perturbed)``. The detection rate is the share of scored
cases with ``delta > margin``; the mean penalty is the mean delta (negative: the evaluator rewarded
the degraded reply). Unscored cases (a judge failure) are left out and counted as ``unscored``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reward.stress.cases import PERTURBATIONS, SCENARIOS

DEFAULT_MARGIN = 0.02
# The noise blocks of a summary (``reward.stress.noise.noise_blocks``), in report order.
NOISE_KEYS = ("noise", "noise_confirmed", "noise_correlated", "noise_correlated_confirmed", "noise_measured",
              "noise_measured_confirmed", "noise_measured_posterior", "noise_measured_panel")


def _stats(deltas: Sequence[float], margin: float) -> dict[str, Any]:
    n = len(deltas)
    return {"detection_rate": sum(d > margin for d in deltas) / n if n else None,
            "mean_penalty": sum(deltas) / n if n else None, "n": n}


def _block(results: Sequence[Any], delta: Callable[[Any], float | None], margin: float) -> dict[str, Any]:
    scored = [(r, delta(r)) for r in results]
    scored = [(r, d) for r, d in scored if d is not None]
    deltas = [d for _, d in scored]
    overall = _stats(deltas, margin)

    def group(key: Callable[[Any], Any], names: Sequence[Any]) -> dict[str, dict[str, Any]]:
        present = [n for n in names if any(key(r) == n for r, _ in scored)]
        return {(n if isinstance(n, str) else "|".join(n)): _stats([d for r, d in scored if key(r) == n], margin)
                for n in present}

    return {
        "detection_rate": overall["detection_rate"],
        "mean_penalty": overall["mean_penalty"],
        "by_perturbation": group(lambda r: r.perturbation, PERTURBATIONS),
        "by_scenario": group(lambda r: r.scenario, SCENARIOS),
        "by_cell": group(lambda r: (r.scenario, r.perturbation), [(s, p) for s in SCENARIOS for p in PERTURBATIONS]),
        "unscored": len(results) - len(scored),
    }


def summarise(results: Sequence[Any], *, margin: float = DEFAULT_MARGIN, variant: str,
              baseline: bool = False) -> dict[str, Any]:
    """The ``rubricstree stress --json`` object (plus ``by_cell`` and ``unscored``, which
    :func:`public_summary` leaves out).

    Args:
        results: :class:`reward.stress.runner.CaseResult` objects.
        margin: a drop must exceed this to count as detected.
        variant: the tree scoring variant, reported as ``scoring_variant``.
        baseline: also summarise the holistic baseline's scores (else ``baseline`` is None).
    """
    ours = _block(results, lambda r: r.delta, margin)
    out = {"cases": len(results), "scoring_variant": variant, **ours, "baseline": None}
    if baseline:
        out["baseline"] = _block(results, lambda r: r.baseline_delta, margin)
    return out


def public_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The documented JSON shape: cases, scoring_variant, detection_rate, mean_penalty,
    by_perturbation, by_scenario, baseline (the same four metric keys, or None), and ``noise``
    (``reward.stress.noise.noise_summary``) when the run had ``--judge-noise`` or ``--judge-errors``,
    ``noise_confirmed`` (the same draws with failure confirmation) with ``--confirm-failures``,
    ``noise_correlated[_confirmed]`` (``--reread-correlation``/``--systematic-leaves``) or
    ``noise_measured[_confirmed]`` (``--judge-errors``) beside them, and ``noise_tolerance``."""
    keys = ("detection_rate", "mean_penalty", "by_perturbation", "by_scenario")
    base = summary.get("baseline")
    out = {"cases": summary["cases"], "scoring_variant": summary["scoring_variant"],
           **{k: summary[k] for k in keys},
           "baseline": None if base is None else {k: base[k] for k in keys}}
    for key in (*NOISE_KEYS, "noise_tolerance"):
        if summary.get(key):
            out[key] = summary[key]
    return out
