"""``--baseline`` refuses a baseline graded by another grader (review of issue 24): the
difference would mix the policy's change with the grader's. The refusal comes before any
generation, names both graders, and exits 2 on the command line (checked against the real vLLM
judge server: its identity is what the server reports, not the name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_fakes import FakeJudge
from rt_paths import TESTS_DIR
from typer.testing import CliRunner

from reward.errors import InputError
from rubricstree import app
from training.eval.healthbench import HealthBenchEvalConfig, run_healthbench
from training.generation import GenerationSettings, GenOutput

FIXTURE = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"


class FakeGenerator:
    backend = "fake"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, requests, on_done, desc="generate") -> None:
        for r in requests:
            self.calls.append(r.key)
            on_done(r.key, GenOutput(f"answer to {r.key}", "stop", 5))


def cfg(out: Path, **kw) -> HealthBenchEvalConfig:
    return HealthBenchEvalConfig(model="fake-model", data=str(FIXTURE), out=out,
                                 judge={"model": "fake-judge", "mode": "choice"},
                                 generation=GenerationSettings(max_new_tokens=16), n_bootstrap=100, **kw)


def _judge(model_id: str = "fake") -> FakeJudge:
    j = FakeJudge(lambda t, it: 1.0 if len(it.criterion) % 2 else 0.0, cache=None)
    j.model_id = model_id
    return j


def test_same_grader_baseline_is_accepted(tmp_path):
    run_healthbench(cfg(tmp_path / "base"), generator=FakeGenerator(), judge=_judge())
    m = run_healthbench(cfg(tmp_path / "ours", baseline=str(tmp_path / "base")), generator=FakeGenerator(),
                        judge=_judge())
    assert m["baseline"]["n_common"] == m["n_scored"]


def test_baseline_of_another_grader_is_refused_naming_both(tmp_path):
    run_healthbench(cfg(tmp_path / "base"), generator=FakeGenerator(), judge=_judge("judge-A"))
    gen = FakeGenerator()
    with pytest.raises(InputError) as err:
        run_healthbench(cfg(tmp_path / "ours", baseline=str(tmp_path / "base")), generator=gen,
                        judge=_judge("judge-B"))
    msg = str(err.value)
    assert "'judge-A'" in msg and "'judge-B'" in msg and "judge identity" in msg and "--baseline" in msg
    assert gen.calls == [] and not (tmp_path / "ours").exists()  # refused before any work


def test_baseline_with_other_grading_settings_is_refused(tmp_path):
    run_healthbench(cfg(tmp_path / "base"), generator=FakeGenerator(), judge=_judge())
    cfg_base = json.loads((tmp_path / "base" / "config.json").read_text())
    cfg_base["grading"]["template_sha256"] = "0" * 64  # as if graded under another template
    (tmp_path / "base" / "config.json").write_text(json.dumps(cfg_base))
    with pytest.raises(InputError, match="template_sha256"):
        run_healthbench(cfg(tmp_path / "ours", baseline=str(tmp_path / "base")), generator=FakeGenerator(),
                        judge=_judge())


def test_a_folder_without_settings_is_not_a_baseline(tmp_path):
    (tmp_path / "base").mkdir()
    with pytest.raises(InputError, match="no config.json"):
        run_healthbench(cfg(tmp_path / "ours", baseline=str(tmp_path / "base")), generator=FakeGenerator(),
                        judge=_judge())


def test_cli_refuses_a_baseline_of_another_grader_against_the_real_server(tmp_path, judge_url, tiny_model_dir):
    run_healthbench(cfg(tmp_path / "base"), generator=FakeGenerator(), judge=_judge("judge-A"))
    res = CliRunner().invoke(app, [
        "eval", "healthbench", "--model", str(tiny_model_dir), "--data", str(FIXTURE), "--out", str(tmp_path / "ours"),
        "--judge-url", judge_url, "--served-model", "tiny", "--baseline", str(tmp_path / "base"),
        "--max-new-tokens", "4", "--no-thinking", "--limit", "1"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "'judge-A'" in out and "'tiny' (http at" in out and "vllm=" in out  # the server's identity, named
    assert not (tmp_path / "ours").exists()
