"""The GPU stack a machine actually has, checked before anything starts (issue 38): the driver
``nvidia-smi`` reports against the CUDA build of torch, ``torch.cuda.is_available()``, and every
compiled module a run imports (vLLM's kernels and sleep-mode allocator, flash-attn, DeepSpeed).

A CPU machine plays a GPU one (tests/_support/rt_gpu.py): a stand-in ``nvidia-smi`` on PATH and
stand-in modules on PYTHONPATH that fail at import as the real wheels do (a CUDA 13 vLLM on a CUDA 12
driver: ``libnvrtc.so.13`` missing). Through ``scripts/train.sh`` and ``scripts/train_pipeline.sh``:
a refused stack starts no judge, no policy server and no trainer, and says which wheel or driver to
get. Also: MIG devices are not counted as GPUs, the pipeline checks the memory plan before it starts
a judge, and ``scripts/serve_judge.sh`` finds ``.venv/bin/vllm``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rt_gpu import gpu_machine, stand_in_modules, stand_in_nvidia_smi
from rt_paths import REPO_ROOT

from training.env_check import check_gpu, needs
from training.gpu_stack import Driver, cuda_of_driver, probe, read_driver

REPO = REPO_ROOT
NVRTC13 = "libnvrtc.so.13: cannot open shared object file: No such file or directory"


# ------------------------------------------------------------------ the pieces, in process
def test_the_driver_and_its_cuda_come_from_nvidia_smi(tmp_path, monkeypatch):
    stand_in_nvidia_smi(tmp_path / "bin", driver="550.54.15", cuda="12.4")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert read_driver() == Driver(version="550.54.15", cuda="12.4")
    assert cuda_of_driver("580.65.06") == "13" and cuda_of_driver("535.104.05") == "12"
    assert cuda_of_driver("470.57.02") == "11" and cuda_of_driver("440.33") is None
    monkeypatch.setenv("PATH", "/nonexistent")
    assert read_driver() is None


@pytest.fixture
def stack(monkeypatch):
    """(problems, notes) of a stand-in environment (the child interpreter imports the stand-ins)."""

    def run(tmp_path, driver: Driver, grpo: dict, sharding: str = "fsdp2", **modules):
        monkeypatch.setenv("PYTHONPATH", str(stand_in_modules(tmp_path / "site", **modules)))
        want = needs(grpo, sharding)
        return check_gpu(want, driver=driver, found=probe([m for n in want for m in n.modules]))

    return run


GRPO = {"use_vllm": True, "vllm_enable_sleep_mode": True}


def test_a_cuda13_torch_on_a_cuda12_driver_names_the_driver_and_the_cuda12_route(tmp_path, stack):
    problems, _ = stack(tmp_path, Driver("550.54.15", "12.4"), GRPO, cuda_available=False,
                         vllm_kernels_error=NVRTC13)
    assert "torch 2.11.0+cu130 is built for CUDA 13.0" in problems[0] and "driver >= 580.65.06" in problems[0]
    assert "CUDA 12 route" in problems[0]
    kernels = [p for p in problems if p.startswith("vllm._C")]
    assert kernels and "libnvrtc.so.13" in kernels[0] and "CUDA 13 libraries" in kernels[0]
    assert any(p.startswith("vllm.cumem_allocator (vLLM's sleep-mode allocator)") for p in problems)


def test_a_matching_stack_passes(tmp_path, stack):
    assert stack(tmp_path, Driver("580.65.06", "13.0"), GRPO, sharding="zero3") == ([], [])
    # CUDA 12.8 torch on a 12.4 driver: minor-version compatibility, a note and no refusal
    problems, notes = stack(tmp_path / "b", Driver("550.54.15", "12.4"), GRPO, torch="2.11.0+cu128",
                             torch_cuda="12.8")
    assert problems == [] and "minor-version compatibility" in notes[0]


def test_a_cpu_torch_or_no_cuda_device_is_refused(tmp_path, stack):
    problems, _ = stack(tmp_path, Driver("580.65.06", "13.0"), {}, torch="2.11.0+cpu", torch_cuda=None)
    assert "is a CPU build" in problems[0] and "pip install torch==2.11.0" in problems[0]
    problems, _ = stack(tmp_path / "b", Driver("580.65.06", "13.0"), {}, cuda_available=False)
    assert "torch.cuda.is_available() is False" in problems[0] and "driver on your system is too old" in problems[0]


def test_a_module_that_does_not_import_is_named_with_its_fix(tmp_path, stack):
    problems, _ = stack(tmp_path, Driver("580.65.06", "13.0"), {"model_init_kwargs": {
        "attn_implementation": "flash_attention_2"}}, flash_attn=None)
    assert len(problems) == 2 and problems[0].startswith("flash_attn does not import")
    assert "flash-attn==2.8.3" in problems[0] and "attn_implementation: sdpa" in problems[0]
    problems, _ = stack(tmp_path / "b", Driver("580.65.06", "13.0"), {}, sharding="zero3", deepspeed=None)
    assert problems[0].startswith("deepspeed does not import") and "TRAIN_SHARDING=fsdp2" in problems[0]


def test_an_interpreter_that_dies_on_an_import_still_names_the_module(tmp_path, monkeypatch):
    site = stand_in_modules(tmp_path / "site")
    (site / "vllm" / "_C.py").write_text("import os\nos._exit(139)\n")  # as a segfaulting extension ends
    monkeypatch.setenv("PYTHONPATH", str(site))
    found = probe(["vllm", "vllm._C", "vllm.cumem_allocator"])
    assert found.modules["vllm"] is None and found.crashed == "vllm._C"
    assert "exited with status 139 while importing it" in found.modules["vllm._C"]


# ------------------------------------------------------------------ through the launch scripts
def _run(script: str, env: dict, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_", "JUDGE_", "TRAIN_", "POLICY_", "CUDA_VISIBLE", "PIPELINE_",
                                 "VLLM_PYTHON"))}
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=REPO,
                          env={**base, "PYTHON": sys.executable, **env}, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _with_tools(tmp_path: Path, env: dict) -> dict:
    """An accelerate that records its arguments and a vllm that records its start and exits at once."""
    bin_ = Path(env["PATH"].split(":")[0])
    (bin_ / "accelerate").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/accelerate-args\n')
    (bin_ / "vllm").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/vllm-args\nexit 1\n')
    for f in ("accelerate", "vllm"):
        (bin_ / f).chmod(0o755)
    return {**env, "ACCELERATE": str(bin_ / "accelerate"), "VLLM_PYTHON": str(tmp_path / "no-venv" / "python")}


JUDGE = {"RUBRICSTREE_JUDGE_MODEL": "Qwen/Qwen3-32B", "JUDGE_CUDA_VISIBLE_DEVICES": "7",
         "TRAIN_CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6", "JUDGE_WAIT_S": "5"}
STAGE2 = ("configs/trl/stage2_error_rubric.yaml", "--set", "model=Qwen/Qwen3-8B")


def test_train_sh_refuses_a_cuda13_torch_on_an_old_driver_before_the_judge_starts(tmp_path):
    env = _with_tools(tmp_path, gpu_machine(tmp_path, driver="550.54.15", cuda="12.4", cuda_available=False,
                                            vllm_kernels_error=NVRTC13))
    res = _run("train.sh", {**env, **JUDGE}, *STAGE2)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "driver >= 580.65.06" in res.stderr and "CUDA 12 route" in res.stderr and "nothing was started" in res.stderr
    assert "starting a judge server" not in res.stderr
    assert not (tmp_path / "vllm-args").exists() and not (tmp_path / "accelerate-args").exists()
    # the same machine with a CUDA 13 driver gets past the check and starts the judge
    good = _with_tools(tmp_path / "good", gpu_machine(tmp_path / "good"))
    res = _run("train.sh", {**good, **JUDGE, "JUDGE_LOG": str(tmp_path / "judge.log")}, *STAGE2)
    assert "starting a judge server" in res.stderr and (tmp_path / "good" / "vllm-args").exists(), res.stderr[-3000:]


@pytest.mark.parametrize("modules, sets, says", [
    ({"flash_attn": None}, ["--set", "grpo.model_init_kwargs={dtype: float32, attn_implementation: flash_attention_2}"],
     'flash-attn is not installed, and grpo.model_init_kwargs.attn_implementation: flash_attention_2 needs it'),
    ({"deepspeed": None}, [], "deepspeed is not installed, and TRAIN_SHARDING=zero3 needs it"),
    ({"torch": "2.11.0+cu128", "torch_cuda": "12.8", "vllm_kernels_error": NVRTC13}, [],
     "vllm._C (vLLM's compiled kernels) does not import"),
])
def test_a_missing_or_unloadable_module_stops_train_sh_before_the_judge(tmp_path, modules, sets, says):
    env = _with_tools(tmp_path, gpu_machine(tmp_path, driver="560.35.03", cuda="12.6", **modules)
                      if "torch_cuda" in modules else gpu_machine(tmp_path, **modules))
    res = _run("train.sh", {**env, **JUDGE, "TRAIN_SHARDING": "zero3"}, *STAGE2, *sets)
    assert res.returncode == 2 and says in res.stderr, res.stderr[-3000:]
    assert "starting a judge server" not in res.stderr and not (tmp_path / "vllm-args").exists()


def test_mig_devices_are_not_counted_as_gpus(tmp_path):
    env = _with_tools(tmp_path, gpu_machine(tmp_path, gpus=2, mig=3))
    res = _run("train.sh", {**env, "TRAIN_FORCE": "1"}, "configs/trl/stage1_mcq.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "--num_processes 2 " in (tmp_path / "accelerate-args").read_text()


def _stage1_done(root: Path) -> None:
    """A finished filter and stage 1 whose export has Qwen3-8B's architecture (no weights needed)."""
    from training.model_dims import QWEN3

    d = QWEN3["qwen3-8b"]
    export = root / "stage1_mcq" / "hf"
    export.mkdir(parents=True)
    (export / "config.json").write_text(json.dumps({
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim, "intermediate_size": d.intermediate,
        "vocab_size": d.vocab, "tie_word_embeddings": d.tied_embeddings}))
    (export / "model.safetensors").write_bytes(b"")
    (root / "filter.done").write_text("-\n")
    (root / "stage1_mcq.done").write_text(f"{export}\n")


