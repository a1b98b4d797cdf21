"""What a calibration can measure: the labelled items each leaf has, per set (issue 44).

    python benchmarks/calibration_coverage.py [--sets bundled,blind:dev,blind:test]
                                              [--out benchmarks/results/calibration_coverage.json] [--json]

A judge's error rate on a leaf can only be measured on items of that leaf: a leaf with no failing
item is one a judge that never fails it passes unseen. This builds the items ``rubricstree judge
calibrate`` grades (``reward.calibration.items.labelled_items``: the default reward's embedding
router, every reply against the leaves its labels call applicable, each (conversation, reply,
leaf) once) for each set and counts, per severity, the leaves with at least one failing item, the
leaves that meet issue 44's thresholds (critical 10 failing and 10 passing, major 5 and 5, minor 3
and 3), and the leaves with no item at all. No judge is called: coverage is a property of the
labels and the routing. About a minute on 2 cores (the router embeds every prompt once; routings
are cached under .cache/bench). Writes the JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WANTED = {"critical": 10, "major": 5, "minor": 3}


def coverage(tree, cases, routings) -> dict:
    from reward.calibration.items import labelled_items

    verdicts, applicability = labelled_items(tree, cases, routings)
    fails, passes = Counter(), Counter()
    for v in verdicts:
        (fails if v.fails else passes)[v.leaf_id] += 1
    out: dict = {"cases": len(cases), "verdict_items": len(verdicts), "failing_items": sum(fails.values()),
                 "applicability_items": len(applicability), "by_severity": {}}
    for severity, wanted in WANTED.items():
        leaves = [leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == severity]
        out["by_severity"][severity] = {
            "leaves": len(leaves),
            "with_a_failing_item": sum(fails[lid] > 0 for lid in leaves),
            "meeting_the_threshold": sum(fails[lid] >= wanted and passes[lid] >= wanted for lid in leaves),
            "without_any_item": sum(fails[lid] == 0 and passes[lid] == 0 for lid in leaves),
            "agentic_without_any_item": sum(fails[lid] == 0 and passes[lid] == 0 for lid in leaves
                                            if lid.startswith("at_")),
            "failing_items": sum(fails[lid] for lid in leaves),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="bundled,blind:dev,blind:test")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/calibration_coverage.json"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.runner import route_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    tree = load_tree()
    router = CachedRouter(build_router(RewardSettings(), tree, None),
                          VerdictCache(ROOT / ".cache" / "bench" / "routings.sqlite"))
    out: dict = {"router": "embedding (RewardSettings default)", "wanted": WANTED, "sets": {}}
    for spec in args.sets.split(","):
        for label, path in resolve_cases(spec):
            cases = load_cases(path, tree)
            print(f"routing {label} ({len(cases)} cases) ...", file=sys.stderr)
            routings = asyncio.run(route_cases(router, cases))
            out["sets"][label] = coverage(tree, cases, routings)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{'set':12s} {'severity':9s} {'leaves':>6s} {'with a failing item':>20s} {'meeting the bar':>16s} "
          f"{'no item':>8s}")
    for label, c in out["sets"].items():
        for sev, s in c["by_severity"].items():
            print(f"{label:12s} {sev:9s} {s['leaves']:6d} {s['with_a_failing_item']:20d} "
                  f"{s['meeting_the_threshold']:16d} {s['without_any_item']:8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
