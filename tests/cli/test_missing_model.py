"""A model path that names nothing is refused at once with "no model at PATH", by every command
that takes a model (eval, train, the in-process judge), never as a hub lookup after the model
libraries load ("Repo id must be in the form ...")."""

from __future__ import annotations

import pytest
from rt_paths import FIXTURES, REPO_ROOT
from typer.testing import CliRunner

from reward._optional import require_model
from reward.errors import ModelNotFoundError
from rubricstree import app


def test_require_model_tells_paths_from_hub_ids(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert require_model(str(model)) == str(model)
    assert require_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"  # a hub id is left to transformers
    assert require_model("gpt2") == "gpt2"
    for bad in (str(tmp_path / "absent"), "./ckpt", "runs/demo/tiny-model-absent", "~/none/x", ""):
        with pytest.raises(ModelNotFoundError, match="no model at"):
            require_model(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        require_model(str(tmp_path / "empty"))
    with pytest.raises(ModelNotFoundError, match="not a model folder"):
        require_model(str(model / "config.json"))
    # "runs/x" beside a local runs/ folder is a path, not an organisation on the hub
    (tmp_path / "runs").mkdir()
    with pytest.raises(ModelNotFoundError):
        require_model(str(tmp_path / "runs" / "x"))


def _run(args):
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("args", [
    ["eval", "healthbench", "--model", "{m}", "--judge-model", "{m}", "--data",
     str(FIXTURES / "eval_hb_own.jsonl"), "--grading", "choice", "--out", "{out}"],
    ["eval", "mcq", "--model", "{m}", "--data", str(FIXTURES / "mcq_own.jsonl"), "--out", "{out}"],
    ["judge", "check", "--judge-model", "{m}"],
    ["score", "--rollouts", str(REPO_ROOT / "reward/data/demo_rollouts.jsonl"), "--judge-model", "{m}",
     "--router", "static", "--out", "{out}/s.jsonl"],
    ["train", "run", "--config", str(REPO_ROOT / "configs/smoke/stage1_mcq.yaml"), "--set", "model={m}"],
], ids=["eval-healthbench", "eval-mcq", "judge-check", "score", "train-run"])
def test_every_model_option_names_a_missing_path(tmp_path, args):
    missing = str(tmp_path / "no-such" / "model")
    res = _run([a.format(m=missing, out=tmp_path / "out") for a in args])
    assert res.exit_code == 2, res.output
    assert f"no model at {missing}" in res.output and "Repo id" not in res.output


def test_the_training_launcher_names_a_missing_policy(tmp_path, capsys):
    from training.trl_launcher import main

    missing = str(tmp_path / "none" / "policy")
    assert main(["--config", str(REPO_ROOT / "configs/smoke/stage1_mcq.yaml"), "--set", f"model={missing}"]) == 2
    assert f"no model at {missing}" in capsys.readouterr().out
    # --print-judge only reads the config: no model is needed
    assert main(["--config", str(REPO_ROOT / "configs/smoke/stage1_mcq.yaml"), "--set", f"model={missing}",
                 "--print-judge"]) == 0

