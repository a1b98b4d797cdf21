"""Each Fathom-Vaidya stage through TRL's GRPOTrainer (GSPO) on CPU with the tiny random Qwen3:
2 optimizer steps from the smoke configs, rewards that differ within a batch and a non-zero
gradient; difficulty filtering windows; resuming an interrupted run; stage 3's per-epoch filter.
Stages 2 and 3 grade with the real vLLM judge server (``server`` marker)."""

from __future__ import annotations

import json
import logging

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("trl")
pytest.importorskip("torch")

REPO = REPO_ROOT
SMOKE = REPO / "configs" / "smoke"


@pytest.fixture
def smoke_env(monkeypatch, tiny_model_dir, tmp_path):
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.chdir(REPO)  # the smoke configs name data files relative to the repository
    return tmp_path / "run"


def _train(config: str, *overrides: str):
    from training.trl_launcher import load_config, train

    return train(load_config(SMOKE / config, list(overrides)))


def _start_model() -> str:
    from training.trl_launcher import load_config

    return load_config(SMOKE / "stage1_mcq.yaml").model


def _steps(result) -> list[dict]:
    return [h for h in result.log_history if "grad_norm" in h]


def _assert_learned(result, reward_name: str) -> None:
    steps = _steps(result)
    assert [h["step"] for h in steps] == [1, 2] and result.global_step == 2
    # rewards within the batch differ (else the group advantages, and the gradient, are zero)
    assert any(h[f"rewards/{reward_name}/std"] > 0 for h in steps), steps
    assert any(h["grad_norm"] > 0 for h in steps), steps


def test_stage1_mcq_two_gspo_steps(smoke_env, caplog):
    with caplog.at_level(logging.INFO, logger="training.trl_launcher"):
        result = _train("stage1_mcq.yaml")
    _assert_learned(result, "mcq_rule")
    assert "mcq_rule/accuracy" in _steps(result)[0]
    assert "global batch: 8 completions per optimizer step = 2 prompts x 4 generations" in caplog.text
    # the start model is recorded beside the checkpoints (a rerun from another one is refused)
    assert json.loads((smoke_env / "rubricstree_start.json").read_text())["model"] == _start_model()


