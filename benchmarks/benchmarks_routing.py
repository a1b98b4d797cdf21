"""The routing figures of docs/benchmarks.md: routing_cost.py's measurement, written to JSON.

    python benchmarks/benchmarks_routing.py [--prompts 8] [--tiny-model DIR] [--out benchmarks/results/benchmarks_routing.json]

Runs ``benchmarks/routing_cost.py`` twice on the bundled demo prompts, at 1, 2, 4, 8 and 16
rollouts per prompt, with a fresh router for each size (no routing or verdict cache):

- ``oracle``: ``--oracle embedding``, the embedding router's relevance served as the judge's
  answers (``routing_oracle.py``), so the LLM router's walk opens the branches real relevance
  opens: judge calls, sequential rounds and inner nodes opened per prompt, leaves activated;
- ``tiny_judge`` (when the tiny random model is there, ``--tiny-model``, default the test
  server's ``.cache/test-server/tiny-model``): the same walk with the tiny random-weight model as
  an in-process judge, whose answers carry no meaning (wiring and cost only).

Takes about 1 minute on one CPU core (the oracle embeds every node once). Writes
``benchmarks/results/benchmarks_routing.json``: each run's JSON as routing_cost.py prints it, and
the mean per prompt over the sizes of the figures the doc quotes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

QUOTED = ("routing_requests_per_prompt", "rounds_per_prompt_mean", "rounds_per_prompt_max", "expanded_nodes_mean",
          "active_leaves_mean", "active_fraction")


def run(argv: list[str]) -> dict:
    from benchmarks import routing_cost

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = routing_cost.main([*argv, "--json"])
    if rc:
        raise SystemExit(f"routing_cost.py {' '.join(argv)} exited {rc}")
    res = json.loads(buf.getvalue().strip().splitlines()[-1])
    rows = res["rows"]
    res["over_sizes"] = {k: {"min": min(r[k] for r in rows), "max": max(r[k] for r in rows),
                             "mean": statistics.fmean(r[k] for r in rows)} for k in QUOTED if k in rows[0]}
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tiny-model", default=str(ROOT / ".cache/test-server/tiny-model"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/benchmarks_routing.json"))
    args = ap.parse_args()
    common = ["--prompts", str(args.prompts), "--sizes", "1,2,4,8,16"]
    out: dict = {"prompts": args.prompts, "oracle": run([*common, "--oracle", "embedding"])}
    if (Path(args.tiny_model) / "config.json").is_file():
        out["tiny_judge"] = run([*common, "--judge-model", args.tiny_model])
    for name in ("oracle", "tiny_judge"):
        if name in out:
            r = out[name]
            print(f"{name}: {r['leaves']} leaves, {r['inner_nodes']} inner nodes, flat: {r['flat']}; "
                  + ", ".join(f"{k} {v['mean']:.3f}" for k, v in r["over_sizes"].items()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
