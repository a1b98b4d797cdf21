"""training/verl_preflight.py: what a verl stage is checked for before its trainer starts (the
composed config is real Hydra on our verl configs; no GPU needed)."""

from __future__ import annotations

import json
import os

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("verl")
pytest.importorskip("hydra")

from reward.errors import InputError  # noqa: E402
from training.verl_preflight import RECORD, main  # noqa: E402

STAGE1 = str(REPO_ROOT / "configs" / "verl" / "stage1_mcq.yaml")


def _run(capsys, ckpt, model, *extra):
    rc = main([STAGE1, f"trainer.default_local_dir={ckpt}", f"actor_rollout_ref.model.path={model}", *extra])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err


def _checkpoint(ckpt, step=50):
    (ckpt / f"global_step_{step}" / "actor").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_a_first_run_records_its_start_model_and_prints_the_checkpoint_folder(tmp_path, capsys, tiny_model_dir):
    ckpt = tmp_path / "ckpt"
    rc, out, err = _run(capsys, ckpt, tiny_model_dir)
    assert rc == 0, err
    assert out == str(ckpt)
    assert json.loads((ckpt / RECORD).read_text())["model"] == str(tiny_model_dir)
    assert _run(capsys, ckpt, "Qwen/Qwen3-8B")[0] == 0  # no checkpoint yet: a new start is fine


def test_a_rerun_from_another_start_model_is_refused_not_resumed(tmp_path, capsys, tiny_model_dir):
    ckpt = tmp_path / "ckpt"
    assert _run(capsys, ckpt, tiny_model_dir)[0] == 0
    _checkpoint(ckpt)
    rc, _, err = _run(capsys, ckpt, "Qwen/Qwen3-8B")
    assert rc == 2
    assert "would continue the old run" in err and "step 50" in err
    assert "actor_rollout_ref.model.path" in err
    assert f"delete {ckpt / RECORD} to resume anyway" in err
    # the same start model resumes, however it is spelled
    assert _run(capsys, ckpt, tiny_model_dir)[0] == 0
    assert _run(capsys, ckpt, f"{tiny_model_dir}/")[0] == 0
    # any resume_mode: under "disable" a run that dies before its first save leaves the old tracker
    for mode in ("disable", "resume_path"):
        rc, _, err = _run(capsys, ckpt, "Qwen/Qwen3-8B", f"trainer.resume_mode={mode}")
        assert rc == 2 and "would continue the old run" in err, mode
    assert json.loads((ckpt / RECORD).read_text())["model"] == str(tiny_model_dir)  # never rewritten


def test_a_start_model_retrained_into_the_same_path_is_told_apart(tmp_path, capsys, tiny_model_dir):
    """The pipeline writes each stage's export to the same <root>/<stage>/hf: a retrained stage 1
    behind the same path (or a symlink re-pointed) is another start."""
    import shutil

    export = tmp_path / "stage1" / "hf"
    shutil.copytree(tiny_model_dir, export)
    (export / "export.json").write_text(json.dumps({"step": 100}))
    link = tmp_path / "start"
    link.symlink_to(export)
    ckpt = tmp_path / "ckpt"
    assert _run(capsys, ckpt, link)[0] == 0
    _checkpoint(ckpt)
    assert _run(capsys, ckpt, export)[0] == 0  # the same folder by another name
    (export / "export.json").write_text(json.dumps({"step": 250}))  # retrained into the same path
    rc, _, err = _run(capsys, ckpt, link)
    assert rc == 2 and "the same folder with other weights" in err
    assert _run(capsys, ckpt, link)[0] == 2  # still refused on a rerun
    # a retrain with the same config and step count writes the same export.json, but new weights
    assert _run(capsys, tmp_path / "ckpt2", link)[0] == 0
    _checkpoint(tmp_path / "ckpt2")
    (export / "model.safetensors").unlink()
    shutil.copyfile(tiny_model_dir / "model.safetensors", export / "model.safetensors")
    os.utime(export / "model.safetensors", ns=(1, 1))  # written at another time
    rc, _, err = _run(capsys, tmp_path / "ckpt2", link)
    assert rc == 2 and "the same folder with other weights" in err
    other = tmp_path / "stage1-v2"
    shutil.copytree(tiny_model_dir, other)
    link.unlink()
    link.symlink_to(other)  # the link re-pointed
    assert _run(capsys, ckpt, link)[0] == 2 and _run(capsys, tmp_path / "ckpt2", link)[0] == 2


