"""scripts/train_verl.sh ends every stage with a Hugging Face export of verl's last actor checkpoint
(``<trainer.default_local_dir>/hf``, verl's model merger, training/verl_export.py), and refuses a
stage 2/3 start without the previous stage's checkpoint (or an explicit path), and a local start
folder that is no Hugging Face export. No GPU here: verl's trainer and merger are stood in for by
a PYTHON wrapper that records how they are called (their own CPU paths are not exercised here:
the trainer needs GPUs); everything else (the Hydra compose of the checkpoint folder, the export's
checks and rename) is real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("verl")
pytest.importorskip("hydra")

# stands in for python when called as -m verl.trainer.main_ppo / -m verl.model_merger; else the real one
WRAPPER = r'''#!/usr/bin/env bash
if [ "$1 $2" = "-m verl.trainer.main_ppo" ]; then
  printf '%s\n' "$@" >"$FAKE_RECORD/train.args"
  d=$FAKE_CKPT/global_step_7/actor; mkdir -p "$d"; echo '{}' >"$d/fsdp_config.json"
  echo 7 >"$FAKE_CKPT/latest_checkpointed_iteration.txt"; exit 0
fi
if [ "$1 $2" = "-m verl.model_merger" ]; then
  printf '%s\n' "$@" >"$FAKE_RECORD/merge.args"
  t=${@: -1}; mkdir -p "$t"; cp "$FAKE_TINY"/config.json "$FAKE_TINY"/model.safetensors "$t"/; exit 0
fi
exec "$REAL_PY" "$@"
'''


def run(*args: str, env: dict, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RUBRICSTREE_JUDGE", "FV_STAGE"))}
    base.update(env)
    return subprocess.run(["bash", str(REPO_ROOT / "scripts/train_verl.sh"), *args], cwd=cwd, env=base,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def fake_python(tmp_path, tiny_model_dir) -> dict:
    w = tmp_path / "python"
    w.write_text(WRAPPER)
    w.chmod(0o755)
    (tmp_path / "rec").mkdir()
    return {"PYTHON": str(w), "REAL_PY": sys.executable, "FAKE_RECORD": str(tmp_path / "rec"),
            "FAKE_TINY": str(tiny_model_dir), "RUBRICSTREE_ALLOW_NO_GPU": "1", "WANDB_MODE": "disabled"}


@pytest.mark.slow
def test_a_stage_ends_with_a_hugging_face_export_of_its_last_checkpoint(tmp_path, fake_python):
    ckpt = tmp_path / "ckpt" / "stage1"
    env = {**fake_python, "FAKE_CKPT": str(ckpt)}
    res = run("configs/verl/stage1_mcq.yaml", f"trainer.default_local_dir={ckpt}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    merge = (tmp_path / "rec" / "merge.args").read_text().split("\n")
    assert merge[:6] == ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir"]
    assert merge[6] == str(ckpt / "global_step_7" / "actor") and merge[8] == str(ckpt / "hf.tmp")
    assert (ckpt / "hf" / "config.json").is_file() and not (ckpt / "hf.tmp").exists()
    assert json.loads((ckpt / "hf" / "export.json").read_text())["step"] == 7
    # the next stage takes it (past the start checks, to the GPU check: no GPU here)
    env2 = {"PYTHON": sys.executable, "RUBRICSTREE_JUDGE_URL": "http://127.0.0.1:9/v1", "PATH": "/usr/bin:/bin"}
    nxt = run("configs/verl/stage2_error_rubric.yaml", f"actor_rollout_ref.model.path={ckpt / 'hf'}", env=env2)
    assert nxt.returncode == 2 and "no GPU found" in nxt.stderr and "config.json" not in nxt.stderr


@pytest.mark.parametrize("config, var", [("stage2_error_rubric", "FV_STAGE1_MODEL"),
                                         ("stage3_row_rubrics", "FV_STAGE2_MODEL"),
                                         ("stage3_clinical_rubric", "FV_STAGE2_MODEL")])
def test_stages_2_and_3_are_refused_without_the_previous_checkpoint(tmp_path, config, var):
    env = {"PYTHON": sys.executable, "RUBRICSTREE_JUDGE_URL": "http://127.0.0.1:9/v1"}
    res = run(f"configs/verl/{config}.yaml", env=env)
    assert res.returncode == 2 and "actor_rollout_ref.model.path=" in res.stderr and var in res.stderr
    raw = tmp_path / "global_step_3"  # a raw checkpoint folder is no Hugging Face export
    raw.mkdir()
    res = run(f"configs/verl/{config}.yaml", f"actor_rollout_ref.model.path={raw}", env=env)
    assert res.returncode == 2 and "no config.json" in res.stderr


def test_the_export_refuses_a_folder_without_a_checkpoint(tmp_path):
    from reward.errors import InputError
    from training.verl_export import export_latest

    with pytest.raises(InputError, match="latest_checkpointed_iteration"):
        export_latest(tmp_path)


@pytest.mark.slow
def test_a_rerun_from_a_new_start_model_is_refused_before_the_trainer_starts(tmp_path, fake_python, tiny_model_dir):
    """verl's resume_mode=auto would continue the first run's checkpoint and ignore the new start
    model (training/verl_preflight.py): the script stops before main_ppo, saying so."""
    ckpt = tmp_path / "ckpt" / "stage1"
    env = {**fake_python, "FAKE_CKPT": str(ckpt)}
    first = run("configs/verl/stage1_mcq.yaml", f"trainer.default_local_dir={ckpt}", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    (tmp_path / "rec" / "train.args").unlink()
    again = run("configs/verl/stage1_mcq.yaml", f"trainer.default_local_dir={ckpt}",
                f"actor_rollout_ref.model.path={tiny_model_dir}", env=env)
    assert again.returncode == 2
    assert "would continue the old run" in again.stderr and "preflight" in again.stderr
    assert not (tmp_path / "rec" / "train.args").exists()  # the trainer never started
    bad = run("configs/verl/stage1_mcq.yaml", f"trainer.default_local_dir={tmp_path / 'other'}", "trainer.save_freq=-1",
              env=env)
    assert bad.returncode == 2 and "trainer.save_freq" in bad.stderr
    assert not (tmp_path / "rec" / "train.args").exists()


@pytest.mark.parametrize("override, says", [((), True),
                                            (("+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
                                              "actor_rollout_ref.model.use_remove_padding=false"), False)])
def test_a_missing_flash_attn_is_said_before_the_trainer_starts(tmp_path, fake_python, override, says):
    """verl loads the actor with FlashAttention-2 by default and no install line of ours brings it:
    the script says so (and, on a GPU machine, stops) unless the command chooses another attention."""
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    ckpt = tmp_path / "ckpt"
    res = run("configs/verl/stage1_mcq.yaml", f"trainer.default_local_dir={ckpt}", *override,
              env={**fake_python, "FAKE_CKPT": str(ckpt)})
    assert res.returncode == 0, res.stderr[-3000:]  # RUBRICSTREE_ALLOW_NO_GPU=1: said, not stopped
    assert ("flash-attn is not installed" in res.stderr) is says
    if says:
        assert "flash-attn==2.8.3" in res.stderr and "attn_implementation=sdpa" in res.stderr
