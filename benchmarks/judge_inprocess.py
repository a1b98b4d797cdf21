#!/usr/bin/env python
"""In-process judge cost: choice mode with the shared prefix encoded once, against one forward per
item, JSON explanations per item (reference style) and one JSON verdict list per rollout (peers).

One model is loaded once and every mode grades the same items in the same run:

- ``choice``: our layout, each rollout's shared prefix encoded once and its criteria scored
  against that KV cache in chunks (``TransformersJudge(prefix_reuse=True)``, the default);
- ``choice_per_item``: the same prompts, one full forward per item (``prefix_reuse=False``);
  verdicts must be identical to ``choice`` (``agreement``: identical verdicts, max |p_yes diff|);
- ``explain``: reference-style grading, one JSON explanation per item (up to
  ``--explain-tokens``, one attempt), the template of ``judge_cost.py``;
- ``rubric_batch``: all criteria of a rollout in one generation of a JSON verdict list
  (``rubric_batch.py``; in process the grammar is not enforced, so a weak model loses more).

Workloads: ``demo`` (default) is what ``rubricstree demo`` grades: the bundled demo rollouts,
routed by the embedding router, every active leaf and rubric item of each rollout (the count is printed);
``synthetic`` is ``judge_cost.py``'s workload (``--rollouts`` x ``--criteria``).

Models: ``--size demo`` (default) is the demo's tiny random-weight Qwen3; other sizes build a
random-weight Qwen3 with the published shape of that release (no download; the tokenizer is the
tiny one, so the vocabulary is the real size but the text is tokenised by a small BPE). Random
weights decode garbage: explain and rubric_batch measure cost, not verdicts. ``--gpu`` is the
GPU variant: Qwen3-8B dimensions in bfloat16, all four modes unless --modes names some, on the
synthetic workload.

    python benchmarks/judge_inprocess.py --json                           # CPU: the demo's items
    python benchmarks/judge_inprocess.py --gpu --json                     # GPU: Qwen3-8B shape
    python benchmarks/judge_inprocess.py --size 0.6b --workload synthetic --modes choice,explain
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Published Qwen3 shapes (config.json of the Qwen3 releases); "demo" is the demo's tiny model and
# "mini" a CPU-sized shape with the real vocabulary, to smoke-test the real-size code path.
SHAPES = {
    "mini": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=151936, tie_word_embeddings=True),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False),
}
MODES = ("choice", "choice_per_item", "explain", "rubric_batch")


def build_model(size: str, out: Path, dtype: str) -> Path:
    """Write a random-weight model of ``size`` (and the tiny tokenizer) to ``out``."""
    if size == "demo":
        from training.tiny_model import build_tiny_qwen3

        return build_tiny_qwen3(out)
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training.tiny_model import build_tokenizer

    tok = build_tokenizer()
    cfg = Qwen3Config(**SHAPES[size], max_position_embeddings=8192, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    # Built straight in the target dtype on the target device: an 8B model never exists in float32.
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen3ForCausalLM._from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# ---------------------------------------------------------------------- workloads
def demo_items(model_dir: Path) -> list:
    """The judge items ``rubricstree demo`` grades: RubricReward over the bundled rollouts with
    the embedding router, its grade call recorded instead of run."""
    from reward.demo import demo_rollouts_path
    from reward.judge import Verdict
    from reward.judge.settings import JudgeSettings
    from reward.settings import RewardSettings
    from reward.stages.rubric_reward import load_rollouts
    from reward.tree import load_tree

    tree = load_tree()
    judge = JudgeSettings(model=str(model_dir), cache=False).build()
    seen: list = []

    async def record(items, *_, **__):
        seen.extend(items)
        return [Verdict(met=False, p_yes=0.0)] * len(items)

    judge.grade = record  # collect the items; the benchmark grades them below
    reward = RewardSettings(scoring="soft").build(judge, tree=tree)  # the recipe, soft verdicts
    asyncio.run(reward.score(load_rollouts(demo_rollouts_path())))
    return seen


def synthetic_items(rollouts: int, criteria: int) -> list:
    from benchmarks.judge_cost import build_workload

    return build_workload(rollouts, criteria)


# ---------------------------------------------------------------------- modes
async def run_mode(judge, mode: str, items, explain_tokens: int, warm: bool = True) -> tuple[dict, list]:
    """Grade ``items`` once in ``mode`` on the loaded ``judge``; (figures, verdicts)."""
    from benchmarks.judge_cost import reference_template
    from benchmarks.rubric_batch import grade_rubric_batch, rubric_batch_template
    from reward.judge import CHOICE, JudgeConfig

    judge.prefix_reuse = mode != "choice_per_item"
    judge.config = JudgeConfig(mode="explain" if mode in ("explain", "rubric_batch") else "choice",
                               max_explain_tokens=explain_tokens, explain_attempts=1,
                               prefix_block=judge.renderer.block_size)
    if mode == "rubric_batch":
        template = rubric_batch_template()

        async def grade(sub):
            return await grade_rubric_batch(judge, template, sub)
    else:
        template = reference_template("inproc") if mode == "explain" else CHOICE

        async def grade(sub):
            return await judge.grade(sub, template, use_cache=False)

    if warm:
        await grade(items[: min(4, len(items))])  # warm-up (kernels, allocator)
    judge.stats.reset()
    _sync()
    t0 = time.perf_counter()
    out = await grade(items)
    _sync()
    wall = time.perf_counter() - t0
    s = judge.stats.as_dict()
    lost = sum(not v.ok for v in out)
    return {"items": len(items), "wall_s": round(wall, 3), "items_per_s": round(len(items) / wall, 2),
            "forwards_or_requests": s["requests"], "prompt_tokens": s["prompt_tokens"],
            "cached_tokens": s["cached_tokens"], "completion_tokens": s["completion_tokens"],
            "failures": lost, "verdicts_lost_share": round(lost / max(1, len(items)), 4)}, out


def agreement(a: list, b: list) -> dict:
    ok = [(x, y) for x, y in zip(a, b) if x.ok and y.ok]
    return {"compared": len(ok), "identical_verdicts": all(x.met == y.met for x, y in ok) and len(ok) == len(a),
            "verdicts_differing": sum(x.met != y.met for x, y in ok),
            "max_abs_p_yes_diff": max((abs(x.p_yes - y.p_yes) for x, y in ok), default=None)}


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=["demo", *SHAPES], default="demo")
    ap.add_argument("--model", help="use this model dir instead of building a random one")
    ap.add_argument("--workload", choices=["demo", "synthetic"], default="demo")
    ap.add_argument("--rollouts", type=int, default=16, help="synthetic workload")
    ap.add_argument("--criteria", type=int, default=12, help="synthetic workload")
    ap.add_argument("--modes", default=None, help=f"comma-separated, of {','.join(MODES)} (default: choice,"
                                                  "choice_per_item; with --gpu all of them)")
    ap.add_argument("--explain-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16, help="prompts per forward (per-item path, generation)")
    ap.add_argument("--chunk", type=int, default=16, help="criteria per forward against one shared prefix")
    ap.add_argument("--dtype", default=None, help="default float32 on CPU, bfloat16 on CUDA")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (1 is steadiest on a shared machine; default: torch's own)")
    ap.add_argument("--gpu", action="store_true",
                    help="GPU variant: --size 8b --workload synthetic, every mode unless --modes, batch/chunk 64 (bfloat16)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="timed passes per mode, interleaved across modes; the fastest is reported")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.gpu:  # larger batches: generation (explain) is the long part on a GPU; --modes still chooses
        a.size, a.workload = "8b", "synthetic"
        a.modes = a.modes or ",".join(MODES)
        a.batch, a.chunk = max(a.batch, 64), max(a.chunk, 64)
    a.modes = a.modes or "choice,choice_per_item"
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in a.modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {MODES}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    from reward.judge.inprocess import TransformersJudge

    if a.threads:
        torch.set_num_threads(a.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = a.dtype or ("bfloat16" if device == "cuda" else "float32")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(a.model) if a.model else build_model(a.size, Path(tmp) / a.size, dtype)
        items = demo_items(model_dir) if a.workload == "demo" else synthetic_items(a.rollouts, a.criteria)
        judge = TransformersJudge(str(model_dir), device=device, dtype=dtype, cache=None, batch_size=a.batch,
                                  prefix_chunk=a.chunk)
        results, verdicts, walls = {}, {}, {m: [] for m in a.modes}
        for rep in range(max(1, a.repeat)):  # interleaved, so a burst of load hits every mode alike
            for mode in a.modes:
                r, v = asyncio.run(run_mode(judge, mode, items, a.explain_tokens, warm=rep == 0))
                walls[mode].append(r["wall_s"])
                if mode not in results or r["wall_s"] < results[mode]["wall_s"]:
                    results[mode], verdicts[mode] = r, v
        for mode, r in results.items():
            r["wall_s_all"] = walls[mode]
    res = {"size": a.size, "device": device, "dtype": dtype, "threads": torch.get_num_threads(), "workload": a.workload, "items": len(items),
           "rollouts": len({(it.conversation, it.response) for it in items}),
           "prefix_block": judge.renderer.block_size, "modes": results}
    base = results.get("choice")
    if base:
        res["wall_over_choice"] = {m: round(r["wall_s"] / base["wall_s"], 2) for m, r in results.items()}
    if "choice" in verdicts and "choice_per_item" in verdicts:
        res["agreement_choice_vs_per_item"] = agreement(verdicts["choice"], verdicts["choice_per_item"])
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"in-process judge, {a.size} random-weight Qwen3 on {device} ({dtype}), {a.workload} workload: "
          f"{len(items)} items, {res['rollouts']} rollouts")
    for m, r in results.items():
        vs = f"  ({res['wall_over_choice'][m]:g}x choice's wall time)" if base else ""
        print(f"  {m:16s} wall {r['wall_s']:8.2f} s  {r['items_per_s']:8.2f} items/s  prompt {r['prompt_tokens']}"
              f"  reused {r['cached_tokens']}  decoded {r['completion_tokens']}  lost {r['verdicts_lost_share']:.0%}{vs}")
    if "agreement_choice_vs_per_item" in res:
        g = res["agreement_choice_vs_per_item"]
        print(f"  choice vs one forward per item: identical verdicts {g['identical_verdicts']}, "
              f"max |p_yes diff| {g['max_abs_p_yes_diff']:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
