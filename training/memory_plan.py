"""Per-GPU memory plan of a training run (TRL or verl config): does it fit, and what to change.

Data flow: a TRL YAML (``configs/trl``) or a verl Hydra YAML (``configs/verl``, recognised by its
``actor_rollout_ref`` key) -> :class:`PlanInput` (model, micro-batch tokens, sharding, colocated
vLLM, judge server) -> :func:`plan` -> :class:`Plan` (GiB per GPU by term, the largest term,
fits or the setting to change). ``rubricstree train plan`` prints it; ``scripts/train.sh`` refuses
to launch a plan that does not fit unless forced.

The model (estimates, GiB = 2**30 bytes):
- trained weights are fp32 masters (4 B/param), fp32 gradients (4), AdamW moments (8), divided by
  the number of training GPUs under FSDP full shard / ZeRO-3, whole on every GPU under DDP;
  offloaded parts (verl ``param_offload``/``optimizer_offload``) count 0;
- activations per micro-batch of T tokens: with gradient checkpointing one bf16 hidden state per
  layer plus one layer's full set; without, every layer's set (attention via SDPA/flash, no T^2);
- logits: T_logits x vocabulary x 8 bytes (bf16 logits, log-softmax and their gradients);
- colocated vLLM: its ``gpu_memory_utilization`` x GPU memory; with sleep mode (TRL
  ``vllm_enable_sleep_mode``; verl frees its rollout engine during updates) it is released while the
  trainer computes, so the peak is the larger of the generation and training phases, else the sum;
  its share must hold the policy's bf16 weights (over its TP size) and one full-length sequence;
- a judge server on ``judge_gpus`` of the machine's GPUs: bf16 (or 8-bit quantised) weights over
  its tensor-parallel size plus KV cache for ``min_sequences`` contexts of ``max_model_len``, within
  its ``gpu_memory_utilization``;
- a fixed runtime overhead (CUDA context, allocator fragmentation, NCCL buffers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward.errors import InputError
from reward.textio import load_yaml
from training.judge_server import JudgeServer
from training.model_dims import ModelDims, model_dims

__all__ = ["Plan", "PlanInput", "plan", "plan_input_from_config"]

GIB = 2**30
OVERHEAD_GIB = 3.0
JUDGE_OVERHEAD_GIB = 2.0
Sharding = Literal["none", "fsdp2", "zero3", "fsdp"]


class PlanInput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    trainer: Literal["trl", "verl"]
    model: str
    train_tokens: int = Field(ge=1, description="tokens in one training micro-batch")
    logit_tokens: int = Field(ge=1, description="tokens whose logits one micro-batch materialises")
    max_sequence: int = Field(ge=1, description="prompt + completion of one sequence")
    gradient_checkpointing: bool = True
    sharding: Sharding = "fsdp2"
    param_offload: bool = False
    optimizer_offload: bool = False
    vllm_colocated: bool = True
    vllm_gpu_memory_utilization: float = 0.3
    vllm_sleep: bool = True
    vllm_tensor_parallel_size: int = 1
    judge_model: str | None = None
    judge: JudgeServer = JudgeServer()


class Plan(BaseModel):
    fits: bool
    per_gpu_gb: dict[str, float]
    totals_gb: dict[str, float]
    largest: str
    master_weights_dtype: str = "float32"
    sharding: str
    train_gpus: int
    judge_gpus: int
    gpu_memory_gb: float
    problems: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------- the estimate
def _activations(d: ModelDims, tokens: int, checkpointing: bool) -> float:
    attn_width = d.heads * d.head_dim + 2 * d.kv_heads * d.head_dim
    per_layer = 2 * tokens * (8 * d.hidden + 2 * attn_width + 3 * d.active_mlp_width())
    if checkpointing:
        return d.layers * 2 * tokens * d.hidden + per_layer
    return d.layers * per_layer


_ADVICE = {
    "weights": "shard the weights over more GPUs (TRAIN_SHARDING=fsdp2|zero3, --gpus) or offload them "
               "(verl: actor.fsdp_config.param_offload)",
    "gradients": "shard over more GPUs (TRAIN_SHARDING=fsdp2|zero3, --gpus)",
    "optimizer_states": "shard over more GPUs (TRAIN_SHARDING=fsdp2|zero3, --gpus) or offload them "
                        "(verl: actor.fsdp_config.optimizer_offload)",
    "activations": "turn on gradient checkpointing or lower grpo.per_device_train_batch_size "
                   "(verl: actor.ppo_max_token_len_per_gpu)",
    "logits": "lower grpo.per_device_train_batch_size or the completion length "
              "(verl: actor.ppo_max_token_len_per_gpu)",
    "vllm_colocated": "lower grpo.vllm_gpu_memory_utilization or set grpo.vllm_enable_sleep_mode "
                      "(verl: rollout.gpu_memory_utilization)",
    "runtime_overhead": "use GPUs with more memory",
    "judge_weights": "give the judge more GPUs (--judge-gpus / judge_server.tensor_parallel_size) "
                     "or quantise it (judge_server.quantization: fp8)",
    "judge_kv_cache": "lower judge_server.max_model_len, give the judge more GPUs (--judge-gpus) "
                      "or quantise it (judge_server.quantization: fp8)",
}


def plan(p: PlanInput, *, gpus: int, gpu_memory_gb: float, judge_gpus: int = 0) -> Plan:
    """The per-GPU estimate of ``p`` on ``gpus`` GPUs of ``gpu_memory_gb`` GiB, ``judge_gpus`` of
    them serving the judge."""
    if gpus < 1 or judge_gpus < 0 or judge_gpus >= gpus:
        raise InputError(f"--judge-gpus {judge_gpus} must leave training GPUs out of --gpus {gpus}")
    d = model_dims(p.model)
    train_gpus = gpus - judge_gpus
    n = d.params()
    shard = train_gpus if p.sharding != "none" else 1
    terms: dict[str, float] = {
        "weights": 0.0 if p.param_offload else 4 * n / shard,
        "gradients": 4 * n / shard,
        "optimizer_states": 0.0 if p.optimizer_offload else 8 * n / shard,
        "activations": _activations(d, p.train_tokens, p.gradient_checkpointing),
        "logits": 8.0 * p.logit_tokens * d.vocab,
        "vllm_colocated": p.vllm_gpu_memory_utilization * gpu_memory_gb * GIB if p.vllm_colocated else 0.0,
        "runtime_overhead": OVERHEAD_GIB * GIB,
    }
    if p.sharding != "none" and not p.param_offload:  # one layer gathered in bf16 (+ one prefetched)
        terms["weights"] += 2 * 2 * d.layer_params()
    per = {k: v / GIB for k, v in terms.items()}
    states = per["weights"] + per["gradients"] + per["optimizer_states"] + per["runtime_overhead"]
    compute = per["activations"] + per["logits"]
    trainer_total = states + (max(per["vllm_colocated"], compute) if p.vllm_sleep else per["vllm_colocated"] + compute)
    limit = gpu_memory_gb
    problems: list[str] = []
    # the terms that make up the peak: with sleep mode the larger phase (generation or update)
    phase = ["vllm_colocated"] if p.vllm_sleep and per["vllm_colocated"] >= compute else \
        (["activations", "logits"] + ([] if p.vllm_sleep else ["vllm_colocated"]))
    counted = {k: per[k] for k in ["weights", "gradients", "optimizer_states", *phase]}
    totals = {"trainer": round(trainer_total, 2)}
    if trainer_total > limit:
        big = max(counted, key=counted.get)
        problems.append(f"training GPUs need {trainer_total:.1f} of {limit:g} GiB; largest term {big} "
                        f"({per[big]:.1f} GiB): {_ADVICE[big]}")
    if p.vllm_colocated:
        need = (2 * n / p.vllm_tensor_parallel_size + d.kv_bytes_per_token() * p.max_sequence) / GIB
        if need > per["vllm_colocated"]:
            problems.append(f"vllm_colocated: its share ({per['vllm_colocated']:.1f} GiB) cannot hold the policy's "
                            f"bf16 weights and one {p.max_sequence}-token sequence ({need:.1f} GiB): raise "
                            "grpo.vllm_gpu_memory_utilization (verl: rollout.gpu_memory_utilization) or its TP size")
    if judge_gpus:
        jd = model_dims(p.judge_model or "Qwen3-32B")
        tp = p.judge.tensor_parallel_size or judge_gpus
        wbytes = 1 if (p.judge.quantization or "").lower() in ("fp8", "int8", "bitsandbytes") else 2
        per["judge_weights"] = wbytes * jd.params() / tp / GIB
        per["judge_kv_cache"] = jd.kv_bytes_per_token() * p.judge.max_model_len * p.judge.min_sequences / tp / GIB
        judge_total = per["judge_weights"] + per["judge_kv_cache"] + JUDGE_OVERHEAD_GIB
        totals["judge"] = round(judge_total, 2)
        budget = p.judge.gpu_memory_utilization * gpu_memory_gb
        counted.update({k: per[k] for k in ("judge_weights", "judge_kv_cache")})
        if tp > judge_gpus:
            problems.append(f"judge tensor_parallel_size {tp} > --judge-gpus {judge_gpus}")
        if judge_total > budget:
            big = max(("judge_weights", "judge_kv_cache"), key=per.get)
            problems.append(f"judge GPUs need {judge_total:.1f} of {budget:.1f} GiB (gpu_memory_utilization "
                            f"{p.judge.gpu_memory_utilization:g}); largest term {big} ({per[big]:.1f} GiB): {_ADVICE[big]}")
    largest = max(counted, key=counted.get)
    for text in problems:  # the term a failure names is the one to report as largest
        name = text.split("largest term ")[-1].split(" ")[0] if "largest term" in text else text.split(":")[0]
        if name in per:
            largest = name
            break
    return Plan(fits=not problems, per_gpu_gb={k: round(v, 2) for k, v in per.items()}, totals_gb=totals,
                largest=largest, sharding=p.sharding if train_gpus > 1 else "none", train_gpus=train_gpus,
                judge_gpus=judge_gpus, gpu_memory_gb=gpu_memory_gb, problems=problems)


# ---------------------------------------------------------------------------------- configs
def _get(raw: dict, dotted: str, default: Any = None) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return default if node is None else node


def plan_input_from_config(path: str | Path, overrides: list[str] | None = None, *,
                           sharding: Sharding = "fsdp2", judge_model: str | None = None) -> PlanInput:
    """Read a TRL or verl config into a :class:`PlanInput` (``overrides``: ``key=value`` as
    ``--set`` for TRL, Hydra-style ``a.b=value`` for verl)."""
    from reward.envvars import expand_env
    from training.trl_config import apply_overrides

    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", file=str(path))
    raw = load_yaml(path) or {}
    if "actor_rollout_ref" not in raw:
        return _from_trl(path, overrides or [], sharding, judge_model)
    raw = expand_env(apply_overrides(raw, [o.lstrip("+") for o in (overrides or [])]))
    a = "actor_rollout_ref."
    prompt, response = int(_get(raw, "data.max_prompt_length", 1024)), int(_get(raw, "data.max_response_length", 1024))
    seq = prompt + response
    if _get(raw, a + "actor.use_dynamic_bsz", False):
        tokens = int(_get(raw, a + "actor.ppo_max_token_len_per_gpu", 16384))
        if tokens < seq:
            raise InputError(f"actor.ppo_max_token_len_per_gpu {tokens} cannot hold one sequence ({seq} tokens)",
                             file=str(path), field="actor_rollout_ref.actor.ppo_max_token_len_per_gpu")
    else:
        tokens = int(_get(raw, a + "actor.ppo_micro_batch_size_per_gpu", 1)) * seq
    return PlanInput(
        trainer="verl", model=str(_get(raw, a + "model.path")), train_tokens=tokens, logit_tokens=tokens,
        max_sequence=seq, gradient_checkpointing=bool(_get(raw, a + "model.enable_gradient_checkpointing", False)),
        sharding="fsdp", param_offload=bool(_get(raw, a + "actor.fsdp_config.param_offload", False)),
        optimizer_offload=bool(_get(raw, a + "actor.fsdp_config.optimizer_offload", False)),
        vllm_gpu_memory_utilization=float(_get(raw, a + "rollout.gpu_memory_utilization", 0.5)),
        vllm_sleep=True, vllm_tensor_parallel_size=int(_get(raw, a + "rollout.tensor_model_parallel_size", 1)),
        judge_model=judge_model, judge=JudgeServer.model_validate(raw.get("judge_server") or {}))


def _from_trl(path: Path, overrides: list[str], sharding: Sharding, judge_model: str | None) -> PlanInput:
    from training.trl_config import load_config

    cfg = load_config(path, overrides)
    g = cfg.grpo
    completion = int(g.get("max_completion_length", 256))
    seq = int(g.get("vllm_max_model_length") or (completion + 2048))
    mb = int(g.get("per_device_train_batch_size", 8))
    use_vllm = bool(g.get("use_vllm")) and g.get("vllm_mode", "colocate") == "colocate"
    return PlanInput(
        trainer="trl", model=cfg.model, train_tokens=mb * seq, logit_tokens=mb * completion, max_sequence=seq,
        gradient_checkpointing=bool(g.get("gradient_checkpointing", False)), sharding=sharding,
        vllm_colocated=use_vllm, vllm_gpu_memory_utilization=float(g.get("vllm_gpu_memory_utilization", 0.3)),
        vllm_sleep=bool(g.get("vllm_enable_sleep_mode", False)),
        vllm_tensor_parallel_size=int(g.get("vllm_tensor_parallel_size", 1)),
        judge_model=judge_model or (cfg.judge.model if cfg.stage != "mcq" else None), judge=cfg.judge_server)
