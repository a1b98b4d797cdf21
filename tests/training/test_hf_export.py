"""Hugging Face exports of the trained policy (training/hf_export.py): a two-process FSDP2 run of
the tiny Qwen3 on CPU (gloo) exports its full state dict, which reloads to the weights the
processes held; without per-micro-batch sync FSDP2 keeps unsharded gradients between
micro-batches, with it none; a tied model exports in bf16; a TRL stage ends with an export that
the next stage's config loads; the launcher sets FSDP2's gradient reduction dtype."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = REPO_ROOT
WORKER = REPO / "tests" / "_support" / "rt_fsdp2_worker.py"


def _torchrun(model: Path, out: Path, report: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(free_port()), str(WORKER), str(model), str(out), str(report), *args]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(report.read_text())


@pytest.mark.slow
def test_fsdp2_two_process_export_reloads_to_the_trained_weights(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from training.hf_export import is_export

    out = tmp_path / "hf"
    rep = _torchrun(tiny_model_dir, out, tmp_path / "each.json", "--reduce", "float32", "--sync", "each")
    assert rep["world"] == 2 and is_export(out)
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    base_params = dict(base.named_parameters())
    moved = 0
    for name, t in ((n, p.detach()) for n, p in loaded.named_parameters()):
        want_sum, want_abs = rep["params"][name]
        assert float(t.double().sum()) == pytest.approx(want_sum, rel=1e-6, abs=1e-6), name
        assert float(t.double().abs().sum()) == pytest.approx(want_abs, rel=1e-6), name
        moved += int(not torch.equal(t, base_params[name]))
    assert moved == len(rep["params"])  # every tensor trained: the export is not the base model
    AutoTokenizer.from_pretrained(out)
    GenerationConfig.from_pretrained(out)
    # with per-micro-batch sync the gradients are reduce-scattered at once and stay sharded (fp32)
    assert rep["unsharded_grad_bytes_between_micro_batches"] == 0 and rep["grad_dtypes"] == ["torch.float32"]


@pytest.mark.slow
def test_fsdp2_accumulation_without_sync_holds_every_unsharded_gradient(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    rep = _torchrun(tiny_model_dir, tmp_path / "hf", tmp_path / "last.json", "--reduce", "bfloat16",
                    "--sync", "last")
    n = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).parameters())
    # the whole model's gradient, unsharded, on each rank between micro-batches (>= 2 bytes a parameter)
    assert rep["unsharded_grad_bytes_between_micro_batches"] >= 2 * n


@pytest.mark.slow
def test_bf16_export_of_a_tied_model_reloads_tied_and_rounded(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from training.hf_export import full_state_dict, save_hf

    cfg = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    sd = full_state_dict(None, model)
    save_hf(model, sd, tmp_path / "hf", dtype="bfloat16")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["dtype"] == "bfloat16"
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert back.dtype == torch.bfloat16
    assert back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr()
    for name, t in back.named_parameters():
        assert torch.equal(t, dict(model.named_parameters())[name].to(torch.bfloat16)), name
    with pytest.raises(ValueError, match="export dtype"):
        save_hf(model, sd, tmp_path / "x", dtype="int8")


class _LengthReward:
    """A judge-free stand-in reward (the share of a 10-character budget used)."""

    __name__ = "error_rubric"

    def __call__(self, prompts, completions, completion_ids=None, **kw):
        from reward.stages.rollout_text import completion_text

        return [min(1.0, len(completion_text(c)) / 10) for c in completions]


@pytest.mark.slow
def test_stage1_ends_with_an_export_that_stage2_starts_from(tiny_model_dir, tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    import training.trl_launcher as tl
    from training.hf_export import is_export

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.chdir(REPO)
    s1 = tmp_path / "stage1"
    tl.train(tl.load_config(REPO / "configs/smoke/stage1_mcq.yaml", [f"output_dir={s1}", "grpo.max_steps=2"]))
    export = s1 / "hf"
    assert is_export(export)
    assert json.loads((export / "export.json").read_text())["global_step"] == 2
    # the export holds the weights the trainer ended with (its own step-2 save on one CPU process)
    ours, theirs = load_file(export / "model.safetensors"), load_file(s1 / "checkpoint-2" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    base = load_file(tiny_model_dir / "model.safetensors")
    assert any(not torch.equal(ours[k], base[k].to(ours[k].dtype)) for k in ours)  # trained, not the base

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")  # never called: the stand-in reward
    monkeypatch.setattr(tl, "build_reward_funcs", lambda cfg: [_LengthReward()])
    monkeypatch.setattr(tl, "check_judge", lambda cfg: None)  # the stand-in needs no judge
    s2 = tmp_path / "stage2"
    res = tl.train(tl.load_config(REPO / "configs/smoke/stage2_error_rubric.yaml",
                                  [f"output_dir={s2}", f"model={export}", "grpo.max_steps=1"]))
    assert res.global_step == 1 and is_export(s2 / "hf")
    assert json.loads((s2 / "hf" / "export.json").read_text())["started_from"] == str(export)


def test_the_launcher_sets_fsdp2_reduction_in_fp32():
    pytest.importorskip("accelerate")
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    from training.trl_trainer_utils import apply_fsdp_options

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2)
    plugin.set_mixed_precision("bf16")  # what accelerate does for mixed_precision: bf16
    assert plugin.mixed_precision_policy.reduce_dtype == torch.bfloat16
    assert apply_fsdp_options(plugin, "float32")
    assert plugin.mixed_precision_policy.reduce_dtype == torch.float32
    assert plugin.mixed_precision_policy.param_dtype == torch.bfloat16
    assert not apply_fsdp_options(None, "float32") and not apply_fsdp_options(plugin, None)
