"""``rubricstree optimize`` against the real vLLM CPU server (policy and optimisation judge both
the served tiny model), with a held-out report judge of other random weights in process; and a
SIGKILL mid-run on a subprocess, then a rerun that does each row exactly once. Wiring only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_optimize import (
    check_outputs,
    lines,
    prompts_file,
    run_all_four,
    taxonomy_file,
)
from rt_paths import REPO_ROOT

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def other_judge(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    from training.tiny_model import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("heldout-judge"), seed=7)


@pytest.mark.slow
def test_all_four_commands_against_the_server(judge_url, other_judge, tmp_path):
    policy = ["--generate-url", judge_url, "--model", "tiny"]
    result = run_all_four(tmp_path, policy, ["--judge-url", judge_url], ["--judge-model", str(other_judge)])
    check_outputs(tmp_path, result)
    assert not result["report"]["warnings"] and result["report"]["judge"].startswith("hf:")


def test_same_weights_under_another_url_count_as_the_same_judge(judge_url, tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from rubricstree import app

    base = tmp_path / "base.jsonl"
    base.write_text('{"id": "evalown-001", "completion": "go to hospital"}\n')
    Path(str(base) + ".settings.json").write_text(f'{{"judge": "hf:{tiny_model_dir}:float32"}}')
    res = CliRunner().invoke(app, ["optimize", "report", "--data", str(prompts_file(tmp_path, 1)),
                                   "--out", str(tmp_path / "rep"), "--method", f"a={base}", "--method", f"b={base}",
                                   "--judge-url", judge_url])
    assert res.exit_code == 2 and "same judge" in res.output


def _cli(judge_url: str, *args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("RUBRICSTREE_EVAL_CRASH_AFTER", None)
    if crash:
        env["RUBRICSTREE_EVAL_CRASH_AFTER"] = crash
    return subprocess.run([sys.executable, "-m", "rubricstree", "optimize", *args], env=env, capture_output=True,
                          check=False, text=True, timeout=600)


# command -> (the record kind the kill lands after, the kinds that must hold each key exactly once)
KILLS = {"handbook": ("handbook:2:kill", ("handbook",)),
         "best-of-n": ("scored:2:kill", ("samples", "scored")),
         "revise": ("round:5:kill", ("round", "revision", "best")),
         "report": ("graded:3:kill", ("graded",))}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(KILLS))
def test_sigkill_mid_run_then_rerun_does_each_row_once(command, judge_url, other_judge, tmp_path):
    prompts, tax = prompts_file(tmp_path, 4), taxonomy_file(tmp_path)
    judge = ["--taxonomy", str(tax), "--judge-url", judge_url]
    policy = ["--generate-url", judge_url, "--model", "tiny", "--max-new-tokens", "12", "--generate-concurrency", "1"]
    base = tmp_path / "base" / "samples.jsonl"
    if command in ("revise", "report"):
        assert _cli(judge_url, "best-of-n", "--prompts", str(prompts), "--n", "1", "--temperature", "0",
                    "--out", str(base.parent), *judge, *policy).returncode == 0
    out = tmp_path / "out"
    args = {"handbook": ["handbook", "--prompts", str(prompts), "--out", str(out), *judge, "--concurrency", "1"],
            "best-of-n": ["best-of-n", "--prompts", str(prompts), "--n", "2", "--out", str(out), *judge, *policy],
            "revise": ["revise", "--rollouts", str(base), "--rounds", "2", "--out", str(out), *judge, *policy],
            "report": ["report", "--data", str(prompts), "--out", str(out), "--method", f"a={base}",
                       "--method", f"b={base}", "--judge-model", str(other_judge)]}[command]
    log = out / {"handbook": "handbook.jsonl", "best-of-n": "samples.jsonl", "revise": "rounds.jsonl",
                 "report": "graded.jsonl"}[command]
    crash, kinds = KILLS[command]
    proc = _cli(judge_url, *args, crash=crash)
    assert proc.returncode == -9, proc.stderr[-2000:]  # killed, not exited
    first = lines(log)
    proc = _cli(judge_url, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = lines(log)
    assert recs[:len(first)] == first  # appended, never rewritten
    for kind in kinds:
        keys = [(r.get("method"), r["id"], r.get("round")) for r in recs if r.get("kind", "graded") == kind]
        assert keys and len(keys) == len(set(keys)), kind  # each row exactly once
    if command == "best-of-n":
        assert sum(r["kind"] == "scored" for r in recs) == 4
    if command == "report":
        assert len(recs) == 8
