"""The memory plan against what TRL 1.16 + FSDP2 allocate (training/memory_plan.py): model states
within 10% of DeepSpeed's own ZeRO-3 estimator (its formula computed here on meta-device Qwen3
models, as ``estimate_zero3_model_states_mem_needs_all_live`` does), the fused LM head instead of
full logits, the unsharded gradients of accumulation without sync_each_batch, a colocated vLLM
share sized for the configured sequence lengths, and the Qwen3-8B arithmetic of docs/training.md."""

from __future__ import annotations

import json
import re

import pytest
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app
from training.memory_plan import PlanInput, model_states, plan, plan_input_from_config
from training.model_dims import model_dims

REPO = REPO_ROOT
GIB = 2**30


def _deepspeed_zero3_estimate(model, gpus: int) -> int:
    """DeepSpeed's estimate_zero3_model_states_mem_needs (cpu_offload False), as its source reads:
    largest_layer_memory = 4 * largest_layer_params; gpu_mem = that + int(18 * total_params / gpus),
    with the largest layer the module owning the most parameters itself."""
    total = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return 4 * largest + int(18 * total / gpus)


def _meta_model(name: str):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    d = model_dims(name)
    kw = dict(vocab_size=d.vocab, hidden_size=d.hidden, num_hidden_layers=d.layers, num_attention_heads=d.heads,
              num_key_value_heads=d.kv_heads, head_dim=d.head_dim, intermediate_size=d.intermediate,
              tie_word_embeddings=d.tied_embeddings)
    if d.experts:
        cfg = transformers.Qwen3MoeConfig(**kw, num_experts=d.experts, num_experts_per_tok=d.experts_per_token,
                                          moe_intermediate_size=d.moe_intermediate)
    else:
        cfg = transformers.Qwen3Config(**kw)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(cfg)


@pytest.mark.parametrize("name", ["Qwen3-0.6B", "Qwen3-4B", "Qwen3-8B", "Qwen3-32B", "Qwen3-30B-A3B"])
def test_fsdp2_model_states_agree_with_deepspeeds_zero3_estimator(name):
    model = _meta_model(name)
    d = model_dims(name)
    assert sum(p.numel() for p in model.parameters()) == d.params()  # our dimensions are the model's
    for gpus in (4, 8):
        ds = _deepspeed_zero3_estimate(model, gpus)
        ours = sum(model_states(d, gpus, "fsdp2").values())
        assert 0.9 <= ours / ds <= 1.1, (name, gpus, ours / ds)
        # ZeRO-3 runs are planned with DeepSpeed's own numbers
        assert sum(model_states(d, gpus, "zero3").values()) == pytest.approx(ds, rel=1e-6)


def _trl(**kw) -> PlanInput:
    base = {"trainer": "trl", "model": "Qwen/Qwen3-8B", "train_tokens": 12288, "logit_tokens": 10000,
            "max_sequence": 12288, "fused_lm_head": True, "accumulation_steps": 32}
    return PlanInput(**{**base, **kw})


def test_trl_counts_the_fused_lm_head_not_full_logits():
    fused = plan(_trl(), gpus=8, gpu_memory_gb=80).per_gpu_gb["logits"]
    full = plan(_trl(fused_lm_head=False), gpus=8, gpu_memory_gb=80).per_gpu_gb["logits"]
    # a 4096 x 32768 bf16 tile, the head's fp32 weight gradient, fp32 hidden-state gradients
    want = (4096 * 32768 * 2 + 4 * 151936 * 4096 + 4 * 10000 * 4096) / GIB
    assert fused == pytest.approx(want, abs=0.01) and full == pytest.approx(10000 * 151936 * 8 / GIB, abs=0.01)
    assert fused < full / 4


def test_accumulation_without_sync_each_batch_holds_the_unsharded_gradients():
    synced = plan(_trl(sync_each_batch=True), gpus=8, gpu_memory_gb=80)
    unsynced = plan(_trl(sync_each_batch=False), gpus=8, gpu_memory_gb=80)
    n = model_dims("Qwen3-8B").params()
    assert synced.per_gpu_gb["unsharded_gradients"] == 0.0
    assert unsynced.per_gpu_gb["unsharded_gradients"] == pytest.approx(4 * n / GIB, abs=0.01)  # fp32 reduction
    assert plan(_trl(sync_each_batch=False, reduce_bytes=2), gpus=8, gpu_memory_gb=80).per_gpu_gb[
        "unsharded_gradients"] == pytest.approx(2 * n / GIB, abs=0.01)  # the 15.3 GiB of bf16
    # the shipped configs sync each micro-batch; dropping it is planned (and refused on 8 x 80 GB)
    cfg = REPO / "configs/trl/stage1_mcq.yaml"
    assert plan_input_from_config(cfg).sync_each_batch
    assert not plan_input_from_config(cfg, ["grpo.accelerator_config=null"]).sync_each_batch


@pytest.mark.parametrize("config", ["stage1_mcq.yaml", "stage3_row_rubrics.yaml", "stage3_clinical_rubric.yaml"])
def test_the_colocated_vllm_share_holds_the_configured_sequences(config, monkeypatch):
    monkeypatch.setenv("FV_STAGE1_MODEL", "Qwen/Qwen3-8B")
    path = str(REPO / "configs/trl" / config)
    ok = CliRunner().invoke(app, ["train", "plan", path, "--gpus", "8", "--gpu-memory-gb", "80", "--json"])
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.stdout)
    assert out["vllm_sequences"] >= 8
    small = CliRunner().invoke(app, ["train", "plan", path, "--gpus", "8", "--gpu-memory-gb", "80", "--json",
                                     "--set", "grpo.vllm_gpu_memory_utilization=0.3"])
    assert small.exit_code == 3 and "vllm_min_sequences" in small.stderr


def test_train_plan_matches_the_hand_arithmetic_in_the_docs():
    """docs/training.md works the Qwen3-8B stage-1 plan by hand; the command prints the same."""
    text = (REPO / "docs/training.md").read_text(encoding="utf-8")
    block = text.split("<!-- plan-arithmetic -->", 1)[1].split("```", 2)[1]
    hand = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+)\s+=.*=\s+([\d.]+) GiB$", block, re.M)}
    assert {"weights", "gathered_weights", "gradients", "optimizer_states", "activations", "logits",
            "vllm_colocated", "trainer"} <= set(hand)
    res = CliRunner().invoke(app, ["train", "plan", str(REPO / "configs/trl/stage1_mcq.yaml"), "--gpus", "8",
                                   "--gpu-memory-gb", "80", "--json"])
    out = json.loads(res.stdout)
    got = {**out["per_gpu_gb"], **out["totals_gb"]}
    for term, gib in hand.items():
        assert got[term] == pytest.approx(gib, abs=0.01), term