def test_an_unreadable_record_names_itself(tmp_path, capsys, tiny_model_dir):
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt)
    (ckpt / RECORD).write_text("{not json")
    rc, _, err = _run(capsys, ckpt, tiny_model_dir)
    assert rc == 2 and str(ckpt / RECORD) in err and "not a start record" in err


def test_a_checkpoint_without_a_record_is_resumed_with_a_note(tmp_path, capsys, caplog, tiny_model_dir):
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, 10)
    rc, out, _ = _run(capsys, ckpt, tiny_model_dir)
    assert rc == 0 and out == str(ckpt)
    assert "not recorded" in caplog.text and not (ckpt / RECORD).exists()


@pytest.mark.parametrize("freq", ["0", "-1"])
def test_no_checkpoint_saving_is_refused_before_training(tmp_path, capsys, tiny_model_dir, freq):
    rc, _, err = _run(capsys, tmp_path / "ckpt", tiny_model_dir, f"trainer.save_freq={freq}")
    assert rc == 2 and f"trainer.save_freq is {freq}" in err and "nothing to merge" in err
    rc, _, err = _run(capsys, tmp_path / "ckpt", tiny_model_dir, "trainer.save_freq=often")
    assert rc == 2 and "whole number" in err


def test_a_remote_start_model_is_left_to_verl(tmp_path, capsys):
    rc, out, err = _run(capsys, tmp_path / "ckpt", "hdfs://namenode/models/qwen3-8b")
    assert rc == 0 and out == str(tmp_path / "ckpt"), err


def test_a_start_folder_without_weights_is_refused(tmp_path, capsys):
    raw = tmp_path / "global_step_3" / "actor"
    raw.mkdir(parents=True)
    (raw / "model_world_size_8_rank_0.pt").write_text("")
    rc, _, err = _run(capsys, tmp_path / "ckpt", raw.parent)
    assert rc == 2 and "sharded training checkpoint" in err and "training.verl_export" in err

    with pytest.raises(InputError, match="sharded training checkpoint"):  # --debug: the traceback, not one line
        _run(capsys, tmp_path / "ckpt", raw.parent, "--debug")


STAGE3 = str(REPO_ROOT / "configs" / "verl" / "stage3_clinical_rubric.yaml")


def test_a_dead_judge_is_refused_before_the_trainer_starts(tmp_path, capsys, tiny_model_dir, monkeypatch):
    """verl would find a dead judge inside a reward worker, after Ray, the workers and a first
    validation pass: the preflight asks it first, as the reward reads its settings."""
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9/v1")
    rc = main([STAGE3, f"trainer.default_local_dir={tmp_path / 'ckpt'}",
               f"actor_rollout_ref.model.path={tiny_model_dir}"])
    err = capsys.readouterr().err
    assert rc == 2 and "the judge does not answer" in err and "reward_kwargs.judge.url" in err
    assert not (tmp_path / "ckpt" / RECORD).exists()  # refused before the start record
    # stage 1 has no judge: a judge URL left in the environment is not its business
    rc, out, err = _run(capsys, tmp_path / "ckpt1", tiny_model_dir)
    assert rc == 0, err


NO_GATE = "reward.custom_reward_function.reward_kwargs.judge_gate.enforce=false"  # the tiny random judge is unfit


