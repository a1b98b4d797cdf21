"""The policy server of the pipeline's filters never takes the judge's GPUs (scripts/gpu_lists.sh,
used by scripts/train_pipeline.sh and scripts/train.sh): with the judge on GPU 7 it gets 0-6,
whether the pipeline started the judge or it runs on its own (a judge URL); overlapping lists are
refused with a message naming both; a judge URL on this machine with no GPU list is refused
(its GPUs are unknown). train.sh refuses overlapping judge and trainer lists when the judge is
given by URL too. A stand-in nvidia-smi on PATH lists 8 GPUs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

EIGHT = "".join(f"echo 'GPU {i}: Fake (UUID: GPU-{i})'\n" for i in range(8))


@pytest.fixture
def eight_gpus(tmp_path) -> dict:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\n" + EIGHT)
    (bin_ / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_", "TRAIN_CUDA", "POLICY_", "CUDA_VIS",
                                                                     "RUBRICSTREE_JUDGE"))}
    return {**env, "PATH": f"{bin_}:{os.environ['PATH']}"}


def policy(env: dict, url: str = "", **lists: str) -> subprocess.CompletedProcess:
    script = f'. "{REPO_ROOT}/scripts/gpu_lists.sh"; policy_gpus "$1"'
    return subprocess.run(["bash", "-c", script, "x", url], env={**env, **lists}, capture_output=True, text=True,
                          timeout=30)


def test_the_policy_server_keeps_off_the_judges_gpus(eight_gpus):
    for url in ("", "http://127.0.0.1:8100/v1", "http://judge.example:8000/v1"):
        res = policy(eight_gpus, url, JUDGE_CUDA_VISIBLE_DEVICES="7")
        assert res.returncode == 0 and res.stdout.strip() == "0,1,2,3,4,5,6", res.stderr
    res = policy(eight_gpus, "http://judge.example:8000/v1")  # a judge elsewhere: every GPU
    assert res.stdout.strip() == "0,1,2,3,4,5,6,7"
    res = policy(eight_gpus, "", JUDGE_CUDA_VISIBLE_DEVICES="6,7", TRAIN_CUDA_VISIBLE_DEVICES="0,1,2,3,4,5")
    assert res.stdout.strip() == "0,1,2,3,4,5"


def test_overlap_and_an_unplaced_local_judge_are_refused(eight_gpus):
    res = policy(eight_gpus, "http://127.0.0.1:8100/v1", JUDGE_CUDA_VISIBLE_DEVICES="7",
                 POLICY_CUDA_VISIBLE_DEVICES="4,5,6,7")
    assert res.returncode == 2 and res.stdout == "" and "GPU(s) 7 are both the judge's" in res.stderr
    res = policy(eight_gpus, "", JUDGE_CUDA_VISIBLE_DEVICES="3", TRAIN_CUDA_VISIBLE_DEVICES="0,1,2,3")
    assert res.returncode == 2 and "GPU(s) 3" in res.stderr
    res = policy(eight_gpus, "http://localhost:8100/v1")
    assert res.returncode == 2 and "JUDGE_CUDA_VISIBLE_DEVICES" in res.stderr and "runs on this machine" in res.stderr


def test_a_judge_named_by_this_hosts_name_or_address_is_on_this_machine(eight_gpus):
    """`serve_judge.sh --host 0.0.0.0` and a URL with this node's name (the docs' JUDGE_HOST) or one
    of its addresses: the judge's GPUs are on this machine, so an unplaced judge is refused too."""
    import socket

    names = [socket.gethostname()]
    ips = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    names += [ip for ip in ips if ":" not in ip][:1]
    for host in names:
        res = policy(eight_gpus, f"http://{host}:8000/v1")
        assert res.returncode == 2 and "runs on this machine" in res.stderr, (host, res.stderr)
        res = policy(eight_gpus, f"http://{host}:8000/v1", JUDGE_CUDA_VISIBLE_DEVICES="7")
        assert res.returncode == 0 and res.stdout.strip() == "0,1,2,3,4,5,6"


def test_train_sh_refuses_overlap_with_a_judge_given_by_url(eight_gpus):
    env = {**eight_gpus, "PYTHON": sys.executable, "RUBRICSTREE_TINY_MODEL": "/some/tiny",
           "JUDGE_CUDA_VISIBLE_DEVICES": "6,7", "TRAIN_CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6"}
    res = subprocess.run(["bash", str(REPO_ROOT / "scripts/train.sh"), "configs/smoke/stage2_error_rubric.yaml",
                          "--set", "judge.url=http://127.0.0.1:8100/v1"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "GPU(s) 6 are in both" in res.stderr, res.stderr[-2000:]
