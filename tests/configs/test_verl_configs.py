"""configs/verl/*.yaml compose on top of verl 0.9.1's own ppo_trainer.yaml, pass verl's
``validate_config``, build verl's actor/rollout config dataclasses, and load our reward function
and manager the way verl does (CPU only; the trainer itself needs GPUs)."""

from __future__ import annotations

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("verl")
pytest.importorskip("hydra")

CONFIGS = REPO_ROOT / "configs" / "verl"


def compose(name: str, overrides: list[str] | None = None):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        cfg = hydra_compose(config_name=name, overrides=overrides or [])
    OmegaConf.resolve(cfg)
    return cfg


@pytest.mark.parametrize("name, response_len, prompt_len, manager", [
    ("stage1_mcq", 10000, 2048, "naive"),
    ("stage2_error_rubric", 10000, 2048, "RubricsTreeRewardManager"),
    ("stage3_clinical_rubric", 16000, 4000, "RubricsTreeRewardManager"),
])
def test_stage_config(name, response_len, prompt_len, manager, monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://judge.invalid:8000")
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    cfg = compose(name)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    # the paper's recipe
    assert actor.policy_loss.loss_mode == "gspo" and actor.loss_agg_mode == "seq-mean-token-mean"
    assert actor.optim.lr == 1e-6 and actor.optim.lr_scheduler_type == "cosine" and actor.optim.lr_warmup_steps == 5
    assert list(actor.optim.betas) == [0.9, 0.95]
    assert cfg.data.train_batch_size == 32 and rollout.n == 8 and rollout.name == "vllm"
    assert rollout.response_length == response_len and rollout.prompt_length == prompt_len
    assert actor.ppo_max_token_len_per_gpu >= prompt_len + response_len
    assert "wandb" in cfg.trainer.logger and cfg.actor_rollout_ref.model.path == "Qwen/Qwen3-8B"
    assert not need_reference_policy(cfg)
    # our reward, loaded the way verl loads it
    fn = get_custom_reward_fn(cfg)
    assert fn.func.__name__ == "_call_with_kwargs_async" and fn.args[0].__module__ == "reward.integrations.verl.compute_score"
    assert resolve_reward_manager_cls(cfg).__name__ == (
        "NaiveRewardManager" if manager == "naive" else manager)
    if manager != "naive":
        kw = fn.args[1]
        assert kw["judge"]["url"] == "http://judge.invalid:8000" and cfg.reward.num_workers == 1
        from reward.integrations.verl import load_settings

        load_settings(**kw)  # every key is one of ours


def test_stage3_without_judge_env_leaves_url_unset(monkeypatch):
    monkeypatch.delenv("RUBRICSTREE_JUDGE_URL", raising=False)
    cfg = compose("stage3_clinical_rubric", ["actor_rollout_ref.model.path=Qwen/Qwen3-4B", "trainer.total_epochs=3"])
    assert cfg.reward.custom_reward_function.reward_kwargs.judge.url is None
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen3-4B" and cfg.trainer.total_epochs == 3


def test_judge_env_vars_mean_the_same_as_in_the_trl_configs(monkeypatch):
    """RUBRICSTREE_JUDGE_MODEL is the model to serve (TRL: judge.model, e.g. Qwen/Qwen3-32B);
    the served name is RUBRICSTREE_JUDGE_SERVED in both launchers. Reading the model name as the
    served name would send every request to a model the server does not serve."""
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://judge.invalid:8000")
    monkeypatch.setenv("RUBRICSTREE_JUDGE_MODEL", "Qwen/Qwen3-32B")
    monkeypatch.setenv("RUBRICSTREE_JUDGE_SERVED", "Qwen3-32B")
    for name in ("stage2_error_rubric", "stage3_clinical_rubric"):
        judge = compose(name).reward.custom_reward_function.reward_kwargs.judge
        assert judge.served_model == "Qwen3-32B", name


def test_stage2_error_rubric_settings_match_the_trl_config(monkeypatch):
    """The same stage 2 reward in both trainers: the formula and the judge's decoding budget."""
    from training.trl_launcher import load_config

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://judge.invalid:8000")
    trl = load_config(REPO_ROOT / "configs" / "trl" / "stage2_error_rubric.yaml").reward
    verl_kw = compose("stage2_error_rubric").reward.custom_reward_function.reward_kwargs.error_rubric
    assert (verl_kw.alpha, verl_kw.s_max, verl_kw.form, verl_kw.max_tokens) == \
        (trl.alpha, trl.s_max, trl.form, trl.max_tokens)


@pytest.mark.parametrize("alpha", [1.0, 0.7, 0.0])
def test_stage2_convex_ablation_runs_from_overrides(alpha):
    """The paper's alpha ablation with the convex form, in verl (Hydra overrides) and TRL (--set)."""
    from omegaconf import OmegaConf

    from reward.integrations.verl import VerlRewardSettings
    from reward.stages.error_rubric import combine
    from training.trl_config import load_config

    kw = "reward.custom_reward_function.reward_kwargs.error_rubric"
    cfg = compose("stage2_error_rubric", [f"{kw}.form=convex", f"{kw}.alpha={alpha}"])
    kwargs = OmegaConf.to_container(cfg.reward.custom_reward_function.reward_kwargs, resolve=True)
    er = VerlRewardSettings.model_validate(kwargs).error_rubric
    assert (er.form, er.alpha) == ("convex", alpha)
    trl = load_config(CONFIGS / "../trl/stage2_error_rubric.yaml",
                      ["reward.form=convex", f"reward.alpha={alpha}"]).reward.error_rubric()
    assert (trl.form, trl.alpha) == ("convex", alpha)
    assert combine(1.0, 0.5, alpha=trl.alpha, form=trl.form) == pytest.approx(alpha * 0.5 + (1 - alpha))


@pytest.mark.parametrize("name", ["stage1_mcq", "stage2_error_rubric", "stage3_clinical_rubric",
                                  "stage3_row_rubrics"])
def test_verl_corrects_the_vllm_trainer_mismatch_as_the_trl_config_does(name, monkeypatch):
    """TRL's token_truncate with clip_max 3 in every TRL config; verl's decoupled token-level rollout
    correction with the same cap, built into verl's own RolloutCorrectionConfig, computed from the
    rollout's log-probs (calculate_log_probs) and not bypassing the recomputed old log-probs."""
    from verl.trainer.config.algorithm import RolloutCorrectionConfig
    from verl.utils.config import omega_conf_to_dataclass

    from training.trl_config import load_config

    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://judge.invalid:8000")
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", "unused")
    cfg = compose(name)
    corr = omega_conf_to_dataclass(cfg.algorithm.rollout_correction, RolloutCorrectionConfig)
    trl = load_config(REPO_ROOT / "configs" / "trl" / f"{name}.yaml").grpo
    assert trl["vllm_importance_sampling_correction"] and trl["vllm_importance_sampling_mode"] == "token_truncate"
    assert corr.rollout_is == "token" and not corr.bypass_mode and corr.rollout_rs is None
    assert float(corr.rollout_is_threshold) == trl["vllm_importance_sampling_clip_max"]
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs
