"""scripts/gpu_check.sh wired on CPU (issue 38): ``--dry-run`` runs every phase on the tiny model,
the train phase through the same ``accelerate launch --config_file configs/accelerate/fsdp2.yaml``
as on a GPU, as two CPU processes (accelerate gives them gloo data parallelism, not the FSDP2
plugin, which it builds only on an accelerator: the JSON says what it set up), with the optimiser
step inside the measured ``update`` phase; one JSON object with each phase's wall time, a global
deadline, and an ``ok`` that is false when a package is missing or out of range, when a phase
fails, or when the deadline passes. Without a GPU and without --dry-run it refuses. The GPU
figures come from a GPU machine (docs/training.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rt_gpu import stand_in_modules
from rt_paths import REPO_ROOT, judge_venv_python

REPO = REPO_ROOT
PHASES = ("env", "build", "train", "serve", "judge")


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


def test_a_missing_package_makes_the_env_phase_not_ok():
    from importlib import metadata

    from benchmarks.gpu_check import env_phase

    def without_trl(p: str):
        if p == "trl":
            return None
        try:
            return metadata.version(p)
        except metadata.PackageNotFoundError:
            return None

    got = env_phase(True, version_of=without_trl)
    assert not got["ok"] and got["env_check"] == ["trl is not installed, and the TRL launcher (TRL 1.16) needs it"]
    assert env_phase(True)["ok"]


def test_a_package_out_of_range_makes_the_env_phase_not_ok_through_the_script(tmp_path):
    """A trl 0.9.0 record ahead of the real one on PYTHONPATH: the phase process reports it."""
    site = stand_in_modules(tmp_path / "site", torch=None, vllm=None, deepspeed=None)
    info = site / "trl-0.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trl\nVersion: 0.9.0\n")
    out = tmp_path / "env.json"
    res = subprocess.run([sys.executable, str(REPO / "benchmarks/gpu_check.py"), "env", "--dry-run", "--result",
                          str(out)], cwd=REPO, env=_env(PYTHONPATH=str(site)), capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert not got["ok"] and "trl 0.9.0 is installed" in got["env_check"][0]


def test_the_global_deadline_skips_what_it_cannot_fit_and_the_check_fails(tmp_path):
    out = tmp_path / "check.json"
    res = subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh"), "--dry-run", "--deadline-s", "1", "--out",
                          str(out), "--work", str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True,
                         env=_env(), timeout=120, check=False)
    assert res.returncode == 1
    got = json.loads(out.read_text())
    assert not got["ok"] and got["deadline_s"] == 1 and set(got["phase_wall_s"]) == set(PHASES)
    assert all(not got[p]["ok"] and "skipped" in got[p]["error"] for p in PHASES)


def test_gpu_keeps_the_modes_it_is_given():
    from benchmarks.judge_inprocess import MODES, parse_args

    assert parse_args(["--gpu", "--modes", "choice,explain"]).modes == ["choice", "explain"]
    a = parse_args(["--gpu"])
    assert a.modes == list(MODES) and a.size == "8b"
    assert parse_args([]).modes == ["choice", "choice_per_item"]


def test_the_measured_process_tree_is_found_from_proc():
    from benchmarks.gpu_phase_memory import _descendants

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = _descendants(os.getpid())
        assert os.getpid() in tree and child.pid in tree and 1 not in tree
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_dry_run_goes_through_accelerate_and_writes_every_phase(tmp_path):
    vllm = judge_venv_python()
    env = _env(**({"VLLM_PYTHON": vllm} if vllm else {}))
    out = tmp_path / "check.json"
    res = subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh"), "--dry-run", "--out", str(out), "--work",
                          str(tmp_path / "work"), "--port", "18233"], cwd=REPO, capture_output=True, text=True,
                         env=env, timeout=1500, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["dry_run"] and got["ok"] and json.loads(res.stdout) == got
    assert all(got[p]["ok"] and got[p]["wall_s"] > 0 for p in ("env", "build", "train", "judge"))
    assert got["phase_wall_s"] == {p: got[p]["wall_s"] for p in PHASES} and got["deadline_s"] == 480
    assert got["env"]["torch"] and got["env"]["env_check"] == []
    train = got["train"]
    assert train["global_step"] == 1 and train["export"].endswith("/stage1/hf")
    assert train["optimizer_step_phase"] == "update"  # the optimiser step is measured with the update
    acc = train["accelerate"]
    assert acc["num_processes"] == 2 and acc["distributed_type"] == "MULTI_CPU" and not acc["fsdp_plugin"]
    assert acc["launcher_env"]["ACCELERATE_USE_FSDP"] == "true" and acc["launcher_env"]["FSDP_VERSION"] == "2"
    assert got["serve"]["reload"]["config_dtype"] == "float32" and got["serve"]["reload"]["params"] > 0
    assert got["serve"]["serve"] == "ok" if vllm else got["serve"]["serve"].startswith("skipped")
    modes = got["judge"]["modes"]
    assert set(modes) == {"choice", "explain", "rubric_batch"}
    assert all(m["rollouts_per_s"] > 0 for m in modes.values())
