"""scripts/train_pipeline.sh on CPU with the smoke configs and the real judge server: filter ->
stage 1 -> stage 2 -> stage 3 with each stage starting from the previous stage's checkpoint, a
rerun that skips every finished step, and stage 2 refused without a stage 1 checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.server]
REPO = REPO_ROOT


def _run(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RUBRICSTREE_RUN", "CUDA_VISIBLE"))}
    return subprocess.run(["bash", str(REPO / "scripts/train_pipeline.sh")], cwd=REPO,
                          env={**base, "PYTHON": sys.executable, "PIPELINE_CONFIGS": "configs/smoke", **env},
                          capture_output=True, text=True, timeout=1200, check=False)


def test_pipeline_runs_the_stages_in_order_and_resumes(tmp_path, judge_url, tiny_model_dir):
    env = {"RUBRICSTREE_RUN_ROOT": str(tmp_path / "fv"), "RUBRICSTREE_TINY_MODEL": str(tiny_model_dir),
           "RUBRICSTREE_JUDGE_URL": judge_url}
    res = _run(env)
    assert res.returncode == 0, res.stderr[-3000:]
    root = tmp_path / "fv"
    s1, s2, s3 = ((root / f"{s}.done").read_text().strip()
                  for s in ("stage1_mcq", "stage2_error_rubric", "stage3_clinical_rubric"))
    assert s1.startswith(str(root / "stage1_mcq" / "checkpoint-"))
    assert s3.startswith(str(root / "stage3_clinical_rubric" / "checkpoint-")) and res.stdout.strip() == s3
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
    assert res.returncode == 2 and "refusing" in res.stderr
