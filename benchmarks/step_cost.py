"""What one training step's reward costs: judge items, tokens and wall time, four ways, one run.

    python benchmarks/step_cost.py --judge-url http://127.0.0.1:8765/v1 [--tokenizer PATH] [--json]
    python benchmarks/step_cost.py --full --data rows.jsonl ...   # 32 prompts x 8 rollouts (a GSPO step)

The same batch (``--prompts`` prompts x ``--rollouts`` rollouts, rows that carry rubric items) is
graded against the judge server once per mode, with a fresh judge and no verdict cache each time:

- ``tree_routed``: the default stage-3 reward (embedding router, the routed leaves + the row's
  rubric items, ``combine="mean"``);
- ``tree_recipe``: the same as the shipped stage-3 configs run it, with the
  applicability step (one decision per prompt and conditional leaf) and failure confirmation (a
  failing verdict read again): what those two cost on top of ``tree_routed``. How many verdicts
  fail decides confirmation's cost, and a random judge fails about half of them, so with the tiny
  model this mode shows the wiring and an upper range of the cost, not what a real judge pays;
- ``all_leaves``: the static router (every leaf of the tree) + the row's rubric items;
- ``rows_only``: the row's rubric items alone (the paper's stage-3 reward).

Printed per mode: judge items per rollout and per prompt (as asked, before the batch
de-duplicates identical items), requests, prompt / cached / completion tokens, and wall time
(grading only: the embedding router's model load and node embeddings happen before the clock
starts; routing itself is inside it). ``--data`` takes rollouts (``prompt``, ``completion``,
``rubrics``) or HealthBench rows (``prompt``, ``rubrics``, ``ideal_completions_data``); prompts are
reused in turn when the file has fewer than ``--prompts``, each rollout gets a distinct
completion. The default batch is small (2 prompts x 2 rollouts) for a CPU judge; ``--full`` is
32 x 8. With the tiny random judge the figures measure wiring and cost only, never quality.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from reward.demo import demo_rollouts_path
from reward.judge import JudgeConfig, make_judge
from reward.router import EmbeddingRouter, StaticRouter
from reward.settings import RewardSettings
from reward.stages.cost import judge_cost
from reward.stages.row_rubrics import grade_rubric_rows
from reward.tree import load_tree

MODES = ("tree_routed", "tree_recipe", "all_leaves", "rows_only")


def load_rows(path: Path) -> list[dict[str, Any]]:
    """Records with ``prompt``, a ``completion`` (or an ideal completion) and positive ``rubrics``."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        rubrics = [{"criterion": r["criterion"], "points": r["points"]} for r in rec.get("rubrics") or []]
        if not any(r["points"] > 0 for r in rubrics):
            continue
        completion = rec.get("completion") or (rec.get("ideal_completions_data") or {}).get("ideal_completion") or ""
        out.append({"prompt": rec["prompt"], "completion": completion or "Please see a doctor.", "rubrics": rubrics})
    if not out:
        raise SystemExit(f"{path}: no record with a prompt and rubric items with positive points")
    return out


def build_batch(rows: list[dict[str, Any]], n_prompts: int, per_prompt: int) -> list[dict[str, Any]]:
    """``n_prompts`` distinct prompts (rows reused in turn, made distinct by a suffix) x ``per_prompt``."""
    batch = []
    for p in range(n_prompts):
        row = rows[p % len(rows)]
        prompt = [dict(m) for m in row["prompt"]]
        if p >= len(rows):  # a reused row: a distinct prompt all the same
            prompt[-1]["content"] += f" (case {p})"
        for k in range(per_prompt):
            batch.append({"id": f"p{p}-r{k}", "prompt": prompt, "rubrics": row["rubrics"],
                          "completion": f"{row['completion']}\n\n(variant {k})"})
    return batch