def test_the_judge_check_against_the_real_server(tmp_path, capsys, tiny_model_dir, judge_url, monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    monkeypatch.delenv("RUBRICSTREE_JUDGE_SERVED", raising=False)
    args = [STAGE3, f"trainer.default_local_dir={tmp_path / 'ckpt'}", f"actor_rollout_ref.model.path={tiny_model_dir}"]
    assert main([*args, NO_GATE]) == 0, capsys.readouterr().err
    monkeypatch.setenv("RUBRICSTREE_JUDGE_SERVED", "no-such-judge")
    assert main([*args[:1], f"trainer.default_local_dir={tmp_path / 'ckpt2'}", args[2]]) == 2
    assert "does not serve 'no-such-judge'" in capsys.readouterr().err


def test_a_judge_from_the_environment_fallback_is_checked_too(tmp_path, capsys, tiny_model_dir, monkeypatch):
    """reward_kwargs with a judge block but no url: the reward falls back to $RUBRICSTREE_JUDGE_URL
    (judge_settings), and so does the check."""
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9/v1")
    rc = main([STAGE3, f"trainer.default_local_dir={tmp_path / 'ckpt'}", f"actor_rollout_ref.model.path={tiny_model_dir}",
               "reward.custom_reward_function.reward_kwargs.judge.url=null"])
    assert rc == 2 and "the judge does not answer" in capsys.readouterr().err


def _stage3_recipe():
    """The reward settings the stage-3 config trains with, as the preflight reads them."""
    from omegaconf import OmegaConf

    from reward.integrations.verl.settings import load_settings
    from training.verl_preflight import compose

    cfg = compose(STAGE3, ["actor_rollout_ref.model.path=m"])
    kwargs = dict(OmegaConf.to_container(OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs"),
                                         resolve=True))
    return load_settings(kwargs.pop("config", None), **kwargs)


def test_the_judge_gate_looks_the_served_judge_up_by_identity(tmp_path, capsys, tiny_model_dir, judge_url, monkeypatch):
    """Stage 3 refuses a judge without a calibration on record (saying how to make one), refuses one
    whose calibration predicts too little, and passes one whose record clears both thresholds; the
    record is found by the judge's identity, as the verdict cache keys it, and is bound to what the
    judge answers to the fixed probe items and to the stage's recipe."""
    from rt_calibration import record_with

    from reward.calibration.record import record_path, save_calibration
    from reward.settings import JudgeSettings
    from training.judge_gate import built_judge, run_facts

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    monkeypatch.delenv("RUBRICSTREE_JUDGE_SERVED", raising=False)
    args = [STAGE3, f"trainer.default_local_dir={tmp_path / 'ckpt'}", f"actor_rollout_ref.model.path={tiny_model_dir}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no calibration of the judge http:tiny@" in err and "rubricstree judge calibrate --judge-url" in err
    # the stage trains the default recipe (RewardSettings()): no recipe option to calibrate with
    assert "rubricstree judge calibrate --judge-url" in err and "--rubric-source" not in err
    assert "judge_gate.enforce=false" in err and not (tmp_path / "ckpt" / RECORD).exists()
    recipe = _stage3_recipe()
    with built_judge(JudgeSettings(url=judge_url)) as built:
        facts = run_facts(built, tree=None, recipe=recipe)
    path = record_path(facts.judge_id)
    save_calibration(record_with(facts.judge_id, facts=facts, detection=0.62, critical_false_pass=(9, 30), cases=600),
                     path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "predicted detection 0.620" in err and "lower end is below min_detection 0.9" in err
    assert "critical false-pass rate 0.300 (9/30)" in err
    save_calibration(record_with(facts.judge_id, facts=facts, detection=0.97, critical_false_pass=(1, 200),
                                 cases=800), path)
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "ckpt" / "judge_gate.json").read_text())[0]["passed"]


@pytest.mark.parametrize(("overrides", "new_key"), [
    (["custom_reward_function.path=pkg://my_reward", "custom_reward_function.name=score"],
     "reward.custom_reward_function.path"),
    (["+custom_reward_function.reward_kwargs.on_failure=raise"], "reward.custom_reward_function.reward_kwargs.on_failure"),
    (["reward_model.reward_manager=naive"], "reward.reward_manager.name"),
    (["reward_model.num_workers=4"], "reward.num_workers"),
])
def test_verls_older_reward_keys_are_refused_naming_the_key_to_use(overrides, new_key, tmp_path, capsys):
    """verl 0.9.1's main_ppo never reads its older top-level reward keys, and its fully-async
    trainer lets them replace reward.*: our settings, judge gate and failure policy. Either way the
    user's key does not do what it says, so the run is refused before anything starts."""
    rc = main([STAGE3, f"trainer.default_local_dir={tmp_path / 'ckpt'}", "actor_rollout_ref.model.path=Qwen/Qwen3-8B",
               *overrides])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "older reward key" in err and f"set {new_key} instead" in err and "judge gate and failure policy" in err
    assert overrides[0].lstrip("+").split("=")[0] in err
    assert not (tmp_path / "ckpt" / RECORD).exists()
