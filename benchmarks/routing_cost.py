"""Routing cost as GRPO groups grow: judge calls per prompt must stay flat.

The LLM router reads the prompt, not the completions, and RubricReward routes each distinct
prompt of a batch once, so the routing cost of a batch is (prompts x calls per walk) whatever the
number of rollouts per prompt. This script checks it: for 1, 2, 4, 8 and 16 rollouts per prompt
it builds a batch over a few prompts (the bundled demo prompts), routes it through RubricReward
with a fresh router (no routing cache carried over, no verdict cache), and reports routing judge
requests and seconds per prompt and the fraction of leaves activated. ``--grade`` also grades the
batch, to set routing against grading (which does grow with the rollouts).

    python benchmarks/routing_cost.py --judge-url http://127.0.0.1:8000 [--json]
    python benchmarks/routing_cost.py --judge-model /path/to/model       # in-process judge
    python benchmarks/routing_cost.py --oracle embedding --json         # non-random answers

A random tiny judge answers every relevance question near 0.5, so its walk does not show how
far a real walk expands. ``--oracle embedding`` serves the embedding router's relevance (the
bundled MiniLM) as the judge's answers (``routing_oracle.py``): the walk then opens the branches
that real relevance opens, and the report adds sequential rounds (judge calls one after the
other: the latency a walk adds) per prompt. The oracle replaces the judge model, so its
wall times are not a judge's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from reward.demo import demo_rollouts_path
from reward.judge.settings import add_judge_arguments, settings_from_args
from reward.settings import RewardSettings
from reward.stages.rubric_reward import Rollout, load_rollouts
from reward.tree import load_tree


def build_batch(prompts: list[Rollout], completions: list[str], per_prompt: int) -> list[Rollout]:
    """``per_prompt`` rollouts for each prompt, with distinct completions."""
    out = []
    for p, base in enumerate(prompts):
        for k in range(per_prompt):
            text = f"{completions[(p + k) % len(completions)]} (variant {k})"
            out.append(base.model_copy(update={"id": f"p{p}-r{k}", "completion": text}))
    return out


async def measure(tree, judge, prompts, completions, sizes, *, grade: bool, router_kw: dict) -> list[dict]:
    rows = []
    n_leaves = len(tree.leaves)
    for n in sizes:
        batch = build_batch(prompts, completions, n)
        reward = RewardSettings(router="llm", router_options=router_kw).build(judge, tree=tree)  # fresh routing memory
        judge.stats.reset()
        if hasattr(judge, "reset"):
            judge.reset()
        t0 = time.perf_counter()
        routings = await reward.route(batch)
        route_s = time.perf_counter() - t0
        route_requests = judge.stats.requests
        active = [len(r.active) for r in routings.values()]
        rounds = list(getattr(judge, "rounds", {}).values())
        row = {
            "rollouts_per_prompt": n, "prompts": len(prompts), "rollouts": len(batch),
            "routing_requests": route_requests,
            "routing_requests_per_prompt": route_requests / len(prompts),
            "routing_s": round(route_s, 3), "routing_s_per_prompt": round(route_s / len(prompts), 3),
            "active_leaves_mean": sum(active) / len(active),
            "active_fraction": sum(active) / len(active) / n_leaves,
        }
        if rounds:
            row.update(rounds_per_prompt_mean=sum(rounds) / len(rounds), rounds_per_prompt_max=max(rounds),
                       expanded_nodes_mean=sum(len(r.expanded) for r in routings.values()) / len(routings))
        if grade:
            judge.stats.reset()
            t0 = time.perf_counter()
            await reward.score(batch)  # routings are now in memory: this is grading only
            row.update(grading_requests=judge.stats.requests, grading_s=round(time.perf_counter() - t0, 3))
        rows.append(row)
    return rows


def print_table(rows: list[dict], grade: bool) -> None:
    cols = ["rollouts_per_prompt", "rollouts", "routing_requests", "routing_requests_per_prompt",
            "routing_s", "routing_s_per_prompt", "active_leaves_mean", "active_fraction"]
    heads = ["per prompt", "rollouts", "route req", "req/prompt", "route s", "s/prompt", "active", "active frac"]
    if "rounds_per_prompt_mean" in rows[0]:
        cols += ["rounds_per_prompt_mean", "rounds_per_prompt_max", "expanded_nodes_mean"]
        heads += ["rounds", "max rounds", "expanded"]
    if grade:
        cols += ["grading_requests", "grading_s"]
        heads += ["grade req", "grade s"]
    width = [max(len(h), 10) for h in heads]
    print("  ".join(h.rjust(w) for h, w in zip(heads, width)))
    for r in rows:
        cells = []
        for c, w in zip(cols, width):
            v = r[c]
            cells.append((f"{v:.3f}" if isinstance(v, float) else str(v)).rjust(w))
        print("  ".join(cells))


def plot(rows: list[dict], path: str) -> None:
    """Routing (flat) and, with --grade, grading (growing) judge calls per prompt, log-2 x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["rollouts_per_prompt"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(x, [r["routing_requests_per_prompt"] for r in rows], "o-", label="routing")
    if "grading_requests" in rows[0]:
        ax.plot(x, [r["grading_requests"] / r["prompts"] for r in rows], "s--", label="grading")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [str(v) for v in x])
    ax.set_xlabel("rollouts per prompt")
    ax.set_ylabel("judge requests per prompt")
    frac = rows[-1]["active_fraction"]
    ax.set_title(f"Routing once per prompt (active leaves: {frac:.1%})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taxonomy", help="taxonomy YAML (default: the packaged one)")
    ap.add_argument("--prompts", type=int, default=4, help="distinct prompts (from the bundled demo rows)")
    ap.add_argument("--sizes", default="1,2,4,8,16", help="rollouts per prompt, comma-separated")
    ap.add_argument("--router-threshold", dest="threshold", type=float, default=0.5, help="router relevance threshold")
    ap.add_argument("--router-emergency-threshold", dest="emergency_threshold", type=float, default=0.2,
                    help="router threshold for urgent prompts")
    ap.add_argument("--grade", action="store_true", help="also grade the batch")
    ap.add_argument("--oracle", choices=["embedding"], default=None,
                    help="answer the routing questions from the embedding router's relevance (no judge model)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--plot", help="also write a PNG of judge calls per prompt against rollouts per prompt")
    add_judge_arguments(ap)
    args = ap.parse_args(argv)
    settings = settings_from_args(args, cache=False)

    tree = load_tree(args.taxonomy)
    demo = load_rollouts(demo_rollouts_path())
    prompts = list({r.prompt_key: r for r in demo}.values())[: args.prompts]
    completions = [r.completion for r in demo]
    sizes = [int(s) for s in args.sizes.split(",")]
    # No verdict cache: every size must pay for its own routing, or the flat line would be the cache's.
    if args.oracle:
        if args.grade:
            ap.error("--grade needs a judge model; the oracle answers routing questions only")
        from benchmarks.routing_oracle import EmbeddingRelevanceJudge
        from reward.router.embedding import EmbeddingRouter

        judge = EmbeddingRelevanceJudge(EmbeddingRouter(tree))
    else:
        if not (settings.url or settings.model):
            ap.error("give --judge-url or --judge-model (or --oracle embedding)")
        judge = settings.build()

    async def run():
        try:
            return await measure(tree, judge, prompts, completions, sizes, grade=args.grade,
                                 router_kw={"threshold": args.threshold,
                                            "emergency_threshold": args.emergency_threshold})
        finally:
            await judge.aclose()

    rows = asyncio.run(run())
    per_prompt = [r["routing_requests_per_prompt"] for r in rows]
    result = {"judge": judge.model_id, "taxonomy": tree.name, "leaves": len(tree.leaves),
              "inner_nodes": len(tree.topological_order) - len(tree.leaves) - 1,
              "flat": max(per_prompt) == min(per_prompt), "rows": rows}
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"judge {judge.model_id}, taxonomy {tree.name} ({len(tree.leaves)} leaves), "
              f"{len(prompts)} prompts, thresholds {args.threshold}/{args.emergency_threshold}")
        print_table(rows, args.grade)
        print("routing requests per prompt are flat" if result["flat"]
              else "routing requests per prompt vary (a judge failure or a nondeterministic judge)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
