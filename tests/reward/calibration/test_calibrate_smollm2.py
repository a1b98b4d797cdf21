"""A real instruct model as the judge: SmolLM2-135M-Instruct, calibrated in process and against the
real vLLM CPU server, comes out unfit with its rates, and the judge gate refuses it in a launcher
dry run. A tiny model's figures are wiring, not evidence about a good judge: these tests show that
calibration sees a bad judge for what it is, nothing more.

The cases are a subset of the bundled ones that carries critical failures (a missed heart attack,
a harmful recommendation) beside an instruction failure, so every figure the gate reads is measured.
The served model is also calibrated on two cases of the blind set's dev part (issue 44), with its
per-leaf coverage table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from rt_blind_calibration import calibrate_on_blind
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from reward.stress.cases import default_cases_path
from rubricstree import app

CASES = ("hd-mi-1", "sy-ii-1", "hs-2")
runner = CliRunner()


@pytest.fixture()
def subset(tmp_path):
    raw = yaml.safe_load(default_cases_path().read_text(encoding="utf-8"))
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump([c for c in raw if c["id"] in CASES], allow_unicode=True), encoding="utf-8")
    return path


def _calibrate(judge_args, cases, report, *, output: dict | None = None):
    res = runner.invoke(app, ["judge", "calibrate", *judge_args, "--cases", str(cases), "--json", "--check",
                              "--quiet", "--report", str(report)])
    assert res.exit_code == 3, res.output  # --check: the gate would refuse this judge
    if output is not None:
        output["text"] = res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def _unfit(rec):
    assert rec["verdict_items"] > 50 and rec["failed_items"] == 0
    assert rec["false_fail"]["*"]["rate"] is not None and rec["false_pass"]["*"]["rate"] is not None
    assert rec["false_pass"]["critical_all"]["n"] > 0  # the gate's figure is measured, not unknown
    assert rec["predicted"]["detection_rate"] < 0.90
    assert not rec["gate"]["ok"] and any("predicted detection" in p for p in rec["gate"]["problems"])


def test_smollm2_in_process_is_unfit(smollm2_dir, subset, tmp_path):
    rec = _calibrate(["--judge-model", str(smollm2_dir)], subset, tmp_path / "report")
    _unfit(rec)
    assert rec["judge_id"].startswith("hf:")
    assert (tmp_path / "report" / "report.md").read_text().startswith("# Judge calibration")


def test_smollm2_served_by_vllm_is_unfit_and_the_gate_refuses_it(smollm2_url, smollm2_dir, judge_url, subset,
                                                                  tmp_path):
    """SmolLM2 served by vLLM, calibrated with the tiny judge's vLLM server as a panel's second judge
    on the critical leaves (two real servers, issue 45): both grade the same items, their joint
    misreadings are measured and both calibrations are kept by identity."""
    out: dict = {}
    rec = _calibrate(["--judge-url", smollm2_url, "--panel-judge", judge_url, "--panel-leaves", "critical"], subset,
                     tmp_path / "report", output=out)
    _unfit(rec)
    assert rec["judge_id"].startswith("http:") and rec["stored"]  # kept for the launchers, by identity
    panel = json.loads((tmp_path / "report" / "panel.json").read_text())
    assert panel["judge_a"] == rec["judge_id"] and panel["judge_b"].startswith("http:")
    assert panel["judge_b"] != panel["judge_a"] and panel["leaves"] == "critical" and panel["joint"]["n"] > 0
    assert 0.0 <= panel["predicted"]["detection_rate"] <= 1.0 and "both misread the same item" in out["text"]
    second = json.loads((tmp_path / "report" / "calibration-second-judge.json").read_text())
    assert second["judge_id"] == panel["judge_b"] and second["verdict_items"] > 0
    # the launcher's dry run (stage 3, gate enforced) finds that record and refuses, naming both figures
    # and the override, before any model loads
    config = REPO_ROOT / "configs" / "smoke" / "stage3_clinical_rubric.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "training.trl_launcher", "--config", str(config), "--check-only",
         "--set", f"model={smollm2_dir}", "--set", f"judge.url={smollm2_url}", "--set", "judge.served_model=null",
         "--set", "judge_gate.enforce=true"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "predicted detection" in proc.stdout and "lower end is below min_detection 0.9" in proc.stdout
    assert "3 distinct labelled cases, fewer than min_cases 48" in proc.stdout  # a subset: too few cases to trust
    assert "judge_gate.enforce=false" in proc.stdout
    # not enforced: the same check says what it found and lets the launch go on
    proc = subprocess.run(
        [sys.executable, "-m", "training.trl_launcher", "--config", str(config), "--check-only",
         "--set", f"model={smollm2_dir}", "--set", f"judge.url={smollm2_url}", "--set", "judge.served_model=null",
         "--set", "judge_gate.enforce=false"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not enforced" in (proc.stdout + proc.stderr).lower()


def test_smollm2_served_calibrates_on_the_blind_set_with_a_per_leaf_coverage_table(smollm2_url, tmp_path):
    """Issue 44, part 3: SmolLM2 behind vLLM, calibrated on ``blind:dev`` (two cases; the whole part
    is the benchmark's), reports per leaf how many failing and passing items it had."""
    rec = calibrate_on_blind(["--judge-url", smollm2_url], tmp_path / "report")
    assert rec["verdict_items"] > 40 and rec["failed_items"] == 0
