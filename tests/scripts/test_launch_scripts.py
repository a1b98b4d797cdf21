"""scripts/train.sh and scripts/train_verl.sh up to the point where they would start training:
config errors are shown, configs are found from the caller's directory, and on a GPU machine
(a stand-in ``nvidia-smi`` on PATH) a judge server is never started without its own GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

REPO = REPO_ROOT


def run(script: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_JUDGE", "JUDGE_", "TRAIN_CUDA", "CUDA_VISIBLE"))}
    base.update({"PYTHON": sys.executable, "RUBRICSTREE_TINY_MODEL": "/some/tiny"}, **(env or {}))
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=cwd, env=base,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def fake_gpu(tmp_path) -> dict:
    """A PATH on which ``nvidia-smi -L`` lists two GPUs (and no real one is consulted)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake (UUID: GPU-0)'\necho 'GPU 1: Fake (UUID: GPU-1)'\n")
    smi.chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}"}


def test_train_sh_shows_the_config_error(tmp_path):
    res = run("train.sh", "configs/smoke/stage1_mcq.yaml", "--set", "grpo.output_dir=x")
    assert res.returncode == 2
    assert "set output_dir at the top level" in res.stderr and "stage1_mcq.yaml" in res.stderr


def test_train_sh_finds_a_relative_config_from_the_callers_directory():
    res = run("train.sh", "stage1_mcq.yaml", "--set", "bogus=1", cwd=REPO / "configs" / "smoke")
    assert res.returncode == 2 and "no such config" not in res.stderr and "bogus" in res.stderr


def test_train_sh_refuses_to_start_a_judge_without_its_own_gpus(fake_gpu):
    env = {**fake_gpu, "RUBRICSTREE_JUDGE_MODEL": "/some/judge"}
    res = run("train.sh", "configs/smoke/stage2_error_rubric.yaml", env=env)
    assert res.returncode == 2 and "JUDGE_CUDA_VISIBLE_DEVICES" in res.stderr
    assert "starting a judge server" not in res.stderr
    res = run("train.sh", "configs/smoke/stage2_error_rubric.yaml",
              env={**env, "JUDGE_CUDA_VISIBLE_DEVICES": "1"})  # the trainer would still see GPU 1
    assert res.returncode == 2 and "TRAIN_CUDA_VISIBLE_DEVICES" in res.stderr


@pytest.mark.slow
def test_train_verl_sh_reads_a_relative_data_folder_from_the_callers_directory(tmp_path):
    pytest.importorskip("verl")
    (tmp_path / "mydata").mkdir()
    res = run("train_verl.sh", str(REPO / "configs/verl/stage1_mcq.yaml"), "--cfg", "job", "--resolve", "--debug",
              cwd=tmp_path, env={"RUBRICSTREE_VERL_DATA": "mydata"})  # --debug is ours: Hydra never sees it
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"train_files: {tmp_path}/mydata/stage1_train.parquet" in res.stdout


FAKE_VLLM = r'''#!/usr/bin/env python3
"""Stands in for `vllm serve MODEL ... --port P`: records its GPUs and flags, answers /v1/models."""
import http.server, json, os, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
with open(os.path.join(os.environ["FAKE_RECORD"], f"{port}.json"), "w") as fh:
    json.dump({"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "args": args}, fh)

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = args[args.index("--served-model-name") + 1]  # as vLLM lists it (serve_judge.sh checks)
        self.send_response(200); self.end_headers(); self.wfile.write(json.dumps({"data": [{"id": name}]}).encode())
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def test_eval_checkpoint_puts_policy_and_judge_on_their_own_gpus(tmp_path, fake_gpu):
    """On a multi-GPU machine a large judge must not be squeezed into half of GPU 0 beside the
    policy; several judge GPUs give it tensor parallelism."""
    import json as json_

    bin_ = Path(fake_gpu["PATH"].split(":")[0])
    (bin_ / "vllm").write_text(FAKE_VLLM)
    (bin_ / "vllm").chmod(0o755)
    (bin_ / "rubricstree").write_text('#!/bin/sh\necho "$@" >> "$FAKE_RECORD/rubricstree.txt"\n')
    (bin_ / "rubricstree").chmod(0o755)
    rec = tmp_path / "rec"
    rec.mkdir()
    pp, jp = free_port(), free_port()
    env = {**fake_gpu, "FAKE_RECORD": str(rec), "VLLM_PYTHON": str(bin_ / "python"),
           "RUBRICSTREE_BIN": str(bin_ / "rubricstree"), "JUDGE_CUDA_VISIBLE_DEVICES": "1,2"}
    res = run("eval_checkpoint.sh", "/ckpt/fv-8b", "--judge", "Qwen/Qwen3-32B", "--policy-port", str(pp),
              "--judge-port", str(jp), "--out", str(tmp_path / "out"), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    policy, judge = (json_.loads((rec / f"{p}.json").read_text()) for p in (pp, jp))
    assert policy["cuda"] == "0" and judge["cuda"] == "1,2"
    assert judge["args"][judge["args"].index("--tensor-parallel-size") + 1] == "2"
    assert policy["args"][policy["args"].index("--gpu-memory-utilization") + 1] == "0.9"
    assert f"--judge-url http://127.0.0.1:{jp}" in (rec / "rubricstree.txt").read_text()


def test_eval_checkpoint_uses_training_budgets_and_passes_no_thinking(tmp_path, fake_gpu):
    """No --max-new-tokens by default (the CLI's training budgets: 16000 / 10000); --no-thinking
    reaches both evaluations; length adjustment (not comparable to published numbers) is opt-in."""
    bin_ = Path(fake_gpu["PATH"].split(":")[0])
    (bin_ / "vllm").write_text(FAKE_VLLM)
    (bin_ / "vllm").chmod(0o755)
    (bin_ / "rubricstree").write_text('#!/bin/sh\necho "$@" >> "$FAKE_RECORD/rubricstree.txt"\n')
    (bin_ / "rubricstree").chmod(0o755)
    rec = tmp_path / "rec"
    rec.mkdir()
    env = {**fake_gpu, "FAKE_RECORD": str(rec), "VLLM_PYTHON": str(bin_ / "python"),
           "RUBRICSTREE_BIN": str(bin_ / "rubricstree")}
    common = ("/ckpt/fv-8b", "--judge", "Qwen/Qwen3-32B", "--mcq", "mcq.jsonl", "--out", str(tmp_path / "out"))
    res = run("eval_checkpoint.sh", *common, "--policy-port", str(free_port()), "--judge-port", str(free_port()),
              cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    hb, mcq = (rec / "rubricstree.txt").read_text().splitlines()
    assert "--max-new-tokens" not in hb and "--length-adjust" not in hb and "--no-thinking" not in hb
    (rec / "rubricstree.txt").unlink()
    res = run("eval_checkpoint.sh", *common, "--no-thinking", "--policy-port", str(free_port()),
              "--judge-port", str(free_port()), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    hb, mcq = (rec / "rubricstree.txt").read_text().splitlines()
    assert "--no-thinking" in hb and "--no-thinking" in mcq
