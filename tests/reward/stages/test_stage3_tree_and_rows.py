"""The stage-3 recipe that rewards with the rubric tree and the row rubrics together: the TRL
config builds that reward (both sources, mean, embedding router, the chosen scoring variant) and
scores a rollout as the mean of its tree score and its points score; the verl config carries the
same settings."""

from __future__ import annotations

import asyncio

import pytest
from rt_fakes import FakeJudge
from rt_paths import REPO_ROOT

REPO = REPO_ROOT


@pytest.fixture
def cfg(monkeypatch):
    from training.trl_launcher import load_config

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    return load_config(REPO / "configs/trl/stage3_tree_and_rows.yaml")


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
        c = compose(config_name="stage3_tree_and_rows")
    OmegaConf.resolve(c)
    kw = OmegaConf.to_container(c.reward.custom_reward_function.reward_kwargs)
    s = load_settings(**kw)
    assert (s.rubric_source, s.combine, s.router, s.scoring_variant) == ("both", "mean", "embedding",
                                                                         DEFAULT_SCORING_VARIANT)
    assert s.confirm_failures
    assert c.actor_rollout_ref.actor.policy_loss.loss_mode == "gspo"