def test_the_pipeline_refuses_a_broken_stack_before_any_server(tmp_path):
    env = _with_tools(tmp_path, gpu_machine(tmp_path, driver="550.54.15", cuda="12.4"))
    res = _run("train_pipeline.sh", {**env, **JUDGE, "RUBRICSTREE_RUN_ROOT": str(tmp_path / "fv")})
    assert res.returncode == 2 and "driver >= 580.65.06" in res.stderr and "nothing was started" in res.stderr
    assert "serving" not in res.stderr and not (tmp_path / "vllm-args").exists()
    assert not (tmp_path / "fv" / "filter.done").exists()


def test_the_pipeline_checks_the_memory_plan_before_it_starts_the_judge(tmp_path):
    env = _with_tools(tmp_path, gpu_machine(tmp_path, mib=24576))  # 24 GiB GPUs: Qwen3-8B does not fit
    root = tmp_path / "fv"
    _stage1_done(root)
    res = _run("train_pipeline.sh", {**env, **JUDGE, "RUBRICSTREE_RUN_ROOT": str(root)})
    assert res.returncode == 3 and "fits: False" in res.stderr and "memory plan above does not fit" in res.stderr
    assert "starting the judge server" not in res.stderr and not (tmp_path / "vllm-args").exists()
    res = _run("train_pipeline.sh", {**env, **JUDGE, "RUBRICSTREE_RUN_ROOT": str(root), "TRAIN_FORCE": "1"})
    assert "TRAIN_FORCE=1" in res.stderr and "starting the judge server" in res.stderr, res.stderr[-3000:]


