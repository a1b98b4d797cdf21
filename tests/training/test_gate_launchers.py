"""One judge gate for every launcher, and an override that is written down.

- verl: the gate runs whenever the run may grade rubric verdicts, whatever keys its reward settings
  carry (before, a stage-3 reward without ``judge_gate`` and ``rubric_source`` skipped it); its data
  sources decide when they can be read here;
- ``scripts/train.sh``: a refused judge stops the launch before the environment check, the memory
  plan, any server or accelerate (on a stand-in GPU machine);
- ``scripts/train_pipeline.sh``: stage 3's judge is gated before stage 1;
- TRL's launcher: the outcome is returned for the run to record;
- the override (``judge_gate.enforce: false``) goes into the run's ``judge_gate.json`` (TRL's
  ``output_dir``, verl's checkpoint folder) and from there into the export's model card, not only
  into a log line.

The judge is the vLLM-shaped stub (rt_vllm_stub) through the chat backend; no model is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rt_paths import REPO_ROOT
from rt_vllm_stub import VLLMStub

from reward.errors import InputError
from training.gate_record import RECORD, gate_history

REPO = REPO_ROOT
KW = "reward.custom_reward_function.reward_kwargs"
VERL3 = str(REPO / "configs" / "verl" / "stage3_clinical_rubric.yaml")
VERL2 = str(REPO / "configs" / "verl" / "stage2_error_rubric.yaml")
SMOKE = REPO / "configs" / "smoke"


def _model(folder: Path) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    save_file({"w": np.zeros(64, dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def stub(tmp_path):
    with VLLMStub(root=str(_model(tmp_path / "judge"))) as srv:
        yield srv


# ------------------------------------------------------------------ verl
def _verl(capsys, config, ckpt, *extra):
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    from training.verl_preflight import main

    rc = main([config, f"trainer.default_local_dir={ckpt}", "actor_rollout_ref.model.path=Qwen/Qwen3-8B",
               f"+{KW}.judge.api=chat", *extra])
    return rc, capsys.readouterr().err


def _parquet(path: Path, sources: list[str]) -> Path:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    # each row carries its rubric items (reward_model.ground_truth), which the preflight asks of clinical rows
    pd.DataFrame({"data_source": sources, "prompt": ["p"] * len(sources),
                  "reward_model": [{"ground_truth": '[{"criterion": "c", "points": 1}]'}] * len(sources)}).to_parquet(path)
    return path


def test_verl_gates_a_stage3_reward_without_judge_gate_or_rubric_source(tmp_path, capsys, stub, monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", stub.url)
    rc, err = _verl(capsys, VERL3, tmp_path / "ckpt", f"~{KW}.judge_gate", f"~{KW}.rubric_source")
    assert rc == 2 and "judge gate: no calibration of the judge" in err, err
    assert not (tmp_path / "ckpt" / RECORD).exists()
    # no stage-3 key at all, only a judge: its data's sources say it grades rubric verdicts
    bare = [f"~{KW}.{k}" for k in ("judge_gate", "rubric_source", "scoring", "combine", "router", "clip_below_zero",
                                   "grade", "format_failure_score")]
    train = _parquet(tmp_path / "data" / "train.parquet", ["clinical_rubric", "clinical_rubric"])
    val = _parquet(tmp_path / "data" / "val.parquet", ["clinical_rubric"])
    rc, err = _verl(capsys, VERL3, tmp_path / "ckpt2", *bare, f"data.train_files={train}", f"data.val_files={val}")
    assert rc == 2 and "judge gate: no calibration" in err, err
    # stage 2's data (error lists, not verdicts) is not gated, whatever the settings say
    train2 = _parquet(tmp_path / "data2" / "train.parquet", ["error_rubric"])
    rc, err = _verl(capsys, VERL2, tmp_path / "ckpt3", f"data.train_files={train2}", f"data.val_files={train2}",
                    f"+{KW}.judge_gate.enforce=true")
    assert rc == 0, err


def test_verl_records_the_override_and_the_export_card_says_it(tmp_path, capsys, stub, monkeypatch):
    import subprocess as sp

    from training.verl_export import export_latest

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", stub.url)
    ckpt = tmp_path / "ckpt"
    rc, err = _verl(capsys, VERL3, ckpt, f"{KW}.judge_gate.enforce=false")
    assert rc == 0, err
    [entry] = gate_history(ckpt)
    assert entry["overridden"] and not entry["passed"] and "no calibration of the judge" in entry["line"]
    assert entry["judge_id"].startswith("chat:127.0.0.1")
    # the stage ends: verl's checkpoint merged into <ckpt>/hf (the merger stood in for)
    actor = ckpt / "global_step_2" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text("{}")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")

    def merger(cmd, **kw):
        _model(Path(cmd[-1]))
        return sp.CompletedProcess(cmd, 0)

    out = export_latest(ckpt, run=merger)
    card = (out / "README.md").read_text()
    assert "Trained past the judge gate" in card and "no calibration of the judge" in card
    assert json.loads((out / "export.json").read_text())["judge_gate"][0]["overridden"]


# ------------------------------------------------------------------ TRL
def _trl_cfg(stub_url: str, *sets: str):
    from training.trl_config import load_config

    return load_config(SMOKE / "stage3_clinical_rubric.yaml", [f"judge.url={stub_url}", "judge.api=chat", *sets])


def test_trl_refuses_and_returns_the_override_for_the_run(tmp_path, stub, monkeypatch):
    from training.launch_checks import check_judge

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(_model(tmp_path / "policy")))
    with pytest.raises(InputError, match="judge gate: no calibration") as exc:
        check_judge(_trl_cfg(stub.url, "judge_gate.enforce=true"))
    assert exc.value.field == "judge_gate.enforce"
    outcome = check_judge(_trl_cfg(stub.url))  # the smoke config's override
    assert outcome["overridden"] and "NOT ENFORCED" in outcome["line"] and "recorded in the run" in outcome["line"]


def test_trl_training_records_the_gate_and_its_export_card_says_it(tmp_path, monkeypatch):
    import training.trl_launcher as tl
    from training.hf_export import save_hf

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(_model(tmp_path / "policy")))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")  # never asked: check_judge is stood in for
    said = {"at": "2026-01-01T00:00:00+00:00", "judge_id": "http:j", "passed": False, "enforced": False,
            "overridden": True, "problems": ["p"], "line": "judge gate: p (NOT ENFORCED: ...)"}
    monkeypatch.setattr(tl, "check_judge", lambda cfg: said)

    def stop(cfg):
        raise RuntimeError("stop before any model")

    monkeypatch.setattr(tl, "build_reward_funcs", stop)
    with pytest.raises(RuntimeError, match="stop before any model"):
        tl.train(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml"))
    assert gate_history(tmp_path / "run") == [said]

    class Model:  # what save_hf asks of a model
        generation_config = None

        def save_pretrained(self, folder, **kw):
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / "config.json").write_text("{}")

    out = save_hf(Model(), {}, tmp_path / "hf", dtype="float32",
                  meta={"stage": "clinical_rubric", "judge_gate": gate_history(tmp_path / "run")})
    card = (out / "README.md").read_text()
    assert card.index("Trained past the judge gate") < card.index("| stage | clinical_rubric |")
    assert "judge gate: p (NOT ENFORCED" in card
    passed = {**said, "passed": True, "overridden": False, "line": "judge gate: passed (x)"}
    clean = save_hf(Model(), {}, tmp_path / "hf2", dtype="float32", meta={"judge_gate": [passed]})
    assert "Trained past" not in (clean / "README.md").read_text()


# ------------------------------------------------------------------ the scripts
def _script(script: str, env: dict, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_", "JUDGE_", "TRAIN_", "CUDA_VISIBLE", "PIPELINE_", "FV_"))}
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=REPO,
                          env={**base, "PYTHON": sys.executable, **env}, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_train_sh_refuses_before_anything_starts(tmp_path, stub):
    """On a (stand-in) GPU machine: before, train.sh went on to the plan and accelerate, the gate
    being the trainer's business; now nothing starts."""
    from rt_gpu import gpu_machine

    acc = tmp_path / "accelerate"
    acc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/accelerate-args\n')
    acc.chmod(0o755)
    env = {**gpu_machine(tmp_path, gpus=8, mib=81559), "ACCELERATE": str(acc),
           "RUBRICSTREE_JUDGE_URL": stub.url, "RUBRICSTREE_CACHE_DIR": str(tmp_path / "cache"),
           "JUDGE_CUDA_VISIBLE_DEVICES": "7"}
    res = _script("train.sh", env, "configs/trl/stage3_clinical_rubric.yaml", "--set", "model=Qwen/Qwen3-8B",
                  "--set", "judge.api=chat")
    assert res.returncode == 2, res.stderr[-3000:]
    assert "judge gate: no calibration of the judge" in res.stderr and "the judge gate refused this launch" in res.stderr
    assert not (tmp_path / "accelerate-args").exists() and "fits:" not in res.stderr


