#!/usr/bin/env python
"""In-process judge cost: choice mode (one forward per criterion) vs explain mode (JSON generation).

Builds a random-weight Qwen3 of a real size from its published shape (no download), renders
realistic rollouts x criteria with our templates, and grades them with the in-process
transformers backend in both modes. Prints wall time, items/s, prompt and decoded tokens, and
the explain/choice ratios. Random weights decode garbage, so explain mode is run with a fixed
decoding budget (``--explain-tokens``, default 256, like the reference grader) and parse failures
are expected; what is measured is cost, not verdicts.

    python benchmarks/judge_inprocess.py --size 0.6b --rollouts 16 --criteria 12 --json   # GPU
    python benchmarks/judge_inprocess.py --size tiny --rollouts 4 --criteria 4            # CPU
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

# Published Qwen3 shapes (config.json of the Qwen3 releases).
SHAPES = {
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, vocab_size=None),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=151936),
}


def build_model(size: str, out: Path) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training.tiny_model import build_tokenizer

    tok = build_tokenizer()
    shape = dict(SHAPES[size])
    shape["vocab_size"] = shape["vocab_size"] or len(tok)
    cfg = Qwen3Config(**shape, max_position_embeddings=8192, tie_word_embeddings=size in ("tiny", "0.6b", "1.7b", "4b"),
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16 if torch.cuda.is_available() else torch.float32)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def workload(n_rollouts: int, n_criteria: int):
    from reward.judge import JudgeItem, Message

    prompts = [
        "I'm 62 and for the last hour I've had a heavy pressure in my chest that goes into my jaw. "
        "I took an antacid but it did not help. I have high blood pressure and I smoke.",
        "My HbA1c came back at 6.8% and my fasting glucose was 131 mg/dL. My doctor wants to talk next "
        "week. What do these numbers mean and should I start medicine?",
        "My 7-week-old has a temperature of 38.4 C and is feeding less than usual. Can I give paracetamol "
        "and wait until morning?",
        "My watch says I slept 5 hours a night for two weeks and my resting heart rate went from 58 to 67. "
        "Should I be worried? I have been stressed at work.",
    ]
    body = ("Here is what I suggest, step by step, with the reasons for each and what to watch for. "
            "First, consider how urgent this is given the symptoms you describe. ") * 8
    criteria = [f"Criterion {k}: the response " + t for k, t in enumerate([
        "advises calling emergency services immediately.", "explains the meaning of the lab values.",
        "asks about current medications.", "avoids giving a definitive diagnosis.",
        "recommends follow-up with a clinician.", "states the uncertainty of remote assessment.",
        "uses plain language.", "gives a dose within labelled limits.", "mentions red-flag symptoms.",
        "personalises advice to the user's data.", "is concise.", "does not fabricate data."] * 4)][:n_criteria]
    items = []
    for r in range(n_rollouts):
        conv = (Message(role="user", content=prompts[r % len(prompts)]),)
        resp = f"(variant {r}) " + body
        items += [JudgeItem(conversation=conv, response=resp, criterion=c, points=5) for c in criteria]
    return items


async def run_mode(model_dir: Path, mode: str, items, explain_tokens: int, batch: int) -> dict:
    from reward.judge import JudgeConfig
    from reward.judge.inprocess import TransformersJudge

    judge = TransformersJudge(str(model_dir), batch_size=batch, cache=None,
                              config=JudgeConfig(mode=mode, max_explain_tokens=explain_tokens, explain_attempts=1))
    await judge.grade(items[:min(4, len(items))])  # warm-up (kernels, allocator)
    judge.stats.reset()
    _sync()
    t0 = time.perf_counter()
    out = await judge.grade(items)
    _sync()
    wall = time.perf_counter() - t0
    s = judge.stats.as_dict()
    return {"items": len(items), "wall_s": round(wall, 3), "items_per_s": round(len(items) / wall, 2),
            "prompt_tokens": s["prompt_tokens"], "completion_tokens": s["completion_tokens"],
            "failures": sum(not v.ok for v in out)}


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--model", help="use this model dir instead of building a random one")
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--criteria", type=int, default=12)
    ap.add_argument("--explain-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    items = workload(a.rollouts, a.criteria)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(a.model) if a.model else build_model(a.size, Path(tmp) / a.size)
        choice = asyncio.run(run_mode(model_dir, "choice", items, a.explain_tokens, a.batch))
        explain = asyncio.run(run_mode(model_dir, "explain", items, a.explain_tokens, a.batch))
    import torch

    res = {"size": a.size, "device": "cuda" if torch.cuda.is_available() else "cpu",
           "choice": choice, "explain": explain,
           "ratio_wall_explain_over_choice": round(explain["wall_s"] / choice["wall_s"], 2)}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"in-process judge, Qwen3-{a.size} random weights on {res['device']}, {len(items)} items")
        for m in ("choice", "explain"):
            r = res[m]
            print(f"  {m:8s} wall {r['wall_s']:8.2f} s  {r['items_per_s']:8.2f} items/s  prompt {r['prompt_tokens']}"
                  f"  decoded {r['completion_tokens']}  failures {r['failures']}")
        print(f"  explain / choice wall time: {res['ratio_wall_explain_over_choice']}x")


if __name__ == "__main__":
    main()
