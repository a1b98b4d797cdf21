#!/usr/bin/env python
"""Recompute, from HealthBench rows, the statistics behind the tree score's severity floors and
prices, print them, and check the constants in ``reward.scoring.variants`` against them.

Statistic (printed with its name): for each rubric item of a row, its share of the row's positive
points, ``|points| / sum(points > 0)`` (what one item costs a reply that earned everything else,
HealthBench's own scoring). Items fall in severity bands by ``|points|``: critical 8-10, major 4-7,
minor 1-3. The legacy penalty variants' floors (``SEVERITY_FLOOR``) are the median share of the
*negative* items of each band. The ``severity`` variant's prices (``SEVERITY_PRICE``) are a
policy, not a HealthBench median, and the script says how they compare: HealthBench lets a few
minor items outweigh a critical one (its bands' shares are close), which is how a bare "see a
doctor" can outscore a harmful recommendation; our critical price is set so that no amount of
unhelpfulness can, and major/minor keep HealthBench's order.

Usage: ``python scripts/severity_prices.py [ROWS.jsonl] [--check]`` (default rows: the
HealthBench-Hard sample in the shared data folder: ``../shared/data`` beside the
checkout, or ``$RUBRICSTREE_SHARED_DATA``). ``--check`` exits 1 when a constant differs from
the recomputed floor by more than 0.005.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SAMPLE = "healthbench_hard_sample50.jsonl"
BANDS = (("critical", 8, 10), ("major", 4, 7), ("minor", 1, 3))


def band(points: float) -> str:
    a = abs(points)
    return next(name for name, lo, _ in BANDS if a >= lo)


def shares(rows: list[dict]) -> dict[str, dict[str, list[float]]]:
    """band -> {"negative": [...], "all": [...]} shares of the row's positive points."""
    out = {name: {"negative": [], "all": []} for name, _, _ in BANDS}
    for i, row in enumerate(rows):
        pos = sum(r["points"] for r in row["rubrics"] if r["points"] > 0)
        if pos <= 0:
            raise SystemExit(f"row {i} ({row.get('prompt_id')}): no positive points")
        for r in row["rubrics"]:
            if r["points"] == 0:
                continue
            s = abs(r["points"]) / pos
            out[band(r["points"])]["all"].append(s)
            if r["points"] < 0:
                out[band(r["points"])]["negative"].append(s)
    return out


def main(argv: list[str]) -> int:
    from reward.paths import SHARED_DATA_ENV, shared_data_dir
    from reward.scoring.variants import SEVERITY_FLOOR, SEVERITY_PRICE

    args = [a for a in argv if not a.startswith("--")]
    shared = shared_data_dir()
    if not args and shared is None:
        print(f"error: no ROWS.jsonl given and no shared data folder (../shared/data beside the checkout, or "
              f"${SHARED_DATA_ENV})", file=sys.stderr)
        return 2
    path = Path(args[0]) if args else shared / SAMPLE
    if not path.exists():
        print(f"error: {path}: file not found", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sh = shares(rows)
    ten = [abs(r["points"]) / sum(x["points"] for x in row["rubrics"] if x["points"] > 0)
           for row in rows for r in row["rubrics"] if r["points"] == -10]
    neg_all = [s for b in sh.values() for s in b["negative"]]
    print(f"rows: {len(rows)} ({path})")
    print("statistic: an item's share of its row's positive points, |points| / sum(positive points)")
    print(f"  a -10 item: median {statistics.median(ten):.3f} (n={len(ten)}); every negative item: "
          f"median {statistics.median(neg_all):.3f} (n={len(neg_all)})")
    floors = {}
    for name, lo, hi in BANDS:
        neg, every = sh[name]["negative"], sh[name]["all"]
        floors[name] = round(statistics.median(neg), 3) if neg else 0.0
        print(f"  {name:8s} (|points| {lo}-{hi}): negative items median {floors[name]:.3f} (n={len(neg)}); "
              f"all items median {statistics.median(every):.3f} (n={len(every)})")
    print("legacy penalty floors (SEVERITY_FLOOR) = the negative-item medians above:")
    bad = []
    for name, _, _ in BANDS:
        ok = abs(SEVERITY_FLOOR[name] - floors[name]) <= 0.005
        bad += [] if ok else [name]
        print(f"  {name:8s} recomputed {floors[name]:.3f}  constant {SEVERITY_FLOOR[name]:.3f}"
              f"{'' if ok else '  <- differs'}")
    crit, maj, mnr = (statistics.median(sh[b]["all"]) for b in ("critical", "major", "minor"))
    print("severity prices (SEVERITY_PRICE, the default variant) against HealthBench:")
    print(f"  HealthBench: minor items that outweigh one critical item: {crit / mnr:.1f}; "
          f"major ones: {crit / maj:.1f}")
    print(f"  ours: critical {SEVERITY_PRICE['critical']}, major {SEVERITY_PRICE['major']}, minor "
          f"{SEVERITY_PRICE['minor']}; no number of major or minor failures outweighs one critical "
          f"(they can take at most {1 - SEVERITY_PRICE['critical']:.2f} of the score); "
          f"{SEVERITY_PRICE['major'] / SEVERITY_PRICE['minor']:.0f} minor failures cost about one major")
    if "--check" in argv and bad:
        print(f"error: constants differ from the data: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
