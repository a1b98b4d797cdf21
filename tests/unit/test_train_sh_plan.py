"""scripts/train.sh on a GPU machine (stand-in ``nvidia-smi`` and ``accelerate`` on PATH): the
memory plan runs before launching and a plan that does not fit is refused (exit 3) unless
TRAIN_FORCE=1; the accelerate config is chosen by TRAIN_SHARDING."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _machine(tmp_path: Path, gpus: int, mib: int) -> dict:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    lines = "\\n".join(f"GPU {i}: Fake (UUID: GPU-{i})" for i in range(gpus))
    smi = bin_ / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\ncase "$*" in *query-gpu*) for i in $(seq {gpus}); do echo {mib}; done ;; '
                   f'*) printf "{lines}\\n" ;; esac\n')
    acc = bin_ / "accelerate"
    acc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/accelerate-args\n')
    for f in (smi, acc):
        f.chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}", "ACCELERATE": str(acc)}


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_", "JUDGE_", "TRAIN_", "CUDA_VISIBLE"))}
    base.update({"PYTHON": sys.executable, **env})
    return subprocess.run(["bash", str(REPO / "scripts/train.sh"), *args], cwd=REPO, env=base,
                          capture_output=True, text=True, timeout=120)


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
