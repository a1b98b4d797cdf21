"""One stage-3 recipe: the configs the README and docs train are the reward that `score`, `stress`
and `judge calibrate` measure (``RewardSettings``' defaults: tree leaves and row items averaged,
embedding router); every other stage-3 config says it is a variant, and the row-items variant is
gated on its own calibration. The TRL config builds that reward and scores a rollout as the mean of
its tree score and its points score; the verl config carries the same settings. A dataset without
the column the recipe needs is refused at start-up, naming it."""

from __future__ import annotations

import asyncio
import re

import pytest
from rt_fakes import FakeJudge
from rt_paths import REPO_ROOT

REPO = REPO_ROOT


@pytest.fixture
def cfg(monkeypatch):
    from training.trl_launcher import load_config

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    return load_config(REPO / "configs/trl/stage3_clinical_rubric.yaml")


def test_trl_recipe_settings(cfg):
    from reward.integrations.trl import RubricRewardFunc
    from reward.scoring import DEFAULT_SCORING_VARIANT
    from training.trl_launcher import build_reward_funcs

    r = cfg.reward
    assert (r.rubric_source, r.combine, r.router, r.scoring_variant) == ("both", "mean", "embedding",
                                                                         DEFAULT_SCORING_VARIANT)
    [func] = build_reward_funcs(cfg)
    assert isinstance(func, RubricRewardFunc)
    assert (func.rubric_source, func.combine, func.router_source, func.scoring_variant) == (
        "both", "mean", "embedding", DEFAULT_SCORING_VARIANT)
    assert r.confirm_failures and func.confirm_failures  # failure confirmation on in the tree recipe


def test_trl_recipe_rewards_with_tree_and_rows(cfg):
    from reward.integrations.trl import RubricRewardFunc

    r = cfg.reward
    prompt = [{"role": "user", "content": "Crushing chest pain spreading to my left arm for 20 minutes. What do I do?"}]
    rubrics = [{"criterion": "Tells the user to call emergency services now.", "points": 10},
               {"criterion": "Suggests waiting to see if the pain passes.", "points": -8}]
    good = "Call emergency services now; this could be a heart attack. Don't drive yourself."

    def decide(template, item):  # met when the reply says "emergency services", for rubric and leaves alike
        crit = item.criterion.lower()
        says_ems = "emergency services" in item.response.lower()
        if "waiting" in crit or "home" in crit or "fails to" in crit:
            return 0.0 if says_ems else 1.0
        return 1.0 if says_ems and ("emergency" in crit or "ambulance" in crit) else 0.0

    func = RubricRewardFunc(FakeJudge(decide), tree=r.tree, router=r.router, router_options=r.router_options,
                            rubric_source=r.rubric_source, scoring=r.scoring, combine=r.combine,
                            scoring_variant=r.scoring_variant)
    logged = {}
    [score] = asyncio.run(func([prompt], [good], rubrics=[rubrics],
                               log_metric=lambda k, v: logged.__setitem__(k, v)))
    rt = func._reward()
    [res] = asyncio.run(rt.score([{"id": "0", "prompt": prompt, "completion": good, "rubrics": rubrics}]))
    assert res.scoring_variant == r.scoring_variant and res.combine == "mean"
    assert res.points_score == pytest.approx(1.0)  # 10 of 10 points, the negative item not met
    assert res.tree_score is not None and len(res.leaves) > 0  # routed tree leaves were graded too
    assert score == pytest.approx((res.tree_score + res.points_score) / 2)
    assert logged[f"{func.__name__}/tree_score"] == pytest.approx(res.tree_score)


def test_verl_recipe_settings(monkeypatch):
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from reward.integrations.verl import load_settings
    from reward.scoring import DEFAULT_SCORING_VARIANT

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://judge.invalid:8000")
    with initialize_config_dir(config_dir=str(REPO / "configs" / "verl"), version_base=None):
        c = compose(config_name="stage3_clinical_rubric")
    OmegaConf.resolve(c)
    kw = OmegaConf.to_container(c.reward.custom_reward_function.reward_kwargs)
    s = load_settings(**kw)
    assert (s.rubric_source, s.combine, s.router, s.scoring_variant) == ("both", "mean", "embedding",
                                                                         DEFAULT_SCORING_VARIANT)
    assert s.confirm_failures
    assert c.actor_rollout_ref.actor.policy_loss.loss_mode == "gspo"


CONFIGS = REPO / "configs"
TRAINS = re.compile(r"(?:train\.sh|train_verl\.sh|--config)\s+(configs/\S*stage3_\w+\.yaml)")


