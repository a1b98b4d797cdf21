"""The memory plan (training/memory_plan.py, training/model_dims.py, ``rubricstree train plan``):
Qwen3 dimensions give the published parameter counts, a config.json is read exactly, the shipped
TRL and verl configs fit 8 x 80 GB with fp32 masters and sharding, and 1 x 24 GB exits non-zero
naming the largest term and the setting to change."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app
from training.judge_server import JudgeServer, judge_vllm_args
from training.memory_plan import PlanInput, plan, plan_input_from_config
from training.model_dims import QWEN3, model_dims

REPO = REPO_ROOT
SHIPPED = [REPO / "configs" / k / f for k in ("trl", "verl")
           for f in ("stage1_mcq.yaml", "stage2_error_rubric.yaml", "stage3_clinical_rubric.yaml")]


@pytest.mark.parametrize(("name", "billions"), [
    # the model cards' totals (Qwen3 technical report / Hugging Face model cards)
    ("Qwen3-0.6B", 0.6), ("Qwen3-1.7B", 1.7), ("Qwen3-4B", 4.0), ("Qwen3-8B", 8.2),
    ("Qwen3-14B", 14.8), ("Qwen3-32B", 32.8), ("Qwen3-30B-A3B", 30.5)])
def test_qwen3_table_gives_the_published_sizes(name, billions):
    assert model_dims(f"Qwen/{name}").params() / 1e9 == pytest.approx(billions, abs=0.06)
    assert model_dims(f"/ckpt/{name}") == QWEN3[name.lower()]


def test_config_json_counts_the_checkpoints_parameters(tiny_model_dir):
    """The count from config.json equals the tensor shapes stored in the safetensors file."""
    raw = (Path(tiny_model_dir) / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    stored = 0
    for key, meta in header.items():
        if key != "__metadata__":
            n = 1
            for s in meta["shape"]:
                n *= s
            stored += n
    assert model_dims(str(tiny_model_dir)).params() == stored


def test_unknown_model_names_the_field():
    from reward.errors import InputError

    with pytest.raises(InputError, match="config.json"):
        model_dims("some/Llama-7B")


@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_shipped_configs_fit_8x80_with_fp32_masters_and_sharding(config):
    res = CliRunner().invoke(app, ["train", "plan", str(config), "--gpus", "8", "--gpu-memory-gb", "80", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["fits"] and out["master_weights_dtype"] == "float32" and out["sharding"] in ("fsdp2", "fsdp")
    assert set(out["per_gpu_gb"]) >= {"weights", "gradients", "optimizer_states", "activations", "logits",
                                      "vllm_colocated"}


@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_shipped_configs_do_not_fit_one_24gb_gpu(config):
    res = CliRunner().invoke(app, ["train", "plan", str(config), "--gpus", "1", "--gpu-memory-gb", "24", "--json"])
    assert res.exit_code == 3
    out = json.loads(res.stdout)
    assert not out["fits"] and out["largest"] == "optimizer_states"  # 8 B/param of Adam moments, unsharded
    assert "largest term optimizer_states" in res.stderr and "shard" in res.stderr


def _p(**kw) -> PlanInput:
    base = {"trainer": "trl", "model": "Qwen/Qwen3-8B", "train_tokens": 12288, "logit_tokens": 10000,
            "max_sequence": 12288}
    return PlanInput(**{**base, **kw})


def test_sharding_divides_the_states_and_ddp_does_not():
    full = plan(_p(sharding="none"), gpus=8, gpu_memory_gb=80).per_gpu_gb
    shard = plan(_p(sharding="fsdp2"), gpus=8, gpu_memory_gb=80).per_gpu_gb
    assert full["optimizer_states"] == pytest.approx(8 * shard["optimizer_states"], rel=1e-3)
    assert full["optimizer_states"] == pytest.approx(8 * 8.19e9 / 2**30, rel=0.01)  # two fp32 Adam moments


def test_gradient_checkpointing_and_micro_batch_drive_activations_and_logits():
    on = plan(_p(), gpus=8, gpu_memory_gb=80).per_gpu_gb
    off = plan(_p(gradient_checkpointing=False), gpus=8, gpu_memory_gb=80).per_gpu_gb
    assert off["activations"] > 10 * on["activations"]
    two = plan(_p(train_tokens=2 * 12288, logit_tokens=20000), gpus=8, gpu_memory_gb=80).per_gpu_gb
    assert two["logits"] == pytest.approx(2 * on["logits"]) and on["logits"] == pytest.approx(
        10000 * 151936 * 8 / 2**30, rel=1e-3)


def test_without_sleep_mode_vllm_adds_to_the_update_phase():
    sleep = plan(_p(), gpus=8, gpu_memory_gb=80)
    awake = plan(_p(vllm_sleep=False), gpus=8, gpu_memory_gb=80)
    assert awake.totals_gb["trainer"] == pytest.approx(
        sleep.totals_gb["trainer"] + min(sleep.per_gpu_gb["vllm_colocated"],
                                         sleep.per_gpu_gb["activations"] + sleep.per_gpu_gb["logits"]), abs=0.05)


def test_a_bf16_qwen3_32b_judge_does_not_fit_one_80gb_gpu_and_the_plan_says_what_to_change():
    p = _p(judge_model="Qwen/Qwen3-32B")
    one = plan(p, gpus=8, gpu_memory_gb=80, judge_gpus=1)
    assert not one.fits and one.largest == "judge_weights"
    assert any("quantis" in t or "--judge-gpus" in t for t in one.problems)
    assert plan(p, gpus=8, gpu_memory_gb=80, judge_gpus=2).fits  # TP 2
    fp8 = _p(judge_model="Qwen/Qwen3-32B", judge=JudgeServer(quantization="fp8"))
    assert plan(fp8, gpus=8, gpu_memory_gb=80, judge_gpus=1).fits
    assert judge_vllm_args(JudgeServer(quantization="fp8"), 1) == [
        "--tensor-parallel-size", "1", "--max-model-len", "16384", "--gpu-memory-utilization", "0.9",
        "--quantization", "fp8"]


def test_verl_reads_its_micro_batch_and_offload_settings():
    cfg = REPO / "configs/verl/stage3_clinical_rubric.yaml"
    pin = plan_input_from_config(cfg)
    assert pin.trainer == "verl" and pin.train_tokens == 20480 and pin.max_sequence == 20000
    off = plan_input_from_config(cfg, ["actor_rollout_ref.actor.fsdp_config.optimizer_offload=true"])
    assert plan(off, gpus=8, gpu_memory_gb=80).per_gpu_gb["optimizer_states"] == 0.0


@pytest.mark.parametrize("config", ["stage2_error_rubric.yaml", "stage3_clinical_rubric.yaml"])
def test_the_readme_one_node_example_fits_only_with_the_fp8_judge(config, monkeypatch):
    """README: judge on GPU 7, trainer on 0-6, RUBRICSTREE_JUDGE_QUANTIZATION=fp8."""
    cmd = ["train", "plan", str(REPO / "configs/trl" / config), "--gpus", "8", "--gpu-memory-gb", "80",
           "--judge-gpus", "1", "--json"]
    monkeypatch.setenv("RUBRICSTREE_JUDGE_QUANTIZATION", "fp8")
    assert CliRunner().invoke(app, cmd).exit_code == 0
    monkeypatch.delenv("RUBRICSTREE_JUDGE_QUANTIZATION")
    res = CliRunner().invoke(app, cmd)
    assert res.exit_code == 3 and json.loads(res.stdout)["largest"] == "judge_weights"


def test_stage2_configs_refuse_without_a_stage1_checkpoint(monkeypatch):
    from reward.errors import InputError
    from training.trl_config import load_config

    monkeypatch.delenv("FV_STAGE1_MODEL")
    with pytest.raises(InputError, match="FV_STAGE1_MODEL"):
        load_config(REPO / "configs/trl/stage2_error_rubric.yaml")
    with pytest.raises(InputError, match="FV_STAGE1_MODEL"):
        plan_input_from_config(REPO / "configs/verl/stage2_error_rubric.yaml")
    assert load_config(REPO / "configs/trl/stage2_error_rubric.yaml", ["model=/ckpt/stage1"]).model == "/ckpt/stage1"
