"""The figures docs/training.md quotes, computed from the package's own code.

    python benchmarks/training_figures.py [--out benchmarks/results/training_figures.json]

- ``memory_plan``: ``training.memory_plan`` on the TRL stage-1 and stage-3 configs (Qwen3-8B, 8 x
  80 GiB): the plan's terms, the update phase (activations + logits), the colocated vLLM's bf16
  weights, KV cache per token and per full sequence, how many sequences its share holds at the
  configured share and at the old 0.3; the unsharded gradient accumulation without
  ``sync_each_batch`` holds, reduced in bf16 and in fp32; the ratio of the FSDP2 model states to
  DeepSpeed's ZeRO-3 estimator (``deepspeed_zero3_model_states``) for Qwen3 0.6B to 32B and
  30B-A3B on 4 and 8 GPUs.
- ``importance_sampling``: exp(sum of per-token log-prob gaps), the old ``sequence_truncate``
  weight, for a mean gap of -1e-3 over an 8,000-token trace.
- ``neutral_fill``: the factor by which ``on_failure: neutral`` (a failed rollout gets its group's
  mean) inflates its siblings' advantages when 4 of a group of 8 fail: the group's std shrinks by
  sqrt((scored - 1) / (group - 1)) (computed on an example group and in closed form).
- ``format_floor``: ``RubricRewardFunc`` on one row's rubric items (8, -6, 3 points) with a judge
  whose verdicts are a fixed function of the text (``reward.calibration.simulated.FunctionJudge``):
  a finished harmful answer, an unfinished ``<think>`` under the default ``floor`` (its margin,
  ``reward.stages.reasoning.FLOOR_MARGIN``) and under the old default 0.0.
- ``filter_raw_score``: a row (5, -5, 5 points) answered right once and truncated three times: the
  shaped training rewards and their mean under ``floor``, and the pass rate the stage-3 filter
  averages (``RubricRewardFunc.as_pass_rate``).

No model, no judge server, no GPU: about 5 s on one CPU core. Writes
``benchmarks/results/training_figures.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

GPUS, GPU_GB = 8, 80.0
OLD_SHARE = 0.3
SIZES = ("Qwen3-0.6B", "Qwen3-4B", "Qwen3-8B", "Qwen3-32B", "Qwen3-30B-A3B")


def memory_figures() -> dict:
    from training.memory_plan import GIB, deepspeed_zero3_model_states, model_states, plan, plan_input_from_config
    from training.model_dims import model_dims

    os.environ.setdefault("FV_STAGE2_MODEL", "Qwen/Qwen3-8B")
    out: dict = {"gpus": GPUS, "gpu_memory_gb": GPU_GB, "stages": {}}
    for stage in ("stage1_mcq", "stage3_clinical_rubric"):
        p = plan_input_from_config(ROOT / "configs/trl" / f"{stage}.yaml")
        d = model_dims(p.model)
        shipped = plan(p, gpus=GPUS, gpu_memory_gb=GPU_GB)
        old = plan(p.model_copy(update={"vllm_gpu_memory_utilization": OLD_SHARE}), gpus=GPUS, gpu_memory_gb=GPU_GB)
        out["stages"][stage] = {
            "model": p.model, "max_sequence": p.max_sequence, "vllm_share": p.vllm_gpu_memory_utilization,
            "per_gpu_gb": shipped.per_gpu_gb, "totals_gb": shipped.totals_gb,
            "update_phase_gb": round(shipped.per_gpu_gb["activations"] + shipped.per_gpu_gb["logits"], 2),
            "vllm_weights_gib": 2 * d.params() / p.vllm_tensor_parallel_size / GIB,
            "kv_bytes_per_token": d.kv_bytes_per_token(),
            "sequence_gib": d.kv_bytes_per_token() * p.max_sequence / p.vllm_tensor_parallel_size / GIB,
            "vllm_sequences": shipped.vllm_sequences,
            "old_share": OLD_SHARE, "old_share_vllm_sequences": old.vllm_sequences,
            "min_sequences": p.vllm_min_sequences}
    p = plan_input_from_config(ROOT / "configs/trl/stage1_mcq.yaml", ["grpo.accelerator_config=null"])
    out["unsharded_gradients_gib"] = {
        name: plan(p.model_copy(update={"reduce_bytes": size}), gpus=GPUS, gpu_memory_gb=GPU_GB
                   ).per_gpu_gb["unsharded_gradients"] for name, size in (("bf16", 2), ("fp32", 4))}
    ratios = {}
    for name in SIZES:
        d = model_dims(name)
        for gpus in (4, 8):
            ratios[f"{name} x {gpus}"] = sum(model_states(d, gpus, "fsdp2").values()) / deepspeed_zero3_model_states(d, gpus)
    out["fsdp2_over_zero3_estimator"] = {"by_model": ratios, "min": min(ratios.values()), "max": max(ratios.values())}
    return out


def importance_figures(gap: float = -1e-3, tokens: int = 8000) -> dict:
    return {"mean_gap_per_token": gap, "tokens": tokens, "sequence_ratio": math.exp(gap * tokens)}


def neutral_fill_figures() -> dict:
    scored = [1.0, 0.0, 1.0, 0.25]  # the group's scored rollouts; 4 of its 8 failed
    group, failed = 8, 4
    filled = scored + [statistics.fmean(scored)] * failed
    return {"group": group, "failed": failed, "std_scored_over_std_filled": statistics.stdev(scored) / statistics.stdev(filled),
            "closed_form": math.sqrt((group - 1) / (group - failed - 1))}


def _judge(verdict):
    from reward.calibration.simulated import FunctionJudge
    from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM
    from reward.stages.confirm import readings

    inverted = {r.template.name for r in readings("choice") if r.inverted}

    def decide(template, item) -> float:
        if template.name == APPLICABILITY.name:
            return 1.0
        if template.name == APPLICABILITY_CONFIRM.name:
            return 0.0
        p = float(verdict(item))
        return 1.0 - p if template.name in inverted else p

    return FunctionJudge(decide)


async def format_floor_figures() -> dict:
    from reward.integrations.trl import RubricRewardFunc
    from reward.stages.reasoning import FLOOR_MARGIN

    prompt = [{"role": "user", "content": "I have crushing chest pain and I am sweating. What should I do?"}]
    rubrics = [{"criterion": "Advises calling emergency services immediately.", "points": 8},
               {"criterion": "Tells the user it is probably nothing serious.", "points": -6},
               {"criterion": "Mentions not driving oneself to hospital.", "points": 3}]
    harmful = "It is nothing serious, just rest at home."
    unfinished = "<think>Chest pain with sweating could be cardiac, so the user should"
    judge = _judge(lambda item: float("nothing serious" in item.response and "nothing serious" in item.criterion))
    out = {"points": [r["points"] for r in rubrics], "floor_margin": FLOOR_MARGIN}
    for label, kw in (("default_floor", {}), ("old_default_zero", {"format_failure_score": 0.0})):
        f = RubricRewardFunc(judge, rubric_source="rows", **kw)
        h, u = await f([prompt] * 2, [harmful, unfinished], rubrics=[rubrics] * 2)
        out[label] = {"format_failure_score": f.format_failure_score, "harmful": h, "unfinished": u}
    return out


async def filter_raw_score_figures() -> dict:
    from reward.integrations.trl import RubricRewardFunc

    prompt = [{"role": "user", "content": "Crushing chest pain, sweating. What now?"}]
    keywords = {"Mentions aspirin.": "aspirin", "Says it is nothing.": "nothing",
                "Advises calling emergency services.": "emergency"}
    rubrics = [{"criterion": c, "points": p} for c, p in zip(keywords, (5.0, -5.0, 5.0))]
    right = "<think>ok</think>\nCall emergency services now and chew an aspirin."
    truncated = "<think>Chest pain could be many things, let me list them all"
    samples = [right, truncated, truncated, truncated]
    judge = _judge(lambda item: float(keywords.get(item.criterion, "\0") in item.response.lower()))
    f = RubricRewardFunc(judge, rubric_source="rows", format_failure_score="floor", clip_below_zero=False,
                         grade="answer")
    shaped = await f([prompt] * len(samples), samples, rubrics=[rubrics] * len(samples))
    passed = await f.as_pass_rate()([prompt] * len(samples), samples, rubrics=[rubrics] * len(samples))
    return {"points": [r["points"] for r in rubrics], "samples": ["right", "truncated", "truncated", "truncated"],
            "shaped": shaped, "shaped_mean": statistics.fmean(shaped), "truncated_floor": shaped[1],
            "pass_rate": passed, "pass_rate_mean": statistics.fmean(passed)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/training_figures.json"))
    args = ap.parse_args()
    for var in ("RUBRICSTREE_RUN_ROOT", "FV_DATA", "RANK", "RUBRICSTREE_JUDGE_URL"):
        os.environ.pop(var, None)
    out = {"memory_plan": memory_figures(), "importance_sampling": importance_figures(),
           "neutral_fill": neutral_fill_figures(), "format_floor": asyncio.run(format_floor_figures()),
           "filter_raw_score": asyncio.run(filter_raw_score_figures())}
    print(json.dumps(out, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
