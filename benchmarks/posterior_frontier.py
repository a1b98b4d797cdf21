"""What calibration buys the reward: posterior verdicts and a second judge, under judge error models
(issue 45).

    python benchmarks/posterior_frontier.py [--eval bundled,blind:test] [--seeds 0,1,2] [--repeats 10]
                                            [--out benchmarks/results/posterior_frontier.json] [--json]

Two simulated judges of known, independent errors (``reward.calibration.simulated``: they read the
labels and err as told, each with its own systematic leaves) are calibrated on the blind set's
``dev`` part, as ``rubricstree judge calibrate`` would (the real calibration code on the real
items), under four error models at error rate 0.10 (false fail and false pass; applicability errors
0.10 too): independent readings, re-readings that repeat the first with p 0.5, 10% of leaves
misread on every reading, and both. Then the oracle stress test draws each judge's readings from the
same model on the evaluation sets (routed by the embedding router) and scores them five ways:

- ``confirmation``: the shipped reward (failures read again, the majority stands);
- ``posterior``: every leaf scored at P(met | its readings) from judge A's calibration
  (``reward.scoring.posterior``);
- ``+ B on critical`` / ``+ B on critical and flagged`` / ``+ B on every leaf``: a second judge reads
  those leaves once per reply, its reading entering the posterior (flagged: the leaves A's
  calibration names systematic or one-sided, or whose shrunk error rate is above 0.25).

For each: detection rate, clean-reply mean and extra judge items per reply (confirmation readings
plus the second judge's), mean over the seeds. The simulated judges say nothing about a real
model's errors: these figures say what the reward does under these error models when calibration
measured them on other cases; ``benchmarks/panel_real_judges.py`` measures two real models.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATE = 0.10
MODELS = {"independent": (0.0, 0.0), "re-read correlation 0.5": (0.5, 0.0), "10% systematic leaves": (0.0, 0.10),
          "both": (0.5, 0.10)}
DESIGNS = ("confirmation", "posterior", "+ B on critical", "+ B on critical and flagged", "+ B on every leaf")


def flagged_leaves(record, rates, tree) -> set[str]:
    out = {s.leaf_id for s in record.systematic} | set(record.one_sided())
    for lid in record.coverage:
        r = rates.rates(lid, tree.severity[lid], tree[lid].polarity)
        if max(r.ff, r.fp) > 0.25:
            out.add(lid)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval", default="bundled,blind:test")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/posterior_frontier.json"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from reward.calibration.run import calibrate
    from reward.calibration.simulated import simulated_judge
    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.scoring.posterior import JudgeRates, Posterior
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.errors import ErrorModel
    from reward.stress.noise import PanelSim, noise_summary
    from reward.stress.runner import route_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    tree = load_tree()
    cache = VerdictCache(ROOT / ".cache" / "bench" / "routings.sqlite")
    router = CachedRouter(build_router(RewardSettings(), tree, None), cache)
    seeds = [int(s) for s in args.seeds.split(",")]

    def routed(spec: str):
        [(label, path)] = resolve_cases(spec)
        cases = load_cases(path, tree)
        return label, cases, asyncio.run(route_cases(router, cases))

    print("routing the calibration set (blind:dev) and the evaluation sets ...", file=sys.stderr)
    _, dev_cases, dev_routings = routed("blind:dev")
    evals = [routed(spec) for spec in args.eval.split(",")]
    critical = {leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == "critical"}
    out: dict = {"rate": RATE, "calibrated_on": f"blind:dev ({len(dev_cases)} cases)", "seeds": seeds,
                 "repeats": args.repeats, "models": {}}
    for name in args.models.split(","):
        corr, share = MODELS[name]
        judges = []
        for salt in ("A", "B"):
            judge, systematic = simulated_judge(tree, dev_cases, dev_routings, false_fail=RATE, false_pass=RATE,
                                                correlation=corr, systematic_share=share, app_false_absent=RATE,
                                                app_false_present=RATE, salt=f"{name}/{salt}")
            record = asyncio.run(calibrate(judge, tree, dev_cases, dev_routings, router="embedding", progress=False,
                                           predict=False))
            model = ErrorModel(false_fail={"*": RATE}, false_pass={"*": RATE}, reread_correlation=corr,
                               systematic_leaves=tuple(sorted(systematic)), app_false_absent={"*": RATE},
                               app_false_present=RATE, source=f"simulated {salt}: {name}")
            judges.append((record, model, systematic))
        (rec_a, model_a, _), (rec_b, model_b, sys_b) = judges
        rates_a, rates_b = JudgeRates.from_record(rec_a), JudgeRates.from_record(rec_b)
        flagged = flagged_leaves(rec_a, rates_a, tree)
        designs = {"confirmation": (None, None), "posterior": (Posterior([rates_a]), None)}
        for design, leaves in (("+ B on critical", frozenset(critical)),
                               ("+ B on critical and flagged", frozenset(critical | flagged)),
                               ("+ B on every leaf", None)):
            designs[design] = (Posterior([rates_a, rates_b]), PanelSim(model_b, frozenset(sys_b), leaves))
        rows = {}
        for label, cases, routings in evals:
            for design, (posterior, panel) in designs.items():
                runs = [noise_summary(tree, cases, routings, DEFAULT_SCORING_VARIANT, seed=s, repeats=args.repeats,
                                      confirm_failures=True, errors=model_a, posterior=posterior, panel=panel)
                        for s in seeds]
                rows.setdefault(label, {})[design] = {
                    "detection_rate": statistics.fmean(r["detection_rate"] for r in runs),
                    "clean_mean": statistics.fmean(r["clean_mean"] for r in runs),
                    "extra_items_per_reply": statistics.fmean(r["extra_items_per_reply"] for r in runs)}
                print(f"{name:24s} {label:12s} {design:30s} "
                      f"DR {rows[label][design]['detection_rate']:.3f}", file=sys.stderr)
        out["models"][name] = {"systematic_leaves_a": len(judges[0][2]), "systematic_leaves_b": len(sys_b),
                               "systematic_measured_a": len(rec_a.systematic), "flagged": len(flagged),
                               "results": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for label, *_ in evals:
        print(f"\n{label}: detection / clean mean / extra judge items per reply (error rate {RATE:g})")
        print(f"{'design':32s}" + "".join(f"{m:>28s}" for m in out["models"]))
        for design in DESIGNS:
            cells = []
            for m in out["models"].values():
                r = m["results"][label][design]
                cells.append(f"{r['detection_rate']:.3f} / {r['clean_mean']:.3f} / {r['extra_items_per_reply']:4.1f}")
            print(f"{design:32s}" + "".join(f"{c:>28s}" for c in cells))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
