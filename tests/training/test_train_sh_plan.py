"""scripts/train.sh on a GPU machine (stand-in ``nvidia-smi`` and ``accelerate`` on PATH, and
installed-package records for vllm/deepspeed): the memory plan runs before launching and a plan
that does not fit is refused (exit 3) unless TRAIN_FORCE=1; the accelerate config is chosen by
TRAIN_SHARDING; a missing or unaccepted vllm/deepspeed, or a GPU on both the judge's and the
trainer's list, stops the launch before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_gpu import gpu_machine
from rt_net import free_port
from rt_paths import REPO_ROOT

REPO = REPO_ROOT


def _machine(tmp_path: Path, gpus: int, mib: int, **installed: str) -> dict:
    """A GPU machine (rt_gpu: stand-in nvidia-smi and modules; driver 580, torch 2.11 built for CUDA 13)
    with an accelerate that records its arguments. ``installed``: a stand-in's version ("" = absent)."""
    acc = tmp_path / "accelerate"
    acc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/accelerate-args\n')
    acc.chmod(0o755)
    modules = {k: (v or None) for k, v in installed.items()}
    return {**gpu_machine(tmp_path, gpus=gpus, mib=mib, **modules), "ACCELERATE": str(acc)}


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_", "JUDGE_", "TRAIN_", "CUDA_VISIBLE"))}
    base.update({"PYTHON": sys.executable, **env})
    return subprocess.run(["bash", str(REPO / "scripts/train.sh"), *args], cwd=REPO, env=base,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("sharding", ["fsdp2", "zero3"])
def test_a_fitting_plan_launches_with_the_sharding_config(tmp_path, sharding):
    env = {**_machine(tmp_path, 8, 81559), "TRAIN_SHARDING": sharding}
    res = _run(env, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 0, res.stderr
    assert "fits: True" in res.stderr
    args = (tmp_path / "accelerate-args").read_text()
    assert f"--config_file configs/accelerate/{sharding}.yaml --num_processes 8" in args
    assert (REPO / f"configs/accelerate/{sharding}.yaml").is_file()


def test_a_plan_that_does_not_fit_is_refused_unless_forced(tmp_path):
    env = _machine(tmp_path, 1, 24576)
    res = _run(env, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 3 and "largest term optimizer_states" in res.stderr
    assert not (tmp_path / "accelerate-args").exists()
    res = _run({**env, "TRAIN_FORCE": "1"}, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 0 and "TRAIN_FORCE=1" in res.stderr
    assert (tmp_path / "accelerate-args").exists()


def _fake_vllm(tmp_path: Path) -> dict:
    """A stand-in ``vllm`` next to VLLM_PYTHON: records its arguments and answers /v1/models."""
    bin_ = tmp_path / "vllm-bin"
    bin_.mkdir()
    site = tmp_path / "site"
    (site / "v1").mkdir(parents=True)
    vllm = bin_ / "vllm"
    # lists the served name it was given, as vLLM does (serve_judge.sh checks it)
    vllm.write_text(f'#!/bin/bash\necho "$@" > {tmp_path}/vllm-args\nport=8000\nname=judge\n'
                    'while [ $# -gt 0 ]; do [ "$1" = --port ] && port=$2; '
                    '[ "$1" = --served-model-name ] && name=$2; shift; done\n'
                    f'printf \'{{"data": [{{"id": "%s"}}]}}\' "$name" > {site}/v1/models\n'
                    f'exec {sys.executable} -m http.server "$port" --bind 127.0.0.1 --directory {site}\n')
    vllm.chmod(0o755)
    return {"VLLM_PYTHON": str(bin_ / "python")}


def test_serve_judge_passes_tensor_parallel_length_memory_and_quantisation_to_vllm(tmp_path):
    env = {**_machine(tmp_path, 2, 81559), **_fake_vllm(tmp_path)}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_VISIBLE", "VLLM"))}
    port = free_port()
    res = subprocess.run(
        ["bash", str(REPO / "scripts/serve_judge.sh"), "--model", "Qwen/Qwen3-32B", "--port", str(port),
         "--pid-file", str(tmp_path / "pid"), "--log", str(tmp_path / "log"), "--",
         "--tensor-parallel-size", "2", "--max-model-len", "16384", "--gpu-memory-utilization", "0.9",
         "--quantization", "fp8"],
        cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=60, check=False)
    try:
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == f"http://127.0.0.1:{port}"
        args = (tmp_path / "vllm-args").read_text().split()
        assert args[:2] == ["serve", "Qwen/Qwen3-32B"]
        joined = " ".join(args)
        assert ("--tensor-parallel-size 2 --max-model-len 16384 --gpu-memory-utilization 0.9 "
                "--quantization fp8") in joined
    finally:
        os.kill(int((tmp_path / "pid").read_text()), 15)


def test_plan_prints_the_judge_args_train_sh_passes():
    from typer.testing import CliRunner

    from rubricstree import app

    res = CliRunner().invoke(app, ["train", "plan", str(REPO / "configs/trl/stage3_clinical_rubric.yaml"),
                                   "--gpus", "8", "--gpu-memory-gb", "80", "--judge-gpus", "2",
                                   "--print-judge-args", "--set", "judge_server.max_model_len=12000"])
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["--tensor-parallel-size", "2", "--max-model-len", "12000",
                                  "--gpu-memory-utilization", "0.9"]


@pytest.mark.parametrize(("installed", "sharding", "says"), [
    ({"vllm": ""}, "fsdp2", "vllm is not installed, and grpo.use_vllm: true"),
    ({"vllm": "0.33.0"}, "fsdp2", "vllm 0.33.0 is installed; grpo.use_vllm: true (vllm_mode colocate) needs >= 0.22.0 and <= 0.31.0"),
    ({"deepspeed": ""}, "zero3", "deepspeed is not installed, and TRAIN_SHARDING=zero3 needs it"),
])
def test_a_missing_package_stops_the_launch_before_anything_starts(tmp_path, installed, sharding, says):
    env = {**_machine(tmp_path, 8, 81559, **installed), "TRAIN_SHARDING": sharding}
    res = _run(env, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 2 and says in res.stderr
    assert ".[train,verl,gpu]" in res.stderr
    assert "fits:" not in res.stderr and not (tmp_path / "accelerate-args").exists()


def test_the_cpu_smoke_config_needs_no_gpu_package(tmp_path):
    from training.env_check import check
    from training.trl_config import load_config

    os.environ.setdefault("RUBRICSTREE_TINY_MODEL", "/some/tiny")
    cfg = load_config(REPO / "configs/smoke/stage1_mcq.yaml")
    assert check(cfg.grpo, "none", version_of=lambda pkg: None) == []
    assert check({"use_vllm": True}, "zero3", version_of=lambda pkg: None) == [
        "vllm is not installed, and grpo.use_vllm: true (vllm_mode colocate) needs it",
        "deepspeed is not installed, and TRAIN_SHARDING=zero3 needs it"]


def test_a_gpu_on_both_the_judge_and_trainer_lists_is_refused(tmp_path):
    env = {**_machine(tmp_path, 8, 81559), "RUBRICSTREE_JUDGE_MODEL": "/some/judge",
           "JUDGE_CUDA_VISIBLE_DEVICES": "6,7", "TRAIN_CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6"}
    res = _run(env, "configs/trl/stage2_error_rubric.yaml", "--set", "model=Qwen/Qwen3-8B")
    assert res.returncode == 2 and "GPU(s) 6 are in both" in res.stderr
    assert "starting a judge server" not in res.stderr and not (tmp_path / "accelerate-args").exists()


def _recording_accelerate(tmp_path: Path, env: dict) -> dict:
    """The stand-in accelerate also records the GPUs it was given."""
    acc = Path(env["ACCELERATE"])
    acc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/accelerate-args\n'
                   f'echo "${{CUDA_VISIBLE_DEVICES:-<unset>}}" > {tmp_path}/accelerate-gpus\n')
    return env


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://localhost:8000/v1"])
def test_a_running_judge_on_this_machine_keeps_its_gpus(tmp_path, url):
    """A judge given by URL (started by hand on GPU 7) is not the trainer's: with its GPUs named the
    trainer gets the others; with none named on a local URL the launch is refused."""
    env = _recording_accelerate(tmp_path, _machine(tmp_path, 8, 81559))
    base = {**env, "RUBRICSTREE_JUDGE_URL": url}
    args = ("configs/trl/stage2_error_rubric.yaml", "--set", "model=Qwen/Qwen3-8B")
    res = _run(base, *args)
    assert res.returncode == 2 and "runs on this machine" in res.stderr and "JUDGE_CUDA_VISIBLE_DEVICES" in res.stderr
    assert not (tmp_path / "accelerate-args").exists()
    res = _run({**base, "JUDGE_CUDA_VISIBLE_DEVICES": "7"}, *args)
    assert res.returncode == 0, res.stderr
    assert "the trainer takes GPU(s) 0,1,2,3,4,5,6" in res.stderr
    assert (tmp_path / "accelerate-gpus").read_text().strip() == "0,1,2,3,4,5,6"
    assert "--num_processes 7" in (tmp_path / "accelerate-args").read_text()
    res = _run({**base, "JUDGE_CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, *args)
    assert res.returncode == 2 and "no GPU is left for the trainer" in res.stderr


def test_a_remote_judge_leaves_every_gpu_to_the_trainer(tmp_path):
    env = _recording_accelerate(tmp_path, _machine(tmp_path, 8, 81559))
    res = _run({**env, "RUBRICSTREE_JUDGE_URL": "http://judge.example.internal:8000/v1"},
               "configs/trl/stage2_error_rubric.yaml", "--set", "model=Qwen/Qwen3-8B")
    assert res.returncode == 0, res.stderr
    assert "--num_processes 8" in (tmp_path / "accelerate-args").read_text()
    assert (tmp_path / "accelerate-gpus").read_text().strip() == "<unset>"


def test_stage1_keeps_off_a_named_judge_gpu_and_a_restricted_launch_is_not_refused(tmp_path):
    """Stage 1 has no judge, but one left running for the next stage (JUDGE_CUDA_VISIBLE_DEVICES)
    keeps its GPU; a launch already restricted by CUDA_VISIBLE_DEVICES (a SLURM allocation) with a
    local judge is the user's choice, not refused."""
    env = _recording_accelerate(tmp_path, _machine(tmp_path, 8, 81559))
    res = _run({**env, "JUDGE_CUDA_VISIBLE_DEVICES": "7"}, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "accelerate-gpus").read_text().strip() == "0,1,2,3,4,5,6"
    res = _run({**env, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6", "RUBRICSTREE_JUDGE_URL": "http://127.0.0.1:8000/v1"},
               "configs/trl/stage2_error_rubric.yaml", "--set", "model=Qwen/Qwen3-8B")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "accelerate-gpus").read_text().strip() == "0,1,2,3,4,5,6"
    assert "--num_processes 7" in (tmp_path / "accelerate-args").read_text()
