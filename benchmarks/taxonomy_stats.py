"""docs/taxonomy.md's figures: the packaged tree's counts and its coverage of HealthBench rows.

    python benchmarks/taxonomy_stats.py [--data ROWS.jsonl] [--thresholds 0.55,0.50,0.60]
                                        [--out benchmarks/results/taxonomy_stats.json]

Two parts, both from the package's own code:

- ``tree``: the packaged taxonomy (``reward/data/taxonomy.yaml``) as ``load_tree`` reads it: its
  version, nodes, leaves, depth, the leaves with several parents, the macro capabilities and the
  sum of the leaf weights (1 by construction).
- ``coverage``: what ``rubricstree tree coverage --data ROWS --json`` reports (``reward.evolution``:
  the embedding router and the embedding matcher, bundled MiniLM, a proxy that is not
  physician-checked), once per match threshold (0.55 is the default), on the 50
  HealthBench-Hard rows of ``../shared/data/healthbench_hard_sample50.jsonl`` (or
  ``$RUBRICSTREE_SHARED_DATA``): coverage, residual ambiguity, coverage against all leaves, the
  routing and taxonomy gaps, active leaves per row, and coverage by theme and by axis. Only
  figures are written: no rubric text (HealthBench's) goes into the JSON.

Not here: one propose -> accept -> apply step (``scripts/measure_taxonomy_evolution.sh``), which
takes about 15 minutes on the shared 2-core machine. This script takes 1.5 minutes or less there
(MiniLM loaded once, the embeddings shared by the three thresholds) and writes
``benchmarks/results/taxonomy_stats.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
SAMPLE = "healthbench_hard_sample50.jsonl"


def tree_stats() -> dict:
    from reward.evolution.taxonomy_io import read_header
    from reward.tree import load_tree

    tree = load_tree()
    several = [leaf.id for leaf in tree.leaves if len(tree.parents[leaf.id]) > 1]
    return {"version": read_header(None).version, "nodes": len(tree.nodes), "leaves": len(tree.leaves),
            "depth": tree.depth, "leaves_with_several_parents": len(several),
            "macro_capabilities": len(tree[tree.root].children),
            "leaf_weight_sum": round(sum(tree.leaf_weights.values()), 12)}


def coverage(data: Path, thresholds: list[float]) -> dict:
    from reward.evolution.coverage import RouterSpec, make_router, measure
    from reward.evolution.encoder import CachedEncoder
    from reward.evolution.matchers import leaf_text, make_matcher
    from reward.evolution.taxonomy_io import read_header
    from reward.healthbench.schema import load_healthbench
    from reward.tree import load_tree

    rows = load_healthbench(data)
    tree = load_tree()
    version = read_header(None).version
    enc = CachedEncoder()
    items = list(dict.fromkeys(it.criterion for r in rows for it in r.rubrics if it.points > 0))
    enc.encode(items + [leaf_text(tree, leaf.id) for leaf in tree.leaves], batch_size=32)
    out: dict = {}
    for thr in thresholds:
        router = make_router(RouterSpec(name="embedding"), tree, encoder=enc)
        res = asyncio.run(measure(rows, tree, router, make_matcher("embedding", enc, threshold=thr), version=version))
        s = res.summary(examples=0)
        out[f"{thr:.2f}"] = {
            "match_threshold": thr, "coverage": s["coverage"], "residual_ambiguity": s["residual_ambiguity"],
            "all_leaves": s["all_leaves"]["coverage"], "routing_gap": s["routing_gap"],
            "taxonomy_gap": s["taxonomy_gap"], "rows": s["n_rows"], "positive_items": s["n_items"],
            "active_leaves_per_row": s["active_leaves_per_row"],
            "by_theme": {k: {"coverage": v["coverage"], "rows": v["n_rows"]} for k, v in s["by_theme"].items()},
            "by_axis": {k: {"coverage": v["coverage"], "rows": v["n_rows"]} for k, v in s["by_axis"].items()},
        }
        print(f"match threshold {thr:.2f}: coverage {s['coverage']:.3f} (all leaves {s['all_leaves']['coverage']:.3f}), "
              f"{s['active_leaves_per_row']:.1f} active leaves per row", file=sys.stderr)
    return out


def main() -> int:
    shared = Path(os.environ.get("RUBRICSTREE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=shared / SAMPLE)
    ap.add_argument("--thresholds", default="0.55,0.50,0.60", help="embedding matcher thresholds (the first: default)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/taxonomy_stats.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = {"tree": tree_stats(),
           "coverage_settings": {"data": args.data.name, "router": "embedding", "matcher": "embedding (MiniLM)"},
           "coverage_by_match_threshold": coverage(args.data, [float(x) for x in args.thresholds.split(",")])}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out["tree"]))
    print(f"wrote {args.out} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
