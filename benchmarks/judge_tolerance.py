"""docs/judge.md's figures: the judge gate's interval arithmetic and the reward's noise tolerance.

    python benchmarks/judge_tolerance.py [--seeds 0,1,2] [--repeats 10] [--long-seeds 40]
                                         [--out benchmarks/results/judge_tolerance.json]

Two parts, both from the package's own code:

- ``gate``: the gate's thresholds (``reward.calibration.gate.JudgeGateSettings``), the z of its 95%
  intervals (``reward.calibration.stats.Z95``), and what they mean for a judge: the interval of a
  predicted detection of 0.90 on 188 distinct cases (``reward.calibration.run.detection_interval``,
  seeds that agree), Wilson's interval of a critical false-pass rate of 10/100, and the smallest
  point estimate whose interval clears ``min_detection`` on the distinct cases of the blind set's
  ``dev`` part.
- ``tolerance``: the largest judge error rate (false fail = false pass = applicability error, on a
  grid of step 0.02) at which the oracle stress test's detection rate, mean over the seeds, stays at
  or above 0.90 (``reward.stress.noise.noise_tolerance``: the calibration's own prediction model),
  for the shipped reward (default ``RewardSettings``: embedding router, default scoring variant,
  failure confirmation on) on the bundled stress cases, under four error models: independent
  readings, a re-reading that repeats the first with probability 0.5 or 0.9, and 5% of the leaves
  always misread. Also the detection at error rate 0.10, independent readings, over ``--long-seeds``
  seeds (0 to N-1): how far the three-seed figure is from its expectation.

Simulated errors on oracle verdicts: these say what the reward does under a judge of that error
rate, not what any judge's errors are. Takes about 2 minutes on the shared 2-core machine (the
routings come from ``.cache/bench/routings.sqlite`` when present) and writes
``benchmarks/results/judge_tolerance.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
GRID = tuple(round(0.02 * k, 2) for k in range(0, 11))  # 0, 0.02, ..., 0.20
MODELS = {"independent": (0.0, 0.0), "re-read correlation 0.5": (0.5, 0.0), "re-read correlation 0.9": (0.9, 0.0),
          "5% of leaves always misread": (0.0, 0.05)}
TARGET = 0.90
EXAMPLE_CASES, EXAMPLE_DETECTION = 188, 0.90
CRITICAL_FAILS, CRITICAL_ITEMS = 10, 100


def gate() -> dict:
    from reward.calibration.binding import distinct_cases
    from reward.calibration.gate import JudgeGateSettings
    from reward.calibration.run import detection_interval
    from reward.calibration.stats import Z95, wilson
    from reward.stress import load_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    settings = JudgeGateSettings()
    tree = load_tree()
    dev = [c for _, path in resolve_cases("blind:dev") for c in load_cases(path, tree)]
    n_dev = distinct_cases(dev)
    lo, hi = 0.0, 1.0  # the smallest point estimate whose Wilson lower end reaches min_detection
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if wilson(mid * n_dev, n_dev)[0] >= settings.min_detection else (mid, hi)
    low, high = detection_interval([EXAMPLE_DETECTION] * 3, EXAMPLE_CASES)
    cfp = wilson(CRITICAL_FAILS, CRITICAL_ITEMS)
    return {"min_detection": settings.min_detection, "max_critical_false_pass": settings.max_critical_false_pass,
            "min_cases": settings.min_cases, "z95": Z95,
            "example": {"cases": EXAMPLE_CASES, "detection": EXAMPLE_DETECTION, "low": low, "high": high},
            "critical_false_pass_10_of_100": {"rate": CRITICAL_FAILS / CRITICAL_ITEMS, "low": cfp[0], "high": cfp[1]},
            "blind_dev": {"cases": len(dev), "distinct_cases": n_dev, "least_passing_detection": hi}}


def tolerance(seeds: list[int], repeats: int, long_seeds: int) -> dict:
    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.errors import ErrorModel
    from reward.stress.noise import noise_summary, noise_tolerance
    from reward.stress.runner import route_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    settings = RewardSettings()
    tree = load_tree()
    router = CachedRouter(build_router(settings, tree, None), VerdictCache(ROOT / ".cache/bench/routings.sqlite"))
    (_, path), = resolve_cases("bundled")
    cases = load_cases(path, tree)
    routings = asyncio.run(route_cases(router, cases))
    out: dict = {"cases": len(cases), "seeds": seeds, "repeats": repeats, "target": TARGET,
                 "variant": DEFAULT_SCORING_VARIANT, "confirm_failures": settings.confirm_failures, "models": {}}
    for name, (corr, share) in MODELS.items():
        base = ErrorModel.independent(0.0, reread_correlation=corr, systematic_fraction=share)
        tol = noise_tolerance(tree, cases, routings, DEFAULT_SCORING_VARIANT, errors=base, target=TARGET, seeds=seeds,
                              repeats=repeats, confirm_failures=settings.confirm_failures, grid=GRID)
        curve = tol["curve"]
        at = next((p for p in curve if p["error_rate"] == tol["tolerance"]), None)
        nxt = curve[-1] if curve[-1]["detection_rate"] < TARGET else None
        out["models"][name] = {"reread_correlation": corr, "systematic_fraction": share, "tolerance": tol["tolerance"],
                               "detection_at_tolerance": at and at["detection_rate"],
                               "next_rate": nxt and nxt["error_rate"], "detection_at_next": nxt and nxt["detection_rate"],
                               "curve": curve}
        print(f"{name:30s} tolerance {tol['tolerance']}: "
              + ", ".join(f"{p['error_rate']:g} -> {p['detection_rate']:.3f}" for p in curve), file=sys.stderr)
    many = [noise_summary(tree, cases, routings, DEFAULT_SCORING_VARIANT, seed=s, repeats=repeats,
                          confirm_failures=settings.confirm_failures,
                          errors=ErrorModel.independent(0.10))["detection_rate"] for s in range(long_seeds)]
    out["independent_0.10_many_seeds"] = {"error_rate": 0.10, "seeds": long_seeds, "detection_rate": statistics.fmean(many),
                                          "sd_over_seeds": statistics.stdev(many) if len(many) > 1 else 0.0,
                                          "first_three_seeds": statistics.fmean(many[:3])}
    print(f"independent 0.10 over {long_seeds} seeds: {statistics.fmean(many):.3f}", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--repeats", type=int, default=10, help="draws per case and seed (the calibration's default)")
    ap.add_argument("--long-seeds", type=int, default=40)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/judge_tolerance.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = {"gate": gate(), "tolerance": tolerance([int(s) for s in args.seeds.split(",")], args.repeats, args.long_seeds)}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    g = out["gate"]
    print(f"gate: {g['example']['detection']} on {g['example']['cases']} cases -> [{g['example']['low']:.3f}, "
          f"{g['example']['high']:.3f}]; 10/100 critical false pass -> high {g['critical_false_pass_10_of_100']['high']:.3f}; "
          f"blind dev ({g['blind_dev']['distinct_cases']} distinct) passes from {g['blind_dev']['least_passing_detection']:.3f}")
    for name, m in out["tolerance"]["models"].items():
        print(f"| {name} | {m['tolerance']} | {m['detection_at_tolerance']}, {m['detection_at_next']} at {m['next_rate']} |")
    print(f"wrote {args.out} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
