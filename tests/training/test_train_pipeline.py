"""scripts/train_pipeline.sh on CPU with the smoke configs and the real judge server: filter ->
stage 1 -> stage 2 -> stage 3 with each stage starting from the previous stage's Hugging Face
export, the base-model filter sampling from a vLLM server the pipeline starts, checks and stops
(nothing left running or exported), a rerun that skips every finished step, and stage 2 refused
without a stage 1 export."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT, judge_venv_python

pytestmark = [pytest.mark.slow, pytest.mark.server]
REPO = REPO_ROOT


def _run(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RUBRICSTREE_RUN", "RUBRICSTREE_POLICY", "CUDA_VISIBLE", "PIPELINE_"))}
    return subprocess.run(["bash", str(REPO / "scripts/train_pipeline.sh")], cwd=REPO,
                          env={**base, "PYTHON": sys.executable, "PIPELINE_CONFIGS": "configs/smoke", **env},
                          capture_output=True, text=True, timeout=1200, check=False)


def _vllm_python() -> str | None:
    return judge_venv_python()


def test_pipeline_runs_the_stages_in_order_and_resumes(tmp_path, judge_url, tiny_model_dir):
    from training.hf_export import is_export

    env = {"RUBRICSTREE_RUN_ROOT": str(tmp_path / "fv"), "RUBRICSTREE_TINY_MODEL": str(tiny_model_dir),
           "RUBRICSTREE_JUDGE_URL": judge_url}
    vllm = _vllm_python()
    port = free_port()
    if vllm:  # serve the base model for the filter, as on a GPU machine
        # no graph compilation for the tiny policy (about two minutes of each CPU start; wiring only)
        env.update({"PIPELINE_SERVE": "1", "VLLM_PYTHON": vllm, "POLICY_PORT": str(port),
                    "POLICY_VLLM_ARGS": "--enforce-eager"})
    res = _run(env)
    assert res.returncode == 0, res.stderr[-3000:]
    root = tmp_path / "fv"
    s1, s2, s3 = ((root / f"{s}.done").read_text().strip()
                  for s in ("stage1_mcq", "stage2_error_rubric", "stage3_clinical_rubric"))
    assert s1 == str(root / "stage1_mcq" / "hf") and is_export(s1) and is_export(s2)
    assert s3 == str(root / "stage3_clinical_rubric" / "hf") and res.stdout.strip() == s3
    if vllm:
        assert f"serving {tiny_model_dir} for the filter" in res.stderr and "stopping the policy server" in res.stderr
        assert not (root / "policy.pid").exists() and (root / "policy-server.log").exists()
        with pytest.raises(OSError):  # nothing answers on the policy port any more
            import urllib.request

            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=3)
    # stage 2 trained from stage 1's checkpoint, stage 3 from stage 2's
    assert f"stage2_error_rubric starts from {s1}" in res.stderr
    assert f"stage3_clinical_rubric starts from {s2}" in res.stderr
    assert "ETA" in res.stderr
    again = _run(env)
    assert again.returncode == 0 and again.stderr.count("skipped") == 4 and again.stdout.strip() == s3


def test_stage2_is_refused_without_a_stage1_checkpoint(tmp_path, judge_url, tiny_model_dir):
    root = tmp_path / "fv"
    root.mkdir()
    (root / "filter.done").write_text("-")
    (root / "stage1_mcq.done").write_text("-")
    res = _run({"RUBRICSTREE_RUN_ROOT": str(root), "RUBRICSTREE_TINY_MODEL": str(tiny_model_dir),
                "RUBRICSTREE_JUDGE_URL": judge_url})
    assert res.returncode == 2 and "refusing" in res.stderr and "Hugging Face export" in res.stderr
