"""verl reward settings: :class:`VerlRewardSettings` and :func:`load_settings`.

verl merges ``reward.custom_reward_function.reward_kwargs`` into every ``compute_score`` call;
those keys, read over a YAML file of the same keys (``config=...`` or ``$RUBRICSTREE_VERL_CONFIG``;
``${oc.env:VAR,default}`` resolved as verl's own config would), validate against
:class:`VerlRewardSettings`. The judge and stage keys are the shared models of
``reward.settings``. Unknown keys fail naming the file and the field. Loading is cached, so a
per-rollout call costs a dictionary lookup.

verl's older reward keys (top-level ``custom_reward_function``, ``reward_model.reward_manager``
and the rest of ``verl/trainer/config/legacy_reward_impl.yaml``) are refused wherever they are set
(:func:`refuse_legacy_reward_keys`: the preflight and the reward manager): verl 0.9.1's trainer
(``main_ppo``) never reads them, and its fully-async trainer lets them replace ``reward.*``, our
settings, judge gate and failure policy with it. The message names the key to use instead.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError

from reward.calibration.gate import JudgeGateSettings
from reward.envvars import expand_env
from reward.errors import InputError
from reward.settings import ErrorRubricSettings, JudgeSettings, MonitorSettings, RewardSettings
from reward.stages.rollout_text import to_plain
from reward.textio import load_yaml

__all__ = ["CONFIG_ENV", "JUDGE_URL_ENV", "LEGACY_REWARD_KEYS", "VerlRewardSettings", "legacy_reward_keys",
           "load_settings", "refuse_legacy_reward_keys"]

CONFIG_ENV = "RUBRICSTREE_VERL_CONFIG"
JUDGE_URL_ENV = "RUBRICSTREE_JUDGE_URL"


class VerlRewardSettings(RewardSettings):
    """Settings of the verl reward (``reward_kwargs`` or a YAML file with the same keys).

    The stage 3 keys (tree, router, router_options, rubric_source, scoring, combine, variant,
    applicability, confirmation, ...) are :class:`reward.settings.RewardSettings`'s, with its
    defaults (the stage-3 recipe), and the reward is built from them as everywhere
    (``RewardSettings.build``); ``judge`` and ``error_rubric`` are the shared models, so a key that
    works in TRL YAML works here."""

    on_failure: Literal["raise", "neutral", "mask"] = Field(
        "neutral", description="raise: stop on a judge failure; neutral: group-mean score, flagged; mask: NaN, "
                               "left out of its group and the loss by the rubricstree_grpo advantage estimator "
                               "(reward.integrations.verl.advantage; the shipped configs)")
    fallback_score: float | None = Field(
        None, description="compute_score only (no group in sight): the flagged constant for a failed "
                          "rollout under 'neutral'; null raises. Prefer the reward manager")
    all_failed_score: float | None = Field(
        0.0, description="score of every rollout of a group with none scored (zero advantage); null raises")
    group_size: int | None = Field(
        None, ge=1, description="rollouts per prompt; default actor_rollout_ref.rollout.n (manager)")
    group_timeout_s: float = Field(
        600.0, gt=0, description="manager: longest wait of a failed rollout for its group's other rollouts")
    batch_window_s: float = Field(
        0.05, ge=0, description="manager: rollouts arriving within this window are scored in one batch")
    max_batch: int = Field(512, ge=1, description="manager: largest batch scored at once")
    monitors: MonitorSettings = Field(default_factory=MonitorSettings, description=(
        "gaming monitors' thresholds (reward.integrations.monitors): the manager warns when one is crossed"))
    log_records: bool = Field(
        False, description="clinical tree: each rollout's full score record (JSON) in the extra info as "
                           "rubric_record, so verl's rollout dumps (trainer.rollout_data_dir) open in "
                           "`rubricstree inspect`")
    judge: JudgeSettings = Field(
        default_factory=JudgeSettings, description="the judge (reward.settings.JudgeSettings: url, served_model, mode, "
                                                   f"max_retries, ...); url defaults to ${JUDGE_URL_ENV}")
    judge_gate: JudgeGateSettings = Field(
        default_factory=JudgeGateSettings, description=(
            "stage 3: the launch refuses a judge whose calibration the reward cannot survive (checked by "
            "training.verl_preflight before Ray starts; reward.calibration.gate)"))
    error_rubric: ErrorRubricSettings = Field(
        default_factory=ErrorRubricSettings, description="stage 2 (reward.settings.ErrorRubricSettings: alpha, s_max, "
                                                         "form, show_key, strict, ...)")

    def judge_settings(self) -> JudgeSettings:
        """The judge, its url defaulting to ``$RUBRICSTREE_JUDGE_URL`` when neither url nor model is set."""
        j = self.judge
        if not j.url and not j.model and os.environ.get(JUDGE_URL_ENV):
            return j.model_copy(update={"url": os.environ[JUDGE_URL_ENV]})
        return j


@lru_cache(maxsize=64)
def _settings_cached(path: str | None, mtime: float | None, inline_json: str) -> VerlRewardSettings:
    data: dict[str, Any] = {}
    src = path or "reward_kwargs"
    if path:
        try:
            loaded = load_yaml(path)
        except yaml.YAMLError as exc:
            raise InputError(f"invalid YAML: {exc}", file=path) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise InputError("the settings must be a mapping", file=path)
        try:
            loaded = expand_env(loaded or {})
        except InputError as exc:
            raise InputError(exc.reason, file=path, field=exc.field) from exc
        data.update(loaded)
    inline = json.loads(inline_json)
    data.update(inline)
    try:
        return VerlRewardSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or None
        key = where.split(".")[0] if where else None
        file = "reward_kwargs" if key in inline else src
        raise InputError(first.get("msg", str(exc)), file=file, field=where) from exc


def load_settings(config: str | os.PathLike | None = None, **inline: Any) -> VerlRewardSettings:
    """Settings from a YAML file (``config``, else ``$RUBRICSTREE_VERL_CONFIG``) overridden by
    ``inline`` keys. Cached, so a per-rollout call costs a dictionary lookup (the file's
    ``${oc.env:...}`` are resolved when it is first read, or read again after it changes).

    Raises:
        InputError: the file is missing or invalid, or a key is unknown or has a bad value.
    """
    path = str(config) if config else os.environ.get(CONFIG_ENV) or None
    mtime = None
    if path:
        if not Path(path).is_file():
            raise InputError("settings file not found", file=path)
        mtime = Path(path).stat().st_mtime
    inline_json = json.dumps(to_plain(inline), sort_keys=True, default=str)
    return _settings_cached(path, mtime, inline_json)


# verl 0.9.1's older reward keys (verl/trainer/config/legacy_reward_impl.yaml), longest prefix
# first, and where each lives now (verl.experimental.reward_loop.migrate_legacy_reward_impl)
LEGACY_REWARD_KEYS = {
    "custom_reward_function": "reward.custom_reward_function",
    "reward_model.reward_manager": "reward.reward_manager.name",
    "reward_model.num_workers": "reward.num_workers",
    "reward_model.reward_loop_source": "reward.reward_manager.source",
    "reward_model.reward_loop_module_path": "reward.reward_manager.module.path",
    "reward_model.reward_loop_class_name": "reward.reward_manager.name",
    "reward_model.reward_kwargs": "reward.reward_kwargs",
    "reward_model.model.path": "reward.reward_model.model_path",
    "reward_model": "reward.reward_model",
}


def _leaves(node: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}.{k}")]
    return [(prefix, node)]


def legacy_reward_keys(config: Any) -> list[tuple[str, str]]:
    """``(older key, the key to use)`` for every verl reward key of the older layout that
    ``config`` (verl's composed config, or a mapping) sets to something other than null."""
    found = []
    for top in ("custom_reward_function", "reward_model"):
        try:
            node = config.get(top) if hasattr(config, "get") else None
            plain = to_plain(node)
        except Exception as exc:  # an interpolation that does not resolve is set all the same
            found.append((top, f"{LEGACY_REWARD_KEYS[top]} ({exc})"))
            continue
        for key, value in _leaves(plain, top):
            if value is None or value == {} or value == []:
                continue
            old = next(k for k in LEGACY_REWARD_KEYS if key == k or key.startswith(k + "."))
            found.append((key, LEGACY_REWARD_KEYS[old] + key[len(old):]))
    return found


def refuse_legacy_reward_keys(config: Any, *, file: str | None = None) -> None:
    """Refuse verl's older reward keys (see the module docstring), naming each and its new key.

    Raises:
        InputError: one or more is set.
    """
    found = legacy_reward_keys(config)
    if not found:
        return
    keys = "; ".join(f"{old}: set {new} instead" for old, new in found)
    raise InputError(f"verl's older reward key{'s are' if len(found) > 1 else ' is'} set ({keys}). verl 0.9.1's "
                     "trainer ignores them and its fully-async trainer lets them replace the reward block, and with "
                     "it our reward settings, judge gate and failure policy; the stage configs keep everything under "
                     "reward: (docs/verl.md)", file=file, field=found[0][0])