async def run_mode(mode: str, batch: list[dict[str, Any]], args, tree, router) -> dict[str, Any]:
    judge = make_judge(judge_url=args.judge_url, served_model=args.served_model, tokenizer=args.tokenizer,
                       config=JudgeConfig(mode="choice"), cache=False)
    try:
        judge.stats.reset()
        t0 = time.perf_counter()
        if mode == "rows_only":
            graded = await grade_rubric_rows(judge, [(r["prompt"], r["completion"], r["rubrics"]) for r in batch])
            n_items = [len(r["rubrics"]) for r in batch]
            prompts = {json.dumps(r["prompt"]) for r in batch}
            cost = {"judge_items_per_rollout": sum(n_items) / len(batch),
                    "judge_items_per_prompt": sum(n_items) / len(prompts), "leaf_items_per_rollout": 0.0,
                    "rubric_items_per_rollout": sum(n_items) / len(batch)}
            scored = sum(g.score is not None for g in graded)
        else:
            recipe = mode == "tree_recipe"  # the stage-3 recipe (configs/*/stage3_clinical_rubric.yaml)
            settings = RewardSettings(applicability=recipe, confirm_failures=recipe)
            reward = settings.build(judge, tree=tree, router=router, cache_routing=False)
            results = await reward.score(batch)
            cost = judge_cost(results, [json.dumps(r["prompt"]) for r in batch])
            cost["confirm_items"] = reward.stats["confirm_items"]
            cost["applicability_calls"] = reward.stats["applicability_judge_calls"]
            scored = sum(r.score is not None for r in results)
        wall = time.perf_counter() - t0
        st = judge.stats
        return {"mode": mode, **{k: round(v, 2) if isinstance(v, float) else v for k, v in cost.items()},
                "requests": st.requests, "prompt_tokens": st.prompt_tokens, "cached_tokens": st.cached_tokens,
                "completion_tokens": st.completion_tokens, "failures": st.failures, "scored": scored,
                "wall_s": round(wall, 2)}
    finally:
        await judge.aclose()


async def main_async(args) -> dict[str, Any]:
    tree = load_tree()
    rows = load_rows(Path(args.data))
    n_prompts, per_prompt = (32, 8) if args.full else (args.prompts, args.rollouts)
    batch = build_batch(rows, n_prompts, per_prompt)
    embedding = EmbeddingRouter(tree)
    routers = {"tree_routed": embedding, "tree_recipe": embedding, "all_leaves": StaticRouter(tree), "rows_only": None}
    t0 = time.perf_counter()
    embedding.prepare()
    prepare_s = time.perf_counter() - t0
    out = []
    for mode in args.modes.split(","):
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        out.append(await run_mode(mode, batch, args, tree, routers[mode]))
    base = next((m for m in out if m["mode"] == "tree_routed"), None)
    for m in out:  # the alternative in the same run, as a ratio
        m["requests_vs_tree_routed"] = round(m["requests"] / base["requests"], 2) if base and base["requests"] else "-"
    return {"prompts": n_prompts, "rollouts_per_prompt": per_prompt, "rollouts": len(batch),
            "leaves_in_tree": len(tree.leaves), "router_prepare_s": round(prepare_s, 2), "modes": out,
            "note": "a tiny random judge measures wiring and cost only"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-url", default=os.environ.get("RUBRICSTREE_JUDGE_URL"), help="vLLM endpoint")
    ap.add_argument("--served-model", default=None, help="model name on the server (default: the first listed)")
    ap.add_argument("--tokenizer", default=os.environ.get("RUBRICSTREE_TINY_MODEL"), help="tokenizer path")
    ap.add_argument("--data", default=str(demo_rollouts_path()), help="rollouts or HealthBench rows (JSONL)")
    ap.add_argument("--prompts", type=int, default=2, help="distinct prompts (default 2)")
    ap.add_argument("--rollouts", type=int, default=2, help="rollouts per prompt (default 2)")
    ap.add_argument("--full", action="store_true", help="one GSPO step: 32 prompts x 8 rollouts")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if not args.judge_url:
        raise SystemExit("give --judge-url (or set RUBRICSTREE_JUDGE_URL)")
    res = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(res))
        return
    print(f"{res['prompts']} prompts x {res['rollouts_per_prompt']} rollouts ({res['rollouts']} rollouts; "
          f"{res['leaves_in_tree']} leaves in the tree; {res['note']})")
    cols = ("mode", "judge_items_per_rollout", "judge_items_per_prompt", "requests", "prompt_tokens",
            "cached_tokens", "completion_tokens", "failures", "wall_s", "requests_vs_tree_routed")

    print("  ".join(cols))
    for m in res["modes"]:
        print("  ".join(str(m[c]) for c in cols))


if __name__ == "__main__":
    main()