@pytest.mark.server
def test_stage2_error_rubric_two_gspo_steps(smoke_env, judge_url, monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    result = _train("stage2_error_rubric.yaml")
    _assert_learned(result, "error_rubric")
    step = _steps(result)[0]
    assert step["error_rubric/judge/requests"] > 0 and step["error_rubric/unscored"] < 1
    assert "error_rubric/penalty" in step and "error_rubric/severity/context" in step


@pytest.mark.server
def test_stage3_clinical_rubric_two_gspo_steps(smoke_env, judge_url, monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    result = _train("stage3_clinical_rubric.yaml")
    _assert_learned(result, "clinical_rubric")
    step = _steps(result)[0]
    assert step["clinical_rubric/judge/requests"] > 0 and step["clinical_rubric/unscored"] == 0
    assert any(k.startswith("clinical_rubric/macro/") for k in step)
    assert any(k.startswith("clinical_rubric/axis/") for k in step)
    # per-leaf pass rates in log_history, and the run's per-rollout records open in the inspector
    leaf_keys = [k for k in step if k.startswith("clinical_rubric/leaf/")]
    assert leaf_keys and all(0.0 <= step[k] <= 1.0 for k in leaf_keys)
    _inspect_the_run(smoke_env, result)


def _inspect_the_run(run_dir, result) -> None:
    """``rubricstree inspect <output_dir>`` reads the reward's records of every step: one rollout per
    completion scored, grouped by (step, prompt), with the recorded settings and each leaf's
    contribution."""
    from typer.testing import CliRunner

    from rubricstree import app
    from training.inspector import load_run
    from training.inspector.data import read_settings

    records = run_dir / "rubric_records"
    files = sorted(records.glob("step-*.jsonl"))
    assert files and (records / "settings.json").is_file()
    assert read_settings(run_dir)["router"] == "static"
    from reward.tree import load_tree

    run = load_run(run_dir, tree=load_tree())
    n_scored = sum(len(f.read_text().splitlines()) for f in files)
    assert len(run.rollouts) == n_scored >= 8 * result.global_step  # 2 prompts x 4 generations per step
    assert {r.group.split(":")[0] for r in run.rollouts} <= {f"step{s}" for s in range(result.global_step + 1)}
    assert max(r.group_size for r in run.rollouts) == 4  # a GRPO group: one prompt's 4 generations at one step
    assert any(r.contrib for r in run.rollouts if r.score is not None)
    res = CliRunner().invoke(app, ["inspect", str(run_dir), "--out", str(run_dir / "inspect")])
    assert res.exit_code == 0, res.output
    assert (run_dir / "inspect" / "inspector.html").stat().st_size > 0


def test_resume_after_an_interrupted_run(smoke_env):
    first = _train("stage1_mcq.yaml", "grpo.max_steps=2", "grpo.save_steps=1")
    assert first.global_step == 2 and first.resumed_from is None
    assert (smoke_env / "checkpoint-2").is_dir()
    second = _train("stage1_mcq.yaml", "grpo.max_steps=3", "grpo.save_steps=1")
    assert second.resumed_from is not None and second.resumed_from.endswith("checkpoint-2")
    assert second.start_step == 2 and second.global_step == 3
    # the history continues the first run's (restored from the checkpoint), one entry per step
    assert [h["step"] for h in _steps(second)] == [1, 2, 3]
    assert _steps(second)[:2] == _steps(first)
    state = json.loads((smoke_env / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3


def test_difficulty_filter_windows_and_counts(shared_data, tiny_model_dir, tmp_path, caplog):
    """Six MedQA rows, the tiny model in process, n=4: the MCQ path end to end, then the windows
    with a reward whose per-row means are known (0, 1/4, 2/4, 3/4, 4/4, 2/4)."""
    from training.difficulty import DifficultyConfig, Window, filter_rows, run_filter

    rows = [json.loads(line) for line in (shared_data / "medqa_usmle_4opt_test.jsonl").read_text().splitlines()[:6]]
    data = tmp_path / "six.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = DifficultyConfig(n=4, max_new_tokens=8)
    with caplog.at_level(logging.INFO, logger="training.difficulty"):
        splits, stats = run_filter(data, model=str(tiny_model_dir), out_dir=tmp_path / "mcq", cfg=cfg)
    assert stats.rows == 6 and sum(stats.counts.values()) == 6
    assert "difficulty filter: 6 rows" in caplog.text
    scores = [json.loads(line) for line in (tmp_path / "mcq" / "scores.jsonl").read_text().splitlines()]
    assert [len(s["rewards"]) for s in scores] == [4] * 6 and scores[0]["id"] == "mcq-1"
    assert json.loads((tmp_path / "mcq" / "stats.json").read_text())["counts"] == stats.counts

    from training.data import build_mcq_dataset

    dataset = build_mcq_dataset(rows)
    wins = [0, 1, 2, 3, 4, 2]

    def known(prompts, completions, completion_ids=None, row_id=None, **kw):
        out, seen = [], {}
        for rid in row_id:
            k = seen.setdefault(rid, 0)
            seen[rid] += 1
            out.append(1.0 if k < wins[int(rid.split("-")[1]) - 1] else 0.0)
        return out

    samples = [["x"] * 4 for _ in rows]
    split, st = filter_rows(rows, dataset, samples, known, cfg, tmp_path / "split")
    assert st.counts == {"rubric": 1, "rule": 2, "drop": 3, "unscored": 0, "too_few_scored": 0,
                         "skipped": 0}  # 0.25 | 0.5, 0.5 | 0, 0.75, 1
    assert (tmp_path / "split" / "rule.jsonl").read_text().count("\n") == 2
    keep = DifficultyConfig(n=4, mode="keep", keep=Window(lo=0.15, hi=0.7))
    _, st = filter_rows(rows, dataset, samples, known, keep, None)
    assert st.counts["keep"] == 3 and st.counts["drop"] == 3
    # configurable windows: widen the rule window to take 0.75 too
    wide = DifficultyConfig(n=4, rule=Window(lo=0.4, hi=0.8, lo_inclusive=False))
    _, st = filter_rows(rows, dataset, samples, known, wide, None)
    assert st.counts["rule"] == 3
    # a row whose samples were all unscored is dropped as such, not counted as 0
    _, st = filter_rows(rows[:1], dataset.select([0]), [["x"] * 4], lambda prompts, completions, **kw: [None] * 4,
                        cfg, None)
    assert st.counts["unscored"] == 1


@pytest.mark.parametrize("mean, split", [(0.1, "rubric"), (0.4, "rubric"), (0.41, "rule"), (0.7, "rule"),
                                         (0.71, "drop"), (0.09, "drop"), (None, "unscored")])
def test_default_windows_boundaries(mean, split):
    from training.difficulty import DifficultyConfig

    assert DifficultyConfig().split_of(mean) == split
    if mean is not None:
        assert DifficultyConfig(mode="keep").split_of(mean) == ("keep" if 0.15 <= mean <= 0.7 else "drop")


@pytest.mark.server
def test_stage3_per_epoch_filter_loop(smoke_env, judge_url, monkeypatch):
    """Two epochs, each preceded by a filter with the current policy; the second resumes the first."""
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    result = _train("stage3_clinical_rubric.yaml", "difficulty.per_epoch=true", "difficulty.keep=[0.0, 1.0]",
                    "difficulty.n=2", "difficulty.max_new_tokens=4", "data.limit=2", "grpo.num_train_epochs=2",
                    "reward.rubric_source=rows", "grpo.max_completion_length=8")
    assert [e["epoch"] for e in result.epochs] == [0, 1]
    assert all(e["kept"] == 2 for e in result.epochs)
    assert result.epochs[1]["start_step"] == result.epochs[0]["end_step"] == 1 and result.global_step == 2
    assert (smoke_env / "difficulty" / "epoch-1" / "keep.jsonl").exists()
    assert json.loads((smoke_env / "epochs.json").read_text())[1]["end_step"] == 2


def test_stage3_epochs_share_one_cosine_horizon(smoke_env, judge_url, monkeypatch):
    """3 epochs of 1 step: one cosine over 3 steps (logged lr = lr before the step: 1, 0.75, 0.25
    x peak), not a schedule re-stretched to each epoch's own max_steps (1, 0.5, 0.25)."""
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    result = _train("stage3_clinical_rubric.yaml", "difficulty.per_epoch=true", "difficulty.keep=[0.0, 1.0]",
                    "difficulty.n=2", "difficulty.max_new_tokens=4", "data.limit=2", "grpo.num_train_epochs=3",
                    "reward.rubric_source=rows", "grpo.max_completion_length=8")
    lrs = [h["learning_rate"] for h in _steps(result)]
    # the schedule is closed-form arithmetic on the step count (no model value enters): rel 1e-9
    # tells 0.75 from 0.5 x peak by eight orders of magnitude
    assert lrs == pytest.approx([1e-4, 0.75e-4, 0.25e-4], rel=1e-9)


def test_cli_train_filter_and_run(tiny_model_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rubricstree import app

    runner = CliRunner()
    out = tmp_path / "filtered"
    res = runner.invoke(app, ["train", "filter", "--data", str(REPO / "tests/fixtures/mcq_own.jsonl"),
                              "--model", str(tiny_model_dir), "--n", "2", "--max-new-tokens", "4",
                              "--rule-window", "0.4,0.9", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    assert stats["rows"] == 3 and stats["windows"]["rule"] == "(0.4, 0.9]"
    assert {p.name for p in out.iterdir()} == {"samples.jsonl", "scores.jsonl", "rubric.jsonl", "rule.jsonl",
                                              "stats.json"}

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    res = runner.invoke(app, ["train", "run", "--config", str(SMOKE / "stage1_mcq.yaml"), "--set",
                              "grpo.max_steps=7", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["grpo"]["max_steps"] == 7
    res = runner.invoke(app, ["train", "run", "--config", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 2 and "not found" in res.output


class _LengthReward:
    """A judge-free stand-in for the stage 3 reward: the share of a 10-character budget used."""

    __name__ = "clinical_rubric"

    def __call__(self, prompts, completions, completion_ids=None, **kw):
        from reward.stages.rollout_text import completion_text

        return [min(1.0, len(completion_text(c)) / 10) for c in completions]


def test_stage3_epoch_killed_midway_resumes_with_its_filter_and_step_budget(smoke_env, monkeypatch):
    """Two epochs of 2 steps each; the run dies after step 3 (checkpoint-3, inside epoch 1). The
    rerun must not filter epoch 1 again with the half-trained policy, and must end at step 4 (the
    epoch's budget), not at 3 + a new epoch's worth of steps."""
    from transformers import TrainerCallback

    import training.trl_launcher as tl

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")  # never called
    monkeypatch.setattr(tl, "build_reward_funcs", lambda cfg: [_LengthReward()])
    monkeypatch.setattr(tl, "check_judge", lambda cfg: None)  # the stand-in needs no judge
    filters = []
    real_filter, real_make = tl.run_difficulty, tl.make_trainer

    def counting_filter(*a, **k):
        filters.append(a[2])
        return real_filter(*a, **k)

    class Die(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == 3:
                raise RuntimeError("killed")

    def dying_trainer(*a, **k):
        trainer = real_make(*a, **k)
        trainer.add_callback(Die())
        return trainer

    monkeypatch.setattr(tl, "run_difficulty", counting_filter)
    overrides = ["difficulty.per_epoch=true", "difficulty.keep=[0.0, 1.0]", "difficulty.n=2",
                 "difficulty.max_new_tokens=4", "data.limit=4", "grpo.num_train_epochs=2",
                 "grpo.max_completion_length=8"]
    monkeypatch.setattr(tl, "make_trainer", dying_trainer)
    with pytest.raises(RuntimeError, match="killed"):
        _train("stage3_clinical_rubric.yaml", *overrides)
    assert [p.name for p in filters] == ["epoch-0", "epoch-1"] and (smoke_env / "checkpoint-3").is_dir()
    assert json.loads((smoke_env / "difficulty" / "epoch-1" / "epoch.json").read_text())["start_step"] == 2

    monkeypatch.setattr(tl, "make_trainer", real_make)
    filters.clear()
    result = _train("stage3_clinical_rubric.yaml", *overrides)
    assert filters == []  # epoch 1's filter result is reused
    assert [(e["epoch"], e["start_step"], e["end_step"]) for e in result.epochs] == [(0, 0, 2), (1, 2, 4)]
    assert result.global_step == 4 and result.resumed_from.endswith("checkpoint-3")


def test_a_rerun_from_another_start_model_is_refused_before_any_model_loads(smoke_env, tiny_model_dir, tmp_path,
                                                                              monkeypatch, capsys):
    """A checkpoint holds weights: resuming it under a new start model would continue the old run
    and export it as started from the new one (training.start_record)."""
    from reward.errors import InputError
    from training.start_record import RECORD

    other = tmp_path / "other-start"
    other.mkdir()
    for f in ("config.json", "model.safetensors"):
        (other / f).symlink_to(tiny_model_dir / f)
    smoke_env.mkdir(parents=True)
    (smoke_env / "checkpoint-2").mkdir()
    (smoke_env / RECORD).write_text(json.dumps({"model": str(other)}))
    built = []
    monkeypatch.setattr("training.trl_launcher.build_reward_funcs", lambda cfg: built.append(cfg) or [])
    with pytest.raises(InputError, match="would continue the old run"):
        _train("stage1_mcq.yaml")
    assert not built  # refused before the reward, the data or the model were built
    # the CLI and the launcher say it and exit 2
    from training.trl_launcher import main

    assert main(["--config", str(SMOKE / "stage1_mcq.yaml")]) == 2
    out = capsys.readouterr().out
    assert "would continue the old run" in out and "move that output_dir away" in out
    assert main(["--config", str(SMOKE / "stage1_mcq.yaml"), "--filter-only"]) == 2  # before any sampling
    assert not built


def test_a_dead_judge_is_said_before_any_model_loads(smoke_env, monkeypatch, capsys):
    """A wrong judge.url used to surface at the first reward call, after the policy, vLLM and a
    first generation batch; now the launcher asks the server first and exits 2 with one line."""
    import training.trl_launcher as tl
    from reward.errors import InputError

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    built = []
    monkeypatch.setattr(tl, "build_reward_funcs", lambda cfg: built.append(cfg) or [])
    with pytest.raises(InputError, match="the judge does not answer") as exc:
        _train("stage3_clinical_rubric.yaml")
    assert exc.value.field == "judge.url" and not built
    assert tl.main(["--config", str(SMOKE / "stage2_error_rubric.yaml")]) == 2
    assert "no server answers at http://127.0.0.1:9" in capsys.readouterr().out
    # the filter scores with the judge too: asked before any sampling
    assert tl.main(["--config", str(SMOKE / "stage3_clinical_rubric.yaml"), "--filter-only",
                    "--set", "difficulty.enabled=true"]) == 2
    assert "the judge does not answer" in capsys.readouterr().out and not built
    # stage 1 needs no judge: nothing is asked
    tl.check_judge(tl.load_config(SMOKE / "stage1_mcq.yaml"))


def test_the_judge_check_against_the_real_server(smoke_env, judge_url, monkeypatch):
    import training.trl_launcher as tl
    from reward.errors import InputError

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    tl.check_judge(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml"))  # answers: no error
    with pytest.raises(InputError, match="does not serve 'no-such-judge'") as exc:
        tl.check_judge(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", ["judge.served_model=no-such-judge"]))
    assert exc.value.field == "judge.served_model"


@pytest.mark.parametrize("config, good, bad, field", [
    ("stage1_mcq.yaml", '{"question": "q", "options": {"A": "a", "B": "b"}, "answer_idx": "A"}',
     '{"question": "q", "options": {"A": "a", "B": "b"}}', "answer_idx"),
    ("stage3_clinical_rubric.yaml",
     '{"prompt_id": "a", "prompt": [{"role": "user", "content": "hi"}], "rubrics": [{"criterion": "c", "points": 1}]}',
     '{"prompt_id": "b", "prompt": [{"role": "user", "content": "hi"}]}', "rubrics"),
])
def test_a_bad_row_under_the_difficulty_filter_is_named_by_file_line_and_field(smoke_env, tmp_path, monkeypatch,
                                                                            capsys, config, good, bad, field):
    """Under the filter the files' rows are concatenated raw: a bad one used to fail later as an
    unlocated pydantic traceback; now each file is read by its loader first."""
    import training.trl_launcher as tl

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    monkeypatch.setattr(tl, "check_judge", lambda cfg: None)  # the data is read before any judge call
    first, data = tmp_path / "first.jsonl", tmp_path / "bad.jsonl"
    first.write_text(good + "\n")
    data.write_text(good + "\n" + bad + "\n")  # line 2 is bad
    assert tl.main(["--config", str(SMOKE / config), "--filter-only", "--set", "difficulty.enabled=true",
                    "--set", f"data.paths=[{first}, {data}]"]) == 2
    out = capsys.readouterr().out
    assert str(data) in out and "line 2" in out and field in out, out


def test_the_filter_is_not_left_to_rank_0_alone_under_a_multi_gpu_launch(smoke_env, monkeypatch):
    """8 ranks, difficulty filter on, no policy server, no results yet: rank 0 would sample every row
    with transformers while 7 wait; refused before any model loads, with the ways out."""
    import training.trl_launcher as tl
    from reward.errors import InputError
    from training.launch_checks import FILTER_IN_PROCESS_ENV

    monkeypatch.delenv(FILTER_IN_PROCESS_ENV, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "8")
    cfg = tl.load_config(SMOKE / "stage1_mcq.yaml", ["difficulty.enabled=true"])
    with pytest.raises(InputError, match="rank 0 alone") as exc:
        tl.check_filter_plan(cfg)
    assert exc.value.field == "difficulty.generate_url" and "train_pipeline.sh" in str(exc.value)
    tl.check_filter_plan(tl.load_config(SMOKE / "stage1_mcq.yaml", ["difficulty.enabled=true",
                                                                    "difficulty.generate_url=http://policy:8200"]))
    monkeypatch.setenv(FILTER_IN_PROCESS_ENV, "1")
    tl.check_filter_plan(cfg)  # accepted on purpose
    monkeypatch.delenv(FILTER_IN_PROCESS_ENV)
    stats = tl.difficulty_dir(cfg) / "stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text("{}")
    tl.check_filter_plan(cfg)  # the results are there: nothing to sample
    monkeypatch.setenv("WORLD_SIZE", "1")
    stats.unlink()
    tl.check_filter_plan(cfg)  # one process: nobody waits
    tl.check_filter_plan(tl.load_config(SMOKE / "stage1_mcq.yaml"))  # no filter


def test_a_policy_server_filters_one_stage3_epoch_per_launch(smoke_env, monkeypatch):
    """A server serves one policy: a run that would filter a second epoch from it (sampling the old
    policy while epoch.json names the new export) is refused; one epoch per launch is not."""
    import training.trl_launcher as tl
    from reward.errors import InputError

    monkeypatch.setenv("WORLD_SIZE", "8")
    base = ["difficulty.per_epoch=true", "grpo.num_train_epochs=3", "difficulty.generate_url=http://policy:8200"]
    with pytest.raises(InputError, match="serves one model") as exc:
        tl.check_filter_plan(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", base))
    assert "epochs_per_run: 1" in str(exc.value)
    tl.check_filter_plan(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", [*base, "difficulty.epochs_per_run=1"]))
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(InputError, match="serves one model"):  # whatever the number of processes
        tl.check_filter_plan(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", base))
    tl.check_filter_plan(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", base[:2]))  # in process: each export


def test_epochs_after_the_next_are_not_left_to_rank_0_alone(smoke_env, monkeypatch):
    """Epoch 0 filtered ahead (--filter-only) does not make a multi-epoch run safe: epochs 1.. would
    be filtered inside it, on rank 0 alone; one epoch per launch is."""
    import training.trl_launcher as tl
    from reward.errors import InputError
    from training.launch_checks import FILTER_IN_PROCESS_ENV

    monkeypatch.delenv(FILTER_IN_PROCESS_ENV, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "8")
    sets = ["difficulty.per_epoch=true", "grpo.num_train_epochs=3"]
    cfg = tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", sets)
    from training.run_folder import epoch_dir

    marker = epoch_dir(cfg, 0) / "epoch.json"
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    with pytest.raises(InputError, match="rank 0 alone") as exc:
        tl.check_filter_plan(cfg)
    assert "epochs_per_run: 1" in str(exc.value)
    tl.check_filter_plan(tl.load_config(SMOKE / "stage3_clinical_rubric.yaml", [*sets, "difficulty.epochs_per_run=1"]))


def test_the_mcq_filter_does_not_wait_for_a_judge(smoke_env, monkeypatch, capsys):
    """Stage 2's filter scores MCQ rows with the answer key: a judge that is down is no reason to
    refuse it (training stage 2 still asks the judge first)."""
    import training.trl_launcher as tl

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    calls = []
    monkeypatch.setattr(tl, "_filter_only", lambda cfg: calls.append(cfg) or 0)
    assert tl.main(["--config", str(SMOKE / "stage2_error_rubric.yaml"), "--filter-only",
                    "--set", "difficulty.enabled=true"]) == 0 and calls
    assert tl.main(["--config", str(SMOKE / "stage3_clinical_rubric.yaml"), "--filter-only",
                    "--set", "difficulty.enabled=true"]) == 2  # the healthbench filter scores with the judge
    assert "the judge does not answer" in capsys.readouterr().out
