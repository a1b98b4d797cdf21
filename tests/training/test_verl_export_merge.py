"""A verl stage's Hugging Face export from a real verl checkpoint: verl 0.9.1's own
FSDPCheckpointManager saves the tiny Qwen3, sharded with FSDP2 on a one-process CPU (gloo) mesh
named as verl names it, exactly the ``global_step_N/actor`` layout its trainer writes; then
``python -m training.verl_export`` (what scripts/train_verl.sh runs at the end of a stage) merges it
with verl's model merger into ``<checkpoint dir>/hf``, which transformers loads. verl merges in
bf16: the weights equal the saved ones rounded to bf16, bit for bit. Not covered: a multi-rank
checkpoint written by a verl GPU training run (verl's trainer needs GPUs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("verl")

SAVE = r'''
import os, socket, sys, torch, torch.distributed as dist
with socket.socket() as s:  # a free port for the group's store (a fixed one fails when another job holds it)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo")
from omegaconf import OmegaConf
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
tiny, out = sys.argv[1], sys.argv[2]
model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
FSDPCheckpointManager(model, None, processing_class=AutoTokenizer.from_pretrained(tiny),
                      checkpoint_config=OmegaConf.create({"save_contents": ["model"], "load_contents": ["model"]})
                      ).save_checkpoint(out, global_step=3)
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_a_verl_fsdp_checkpoint_becomes_a_loadable_hugging_face_export(tmp_path, tiny_model_dir):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    ckpt = tmp_path / "checkpoints" / "stage1"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTHON", None)
    save = subprocess.run([sys.executable, "-c", SAVE, str(tiny_model_dir), str(ckpt / "global_step_3" / "actor")],
                          env=env, capture_output=True, text=True, timeout=240)
    assert save.returncode == 0, save.stderr[-3000:]
    (ckpt / "latest_checkpointed_iteration.txt").write_text("3")  # as verl's trainer writes it
    res = subprocess.run([sys.executable, "-m", "training.verl_export", str(ckpt)], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    hf = ckpt / "hf"
    assert res.stdout.strip().splitlines()[-1] == str(hf) and json.loads((hf / "export.json").read_text())["step"] == 3
    merged, saved = load_file(hf / "model.safetensors"), load_file(tiny_model_dir / "model.safetensors")
    assert merged.keys() == saved.keys()
    assert all(torch.equal(merged[k].float(), saved[k].to(torch.bfloat16).float()) for k in saved)
    model = AutoModelForCausalLM.from_pretrained(hf)  # what the next stage, eval and vllm serve load
    assert model.config.num_hidden_layers == len(model.model.layers)