FAKE_VLLM = r'''#!/usr/bin/env python3
"""Stands in for `vllm serve MODEL --served-model-name N --host H --port P ...`: records, answers /v1/models."""
import http.server, json, os, sys
args = sys.argv[1:]
open(os.environ["FAKE_RECORD"], "w").write(json.dumps({"exe": sys.argv[0], "args": args}))
name, port = args[args.index("--served-model-name") + 1], int(args[args.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(json.dumps({"data": [{"id": name}]}).encode())
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def test_serve_judge_finds_the_gpu_extras_vllm_in_dot_venv(tmp_path):
    """No VLLM_PYTHON and no .venv-judge: the `vllm` of the project's .venv (the gpu extra), not PATH's."""
    import socket

    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "serve_judge.sh", repo / "scripts" / "serve_judge.sh")
    vbin = repo / ".venv" / "bin"
    vbin.mkdir(parents=True)
    (vbin / "vllm").write_text(FAKE_VLLM.replace("/usr/bin/env python3", sys.executable))
    (vbin / "vllm").chmod(0o755)
    stand_in_nvidia_smi(tmp_path / "bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_PYTHON", "CUDA_VISIBLE"))}
    env = {**base, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "FAKE_RECORD": str(tmp_path / "rec.json")}
    pid = tmp_path / "pid"
    res = subprocess.run(["bash", str(repo / "scripts" / "serve_judge.sh"), "--model", "Qwen/Qwen3-32B", "--port",
                          str(port), "--pid-file", str(pid), "--log", str(tmp_path / "log")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    try:
        assert res.returncode == 0, res.stderr
        rec = json.loads((tmp_path / "rec.json").read_text())
        assert rec["exe"] == str(vbin / "vllm") and rec["args"][:2] == ["serve", "Qwen/Qwen3-32B"]
    finally:
        subprocess.run(["bash", str(repo / "scripts" / "serve_judge.sh"), "--stop", "--pid-file", str(pid)],
                       env=env, capture_output=True, timeout=60, check=False)


def test_verl_needs_vllm_with_its_allocator_and_flash_attn_unless_told_otherwise():
    """train_verl.sh asks `env_check --verl [--flash-attn] [--gpu]`: verl frees the rollout's memory
    with vLLM's sleep-mode allocator and loads the actor with FlashAttention-2 by default."""
    got = {n.package: n for n in needs({}, "none", verl=True, flash_attn=True)}
    assert set(got) == {"vllm", "flash-attn"}
    assert got["vllm"].modules == ("vllm", "vllm._C", "vllm.cumem_allocator")
    assert got["flash-attn"].modules == ("flash_attn", "flash_attn_2_cuda")
    assert "attn_implementation=sdpa" in got["flash-attn"].fix
    assert {n.package for n in needs({}, "zero3", verl=True)} == {"vllm"}


def test_env_check_takes_the_debug_that_train_sh_passes_on(tmp_path, capsys):
    """scripts/train.sh passes its whole line (a --debug too) to training.env_check."""
    from reward.errors import InputError
    from training.env_check import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("stage: clinical_rubric\n", encoding="utf-8")
    assert main(["--config", str(bad)]) == 2 and "bad.yaml" in capsys.readouterr().err
    with pytest.raises(InputError, match="bad.yaml"):
        main(["--config", str(bad), "--debug"])
