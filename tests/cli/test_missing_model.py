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
     "--router", "static", "--out", "{out}/s"],
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



def _folder(root, name, files):
    d = root / name
    d.mkdir(parents=True)
    for f in files:
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        (d / f).write_text("{}")
    return d


def test_a_training_start_model_must_have_weights(tmp_path):
    """A folder require_model accepts (a config or a tokenizer) is not yet one a trainer can start
    from: a sharded checkpoint, a tokenizer alone or a bare config are refused, saying what to load."""
    from training.hf_export import require_start_model

    for files in (["config.json", "model.safetensors"], ["config.json", "model.safetensors.index.json"],
                  ["config.json", "pytorch_model.bin"]):
        ok = _folder(tmp_path, "ok-" + files[1], files)
        assert require_start_model(str(ok)) == str(ok)
    assert require_start_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    cases = {"a sharded training checkpoint": ["config.json", "pytorch_model_fsdp_0/__0_0.distcp"],
             "a tokenizer folder": ["tokenizer_config.json", "tokenizer.json"],
             "a config without weights": ["config.json", "generation_config.json"]}
    for kind, files in cases.items():
        d = _folder(tmp_path, kind.replace(" ", "-"), files)
        with pytest.raises(ModelNotFoundError, match=f"no weights at .*{kind}, not a Hugging Face export"):
            require_start_model(str(d))
    verl = _folder(tmp_path, "global_step_40", ["actor/huggingface/config.json", "actor/model_world_size_8_rank_0.pt"])
    with pytest.raises(ModelNotFoundError, match="sharded training checkpoint.*training.verl_export"):
        require_start_model(str(verl))


def test_train_run_and_the_launcher_refuse_a_start_folder_without_weights(tmp_path, capsys):
    from training.trl_launcher import main

    ckpt = _folder(tmp_path, "checkpoint-10", ["config.json", "pytorch_model_fsdp_0/__0_0.distcp"])
    res = _run(["train", "run", "--config", str(REPO_ROOT / "configs/smoke/stage1_mcq.yaml"), "--set", f"model={ckpt}"])
    assert res.exit_code == 2 and f"no weights at {ckpt}" in res.output, res.output
    assert main(["--config", str(REPO_ROOT / "configs/smoke/stage1_mcq.yaml"), "--set", f"model={ckpt}"]) == 2
    assert f"no weights at {ckpt}" in capsys.readouterr().out
