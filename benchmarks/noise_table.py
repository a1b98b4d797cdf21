"""The README's table of detection under judge errors, on the case sets it names.

    python benchmarks/noise_table.py [--sets bundled,blind:test,blind:dev] [--seeds 0,1,2] [--repeats 10]

Oracle verdicts with drawn judge errors (``reward.stress.noise``, as ``rubricstree stress
--judge-noise E --reread-correlation R --systematic-leaves F`` draws them), the default reward
(embedding router, severity scoring, failure confirmation on), error rates 0.05 and 0.10 and
three error models: independent readings, re-readings that repeat the first with p 0.5, 10% of
the leaves always misread. Prints clean mean / detection per cell, and for the gaming families
(verbose restatement, over-triage, refusal, empty hedge, sycophancy, false reassurance) on how
many cases the good reply's expected score (the mean over every draw) stays above the gaming
reply's, with the closest case (issue 46). Writes JSON
(``benchmarks/results/noise_table.json``). Each cell is the mean over the seeds; the JSON keeps
each seed's figures so their spread is visible. These are oracle figures with simulated errors:
they measure routing and scoring under a judge of that error rate, not any judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATES = (0.05, 0.10)
MODELS = {"independent": (0.0, 0.0), "re-read correlation 0.5": (0.5, 0.0), "10% of leaves always misread": (0.0, 0.10)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="bundled,blind:test,blind:dev")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/noise_table.json"))
    args = ap.parse_args()

    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.cases import GAMING
    from reward.stress.errors import ErrorModel
    from reward.stress.noise import noise_summary
    from reward.stress.runner import route_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    tree = load_tree()
    router = CachedRouter(build_router(RewardSettings(), tree, None), VerdictCache(ROOT / ".cache/bench/routings.sqlite"))
    seeds = [int(s) for s in args.seeds.split(",")]
    out: dict = {"reward": "default (embedding router, severity scoring, confirmation on)", "seeds": seeds,
                 "repeats": args.repeats, "sets": {}}
    for spec in args.sets.split(","):
        for label, path in resolve_cases(spec):
            cases = load_cases(path, tree)
            print(f"routing {label} ({len(cases)} cases) ...", file=sys.stderr)
            routings = asyncio.run(route_cases(router, cases))
            rows: dict = {}
            for rate in RATES:
                for name, (corr, share) in MODELS.items():
                    model = ErrorModel.independent(rate, reread_correlation=corr, systematic_fraction=share)
                    runs = [noise_summary(tree, cases, routings, DEFAULT_SCORING_VARIANT, seed=s, repeats=args.repeats,
                                          confirm_failures=True, errors=model) for s in seeds]
                    cell = {"clean_mean": statistics.fmean(r["clean_mean"] for r in runs),
                            "detection_rate": statistics.fmean(r["detection_rate"] for r in runs),
                            "by_seed": [[r["clean_mean"], r["detection_rate"]] for r in runs]}
                    gaps = {}  # per gaming case: the good reply's expected score minus the gaming reply's
                    for case, routing in zip(cases, routings):
                        if case.perturbation in GAMING:
                            gaps[case.id] = statistics.fmean(
                                noise_summary(tree, [case], [routing], DEFAULT_SCORING_VARIANT, seed=s,
                                              repeats=args.repeats, confirm_failures=True,
                                              errors=model)["mean_penalty"] for s in seeds)
                    if gaps:
                        worst = min(gaps, key=gaps.get)
                        cell["gaming"] = {"cases": len(gaps), "good_above": sum(g > 0 for g in gaps.values()),
                                          "closest": worst, "closest_gap": gaps[worst]}
                    rows.setdefault(f"{rate:g}", {})[name] = cell
                    g = cell.get("gaming")
                    print(f"{label:12s} {rate:<5g} {name:30s} {cell['clean_mean']:.3f} / {cell['detection_rate']:.3f}"
                          + (f"  gaming: good above on {g['good_above']}/{g['cases']}" if g else ""), file=sys.stderr)
            out["sets"][label] = {"cases": len(cases), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for label, part in out["sets"].items():
        print(f"\n{label} ({part['cases']} cases): clean mean / detection")
        print("| error rate | " + " | ".join(MODELS) + " |")
        for rate, cells in part["rows"].items():
            print(f"| {rate} | " + " | ".join(f"{c['clean_mean']:.3f} / {c['detection_rate']:.3f}"
                                              for c in cells.values()) + " |")
        for rate, cells in part["rows"].items():
            for name, c in cells.items():
                if "gaming" in c:
                    g = c["gaming"]
                    print(f"gaming, rate {rate}, {name}: the good reply expected above on {g['good_above']} of "
                          f"{g['cases']} cases (closest {g['closest']}: {g['closest_gap']:+.3f})")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