def test_the_pipeline_gates_stage3_before_stage1(tmp_path, stub):
    root = tmp_path / "fv"
    env = {"RUBRICSTREE_RUN_ROOT": str(root), "RUBRICSTREE_TINY_MODEL": str(_model(tmp_path / "policy")),
           "RUBRICSTREE_JUDGE_URL": stub.url, "RUBRICSTREE_CACHE_DIR": str(tmp_path / "cache"),
           "PIPELINE_CONFIGS": "configs/smoke", "PIPELINE_SERVE": "0"}
    res = _script("train_pipeline.sh", env, "--set", "judge.api=chat", "--set", "judge_gate.enforce=true")
    assert res.returncode == 2, res.stderr[-3000:]
    assert "judge gate: no calibration of the judge" in res.stderr and "refuses stage 3's judge" in res.stderr
    assert not (root / "filter.done").exists() and not (root / "stage1_mcq").exists()


def test_gpu_check_trains_through_the_launchers_checks(tmp_path, monkeypatch):
    """scripts/gpu_check.sh's train phase trains stage 1 (no judge) through the TRL launcher's
    ``train``, whose launch checks hold the gate: it has no way to train a stage past it."""
    import training.trl_launcher as tl
    from benchmarks.gpu_check import train_phase

    asked = []
    monkeypatch.setattr(tl, "check_judge", lambda cfg: asked.append(cfg.stage))

    def stop(cfg):
        raise RuntimeError("stop before any model")

    monkeypatch.setattr(tl, "build_reward_funcs", stop)
    with pytest.raises(RuntimeError, match="stop before any model"):
        train_phase(str(tmp_path / "policy"), tmp_path / "run", True)
    assert asked == ["mcq"]