def _trl_recipe(path, overrides=()):
    from training.trl_config import load_config

    return load_config(path, ["model=m", *overrides]).reward.rubric().recipe()


def _verl_settings(path, overrides=()):
    from reward.integrations.verl import load_settings
    from training.verl_preflight import compose

    cfg = compose(path, ["actor_rollout_ref.model.path=m", *overrides])
    from omegaconf import OmegaConf

    kw = OmegaConf.to_container(cfg.reward.custom_reward_function.reward_kwargs, resolve=True)
    return load_settings(**kw)


def test_the_configs_the_readme_and_docs_train_are_the_measured_recipe(monkeypatch):
    """The README's GPU example and the stage docs train these configs; their reward must be the one
    `score`, `stress` and `judge calibrate` measure by default (RewardSettings' defaults), so a
    calibration of the measured reward is a calibration of the trained one."""
    from reward.settings import RewardSettings, reward_flags

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    text = "\n".join((REPO / f).read_text(encoding="utf-8")
                     for f in ("README.md", "docs/stages.md", "docs/verl.md", "docs/training.md"))
    trained = set(TRAINS.findall(text))
    assert {"configs/verl/stage3_clinical_rubric.yaml", "configs/trl/stage3_clinical_rubric.yaml"} <= trained
    recipe = RewardSettings().record()
    assert {k: f["default"] for k, f in reward_flags().items() if k in recipe} == {  # what the commands measure
        k: v for k, v in recipe.items() if k in reward_flags()}
    for rel in sorted(trained):
        header = (REPO / rel).read_text(encoding="utf-8").split("\n\n")[0]
        if "VARIANT" in header:
            continue
        if "/verl/" in rel:
            pytest.importorskip("hydra")
            got = _verl_settings(REPO / rel).record()
        else:
            got = _trl_recipe(REPO / rel).record()
        assert got == recipe, f"{rel} trains another reward than the one measured: {got} != {recipe}"


def test_every_other_stage3_config_says_it_is_a_variant(monkeypatch):
    from reward.settings import RewardSettings

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    for path in sorted(CONFIGS.glob("*/stage3_*.yaml")):
        if path.parent.name == "verl":
            pytest.importorskip("hydra")
            got = _verl_settings(path).recipe()
        else:
            got = _trl_recipe(path)
        header = path.read_text(encoding="utf-8").split("\n\n")[0]
        assert got == RewardSettings() or "VARIANT" in header, f"{path} is neither the recipe nor says it is a variant"


def _facts(recipe):
    """The gate's view of a run of the judge IDENT (rt_calibration.run_facts) under ``recipe``."""
    from rt_calibration import run_facts

    from reward.calibration.binding import scoring_settings

    return run_facts(IDENT, reward_settings=scoring_settings(recipe))


def _gate(monkeypatch, tmp_path, record):
    """Point the launch checks at ``record`` for a judge whose identity is IDENT, asking no server."""
    import contextlib

    from reward.calibration.record import save_calibration
    from training import judge_gate, launch_checks

    monkeypatch.setattr(launch_checks, "judge_answers", lambda *a, **k: None)
    monkeypatch.setattr(judge_gate, "built_judge", lambda judge: contextlib.nullcontext())
    monkeypatch.setattr(judge_gate, "run_facts", lambda built, *, tree, recipe: _facts(recipe))
    path = tmp_path / f"calibration-{len(list(tmp_path.iterdir()))}.json"
    save_calibration(record, path)
    return str(path)


IDENT = "http:judge@test"


def _record(recipe):
    """A calibration that passes the gate, of ``recipe``."""
    from rt_calibration import record_with

    return record_with(IDENT, facts=_facts(recipe), detection=0.97, critical_false_pass=(1, 200), cases=800)


