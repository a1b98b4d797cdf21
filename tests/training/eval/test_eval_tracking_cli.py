"""Optional wandb logging (never needs wandb or a network) and the eval command's input errors."""

from __future__ import annotations

import importlib.machinery
import shutil
import sys
import types

from rt_paths import TESTS_DIR
from typer.testing import CliRunner

import reward.healthbench.variants as variants
from rubricstree import app
from training.eval.tracking import flat_metrics, log_to_wandb

OWN = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"
METRICS = {"benchmark": "healthbench", "model": "m", "score": 0.25, "bootstrap_std": 0.01, "n_samples": 4,
           "tags": {"theme:hedging": {"score": 0.5}}, "length_adjusted": {"score": 0.3}}
runner = CliRunner()


def test_flat_metrics_names():
    flat = flat_metrics(METRICS)
    assert flat["healthbench/score"] == 0.25 and flat["healthbench/theme:hedging"] == 0.5
    assert flat["healthbench/length_adjusted_score"] == 0.3


def test_wandb_disabled_logs_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert log_to_wandb(METRICS, tmp_path) is False


def test_wandb_runs_offline_without_a_key(monkeypatch, tmp_path):
    calls = {}

    class Run:
        def log(self, data):
            calls["log"] = data

        def finish(self):
            calls["finished"] = True

    fake = types.ModuleType("wandb")
    fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    fake.init = lambda **kw: calls.setdefault("init", kw) and Run()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert log_to_wandb(METRICS, tmp_path / "run") is True
    assert calls["init"]["mode"] == "offline" and calls["log"]["healthbench/score"] == 0.25 and calls["finished"]


def test_wandb_failure_does_not_fail_the_eval(monkeypatch, tmp_path):
    fake = types.ModuleType("wandb")
    fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)

    def boom(**kw):
        raise ConnectionError("no network")

    fake.init = boom
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "online")
    assert log_to_wandb(METRICS, tmp_path) is False


def test_cli_needs_a_judge_and_names_a_bad_data_file(tmp_path):
    res = runner.invoke(app, ["eval", "healthbench", "--model", "m", "--data", str(OWN), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "give a judge" in res.output
    bad = tmp_path / variants.VARIANTS["full"].file_name
    shutil.copy(OWN, bad)
    res = runner.invoke(app, ["eval", "healthbench", "--model", "m", "--data", str(bad), "--judge-model", "j",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and variants.VARIANTS["full"].file_name in res.output and "SHA-256" in res.output
    res = runner.invoke(app, ["eval", "healthbench", "--model", "m", "--data", str(OWN), "--judge-model", "j",
                              "--judge-mode", "fast", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--judge-mode" in res.output
    res = runner.invoke(app, ["eval", "mcq", "--model", "m", "--data", str(OWN), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "eval_hb_own.jsonl" in res.output
