"""verl, ``on_failure: mask``: a rollout the judge failed on is left out of its group, not given
the group's mean. The ``rubricstree_grpo`` estimator (reward.integrations.verl.advantage) gives
the scored rollouts exactly verl's own GRPO advantages over the scored ones alone, the failed
ones advantage 0; the group-mean stand-in instead inflates the siblings' advantages (x1.53 when
4 of 8 fail). The streaming scorer returns the failed rollout at once (no wait for the group),
flagged, and the manager refuses mask without the estimator configured."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from rt_fakes import FakeJudge

from reward.integrations.verl import RewardContext, Sample, StreamingScorer, VerlRewardSettings, group_policy
from reward.integrations.verl.advantage import ESTIMATOR, masked_grpo_advantage, register

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

CONV = [{"role": "user", "content": "Crushing chest pain for 20 minutes and sweating. What now?"}]
RUBRICS = [{"criterion": "emergency services", "points": 8}, {"criterion": "ambulance", "points": 4},
           {"criterion": "wait at home", "points": -6}]


def _judge() -> FakeJudge:
    def decide(template, item):
        if "FAIL" in item.response:
            raise RuntimeError("judge down")
        return 1.0 if item.criterion.lower() in item.response.lower() else 0.0

    return FakeJudge(decide)


def _sample(text: str, uid: str) -> Sample:
    return Sample("healthbench", text, json.dumps(RUBRICS), {"judge_prompt": CONV, "prompt_id": "p"}, uid=uid)


def _rewards(scores: list[float], length: int = 5):
    r = torch.zeros(len(scores), length)
    r[:, -1] = torch.tensor(scores)
    return r, torch.ones(len(scores), length)


def test_failed_rollouts_are_left_out_of_their_group_as_verl_would_leave_them():
    verl_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    nan = float("nan")
    scores = [1.0, 0.2, nan, 0.7, nan, nan, 0.4, nan]  # 4 of 8 failed
    index = np.array(["g"] * 8, dtype=object)
    rew, mask = _rewards(scores)
    adv, ret = masked_grpo_advantage(rew, mask, index)
    ok = [i for i, s in enumerate(scores) if not math.isnan(s)]
    r_ok, m_ok = _rewards([scores[i] for i in ok])
    want, _ = verl_algos.compute_grpo_outcome_advantage(r_ok, m_ok, np.array(["g"] * len(ok), dtype=object))
    assert torch.allclose(adv[ok], want, atol=1e-6) and torch.equal(adv, ret)
    assert adv[[i for i in range(8) if i not in ok]].abs().max() == 0  # no gradient from a failed rollout
    assert not torch.isnan(rew).any() and rew[2, -1] == 0  # rewards cleaned in place for verl's metrics
    # the group-mean stand-in (on_failure: neutral) shrinks the std: siblings' advantages x sqrt(7/3)
    mean = sum(scores[i] for i in ok) / len(ok)
    r_mean, m_mean = _rewards([mean if math.isnan(s) else s for s in scores])
    neutral, _ = verl_algos.compute_grpo_outcome_advantage(r_mean, m_mean, index)
    ratio = (neutral[ok, -1] / adv[ok, -1]).tolist()
    assert ratio == pytest.approx([math.sqrt(7 / 3)] * 4, rel=1e-4)


def test_a_group_with_one_scored_rollout_and_separate_groups():
    rew, mask = _rewards([0.5, float("nan"), 0.9, 0.1])
    adv, _ = masked_grpo_advantage(rew, mask, np.array(["a", "a", "b", "b"], dtype=object))
    assert adv[0, -1] == 0 and adv[1, -1] == 0  # one scored: no baseline, no advantage (not the raw 0.5)
    assert adv[2, -1] > 0 > adv[3, -1]


def test_register_puts_the_estimator_in_verls_registry():
    verl_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    register()
    register()  # idempotent (Ray runs the hook in every worker)
    assert verl_algos.get_adv_estimator_fn(ESTIMATOR) is masked_grpo_advantage


def test_mask_policy_scores_failed_rollouts_nan_flagged_without_waiting():
    c = RewardContext(VerlRewardSettings(rubric_source="rows", on_failure="mask", batch_window_s=0.01,
                                         group_timeout_s=600), judge=_judge())

    async def go():
        s = StreamingScorer(c.settings, c, group_size=4)
        # the group never completes: a neutral stand-in would wait group_timeout_s for its siblings
        out = await asyncio.wait_for(asyncio.gather(s.score(_sample("FAIL", "g")),
                                                    s.score(_sample("Call emergency services.", "g"))), 30)
        return out, s

    (failed, good), s = asyncio.run(go())
    assert math.isnan(failed["score"]) and failed["unscored"] is True and "masked" in failed["unscored_reason"]
    assert good["score"] == pytest.approx(8 / 12, abs=1e-9) and good["unscored"] is False
    assert s.counts["masked"] == 1
    from reward.integrations.verl import score_samples

    samples = [_sample("FAIL", "g"), _sample("Call emergency services.", "g")]
    out = group_policy(samples, asyncio.run(score_samples(samples, c)), c.settings)
    assert math.isnan(out[0]["score"]) and out[1]["score"] == pytest.approx(8 / 12, abs=1e-9)


def test_the_manager_refuses_mask_without_the_estimator():
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    from reward.integrations.verl.manager import RubricsTreeRewardManager

    settings = VerlRewardSettings(rubric_source="rows", on_failure="mask")
    cfg = {"actor_rollout_ref": {"rollout": {"n": 4}}, "reward": {"num_workers": 1},
           "algorithm": {"adv_estimator": "grpo"}}
    with pytest.raises(ValueError, match=ESTIMATOR):
        RubricsTreeRewardManager(OmegaConf.create(cfg), None, context=RewardContext(settings, judge=_judge()))
    cfg["algorithm"]["adv_estimator"] = ESTIMATOR
    m = RubricsTreeRewardManager(OmegaConf.create(cfg), None, context=RewardContext(settings, judge=_judge()))
    assert m.group_size == 4


@pytest.mark.parametrize("name", ["stage2_error_rubric", "stage3_row_rubrics", "stage3_clinical_rubric"])
def test_the_verl_configs_mask_failed_rollouts(name):
    import yaml
    from rt_paths import REPO_ROOT

    raw = yaml.safe_load((REPO_ROOT / "configs/verl" / f"{name}.yaml").read_text())
    assert raw["algorithm"]["adv_estimator"] == ESTIMATOR
    assert raw["reward"]["custom_reward_function"]["reward_kwargs"]["on_failure"] == "mask"
    hook = raw["ray_kwargs"]["ray_init"]["runtime_env"]["worker_process_setup_hook"]
    assert hook == "reward.integrations.verl.advantage.register"


def _val_inputs(rewards: list[float]):
    n = len(rewards)
    sources = np.array(["healthbench"] * n, dtype=object)
    uids = [f"p{i // 2}" for i in range(n)]
    return sources, uids, {"reward": list(rewards), "score": list(rewards)}


def _finite(metrics: dict) -> bool:
    return all(math.isfinite(float(v)) for v in metrics.values())


def test_validation_metrics_leave_masked_rollouts_out_and_count_them():
    """verl's own validation statistics (no estimator runs there) turn NaN with one masked rollout;
    guarded, they are the statistics of the scored rollouts, plus the masked count. ``update`` is
    what RayPPOTrainer._val_metrics_update computes (verl's process_validation_metrics, flattened;
    ray_trainer itself needs packages this CPU venv lacks)."""
    metric_utils = pytest.importorskip("verl.trainer.ppo.metric_utils")
    from reward.integrations.verl.advantage import guard_validation_metrics

    def update(self, data_sources, sample_uids, infos, sample_turns):
        out = metric_utils.process_validation_metrics(data_sources, sample_uids, infos)
        return {f"val/{src}/{var}/{m}": v for src, d in out.items() for var, mv in d.items() for m, v in mv.items()}

    rewards = [0.2, float("nan"), 0.6, 0.8]
    assert not _finite(update(None, *_val_inputs(rewards), []))  # what verl reports unguarded
    guarded = guard_validation_metrics(update)
    out = guarded(None, *_val_inputs(rewards), [])
    assert _finite(out) and out["val-aux/healthbench/masked_rollouts"] == 1
    # p0 keeps its scored 0.2 only; mean@2 is over the prompts with two scored rollouts: p1's 0.6, 0.8
    assert out["val/healthbench/reward/mean@2"] == pytest.approx(0.7, abs=1e-9)
    all_masked = guarded(None, *_val_inputs([float("nan")] * 4), [])
    assert all_masked == {"val-aux/healthbench/masked_rollouts": 4}
    assert guard_validation_metrics(guarded) is guarded  # wrapped once, however often the hook runs


def test_register_guards_the_trainer_verl_runs_with_its_own_arguments():
    """``register()`` (the Ray worker hook) guards both of verl's trainers, the v1 one that
    ``trainer.use_v1`` (the default) runs included, and the guarded method is verl's own: called as
    the v1 trainer calls it (``expected_acc_counts=``), the statistics are finite with the count."""
    pytest.importorskip("verl.trainer.ppo.v1.trainer_base")
    pytest.importorskip("verl.trainer.ppo.ray_trainer")
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from reward.integrations.verl.advantage import register

    register()
    for trainer in (PPOTrainer, RayPPOTrainer):
        assert getattr(trainer._val_metrics_update, "_rubricstree_guard", False), trainer
    sources, uids, infos = _val_inputs([0.2, float("nan"), 0.6, 0.8])
    # verl's methods read nothing from ``self``
    out = PPOTrainer._val_metrics_update(None, sources, uids, infos, [], expected_acc_counts=None)
    assert _finite(out) and out["val-aux/healthbench/masked_rollouts"] == 1
    legacy = RayPPOTrainer._val_metrics_update(None, sources, uids, infos, [])
    assert _finite(legacy) and legacy["val-aux/healthbench/masked_rollouts"] == 1