@pytest.mark.parametrize("trainer", ["trl", "verl"])
def test_a_calibration_of_one_stage3_reward_does_not_pass_the_gate_for_the_other(trainer, monkeypatch, tmp_path):
    """The recipe reads a failing verdict again and grades the tree's leaves beside the row items;
    the row-items variant reads each item once. A calibration is bound to the recipe it predicted
    for (`judge calibrate` with the run's reward options), and the gate lets each config train only
    on its own."""
    from reward.errors import InputError

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    if trainer == "verl":
        pytest.importorskip("hydra")
    settings = _verl_settings if trainer == "verl" else _trl_recipe
    recipes = {name: settings(CONFIGS / trainer / f"{name}.yaml")
               for name in ("stage3_clinical_rubric", "stage3_row_rubrics")}
    recipe_cal = _gate(monkeypatch, tmp_path, _record(recipes["stage3_clinical_rubric"]))
    rows_cal = _gate(monkeypatch, tmp_path, _record(recipes["stage3_row_rubrics"]))

    composed = {}

    def check(name, calibration):
        if trainer == "trl":
            from training.launch_checks import check_judge
            from training.trl_config import load_config

            check_judge(load_config(CONFIGS / "trl" / f"{name}.yaml",
                                    ["model=m", f"judge_gate.calibration={calibration}"]))
        else:
            from omegaconf import OmegaConf

            from training.verl_preflight import check_verl_judge, compose

            if name not in composed:  # composing verl's config is slow: once per config
                composed[name] = compose(CONFIGS / "verl" / f"{name}.yaml", ["actor_rollout_ref.model.path=m"])
            cfg = composed[name].copy()
            OmegaConf.update(cfg, "reward.custom_reward_function.reward_kwargs.judge_gate.calibration", calibration,
                             force_add=True)
            check_verl_judge(cfg)

    check("stage3_clinical_rubric", recipe_cal)
    check("stage3_row_rubrics", rows_cal)
    with pytest.raises(InputError, match="predicted for another recipe.*rubric_source 'both' calibrated, 'rows' in "
                                         "this run.*--rubric-source rows"):
        check("stage3_row_rubrics", recipe_cal)
    with pytest.raises(InputError, match="predicted for another recipe.*rubric_source 'rows' calibrated, 'both' in "
                                         "this run"):
        check("stage3_clinical_rubric", rows_cal)


def _no_rubrics_kwargs():
    return {"judge_prompt": [[{"role": "user", "content": "Chest pain, what now?"}]],
            "rubric": [[{"criterion": "Says to call emergency services.", "points": 10}]]}


@pytest.mark.parametrize("rubric_source", ["both", "rows"])
def test_a_dataset_without_rubrics_is_refused_naming_the_column(rubric_source):
    """Without a 'rubrics' column (here misspelt 'rubric') the recipe would quietly be the tree
    score alone; it is refused, naming the column and the columns the dataset has."""
    from reward.errors import InputError
    from reward.integrations.trl import RubricRewardFunc

    func = RubricRewardFunc(FakeJudge(lambda t, i: 1.0), router="static", rubric_source=rubric_source)
    for call in (lambda: func.check_columns(["prompt", *_no_rubrics_kwargs()]),
                 lambda: asyncio.run(func([[{"role": "user", "content": "x"}]], ["Call 911."], **_no_rubrics_kwargs(),
                                          log_metric=lambda k, v: None))):
        with pytest.raises(InputError) as err:
            call()
        msg = str(err.value)
        assert "no 'rubrics' column" in msg and "'rubric' is not read" in msg and "prompt, judge_prompt, rubric" in msg
    RubricRewardFunc(FakeJudge(lambda t, i: 1.0), router="static", rubric_source="tree").check_columns(["prompt"])


def test_the_trl_launcher_refuses_such_a_dataset_before_any_model_loads(cfg, monkeypatch):
    from datasets import Dataset

    from reward.errors import InputError
    from training import trl_launcher

    def no_model(*a, **k):
        raise AssertionError("reached the trainer")

    monkeypatch.setattr(trl_launcher, "grpo_args", no_model)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "x"}], "rubric": [{"criterion": "c", "points": 1}]}])
    with pytest.raises(InputError, match="no 'rubrics' column.*'rubric' is not read"):
        trl_launcher.make_trainer(cfg, data, trl_launcher.build_reward_funcs(cfg))


def test_a_verl_parquet_without_rubric_items_is_refused_at_start_up(tmp_path, monkeypatch, capsys):
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from training.verl_data import build_verl_parquet, check_parquet_columns
    from training.verl_preflight import main

    good = build_verl_parquet("healthbench", REPO / "tests/fixtures/healthbench_own.jsonl", tmp_path / "good.parquet")
    check_parquet_columns(good)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([{"data_source": "clinical_rubric", "prompt": [{"role": "user", "content": "x"}],
                                          "rubric": '[{"criterion": "c", "points": 1}]',
                                          "extra_info": {"judge_prompt": "x"}}]), bad)
    check_parquet_columns(bad, rubric_source="tree")  # the tree alone needs no items
    monkeypatch.delenv("RUBRICSTREE_JUDGE_URL", raising=False)
    rc = main([str(CONFIGS / "verl" / "stage3_clinical_rubric.yaml"), f"trainer.default_local_dir={tmp_path / 'ckpt'}",
               "actor_rollout_ref.model.path=Qwen/Qwen3-8B", f"data.train_files={good}", f"data.val_files={bad}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "bad.parquet" in err and "reward_model.ground_truth" in err and "'rubric' is not read" in err
    assert "data_source, prompt, rubric, extra_info" in err
