"""One settings model per concept (reward.settings): the same judge and stage keys work in TRL
YAML, verl YAML (reward_kwargs) and JudgeSettings itself; unknown keys fail naming the field; the
old import paths re-export the same objects; one env-variable syntax resolves the same way in our
loaders and in OmegaConf (verl's)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from rt_paths import REPO_ROOT

from reward.envvars import expand_env, resolve_env_string
from reward.errors import InputError
from reward.integrations.verl.settings import load_settings
from reward.settings import (
    ErrorRubricSettings,
    JudgeSettings,
    RubricRewardSettings,
    StageRewardSettings,
)

REPO = REPO_ROOT
TRL_STAGE2 = REPO / "configs" / "trl" / "stage2_error_rubric.yaml"
VERL_STAGE2 = REPO / "configs" / "verl" / "stage2_error_rubric.yaml"


@pytest.fixture
def env(monkeypatch):
    for var in ("RUBRICSTREE_JUDGE_URL", "RUBRICSTREE_JUDGE_MODEL", "RUBRICSTREE_JUDGE_SERVED",
                "RUBRICSTREE_VERL_CONFIG", "RUBRICSTREE_RUN_ROOT", "FV_DATA", "RT_TEST_UNSET"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _trl(overrides):
    from training.trl_launcher import load_config

    return load_config(TRL_STAGE2, ["judge.url=http://judge:8000", *overrides])


def _verl(tmp_path, text: str):
    f = tmp_path / "reward.yaml"
    f.write_text(text)
    return load_settings(f)


# ------------------------------------------------------------------ one key, three places
def test_judge_keys_mean_the_same_in_trl_yaml_verl_yaml_and_the_model(env, tmp_path):
    """max_retries could be set from verl YAML but not from TRL YAML before the settings merged."""
    keys = {"url": "http://judge:8000", "served_model": "tiny", "max_retries": 7, "timeout_s": 33.0,
            "concurrency": 5, "mode": "explain", "cache": False}
    direct = JudgeSettings(**keys)
    trl = _trl([f"judge.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in keys.items()]).judge
    verl = _verl(tmp_path, "judge:\n" + "".join(f"  {k}: {str(v).lower() if isinstance(v, bool) else v}\n"
                                                 for k, v in keys.items())).judge
    trl_in = trl.model_dump(include=set(keys))
    assert trl_in == verl.model_dump(include=set(keys)) == direct.model_dump(include=set(keys))
    assert trl_in["max_retries"] == 7 and trl_in["mode"] == "explain" and trl_in["cache"] is False
    assert type(trl) is type(verl) is JudgeSettings


def test_error_rubric_keys_mean_the_same_in_trl_and_verl(env, tmp_path):
    """show_key and strict were verl-only; the TRL reward block now reads them too and the
    reward function it builds carries them (no field copied by hand and dropped)."""
    from training.trl_launcher import build_reward_funcs

    cfg = _trl(["reward.show_key=false", "reward.strict=true", "reward.alpha=0.5", "reward.attempts=2"])
    [fn] = build_reward_funcs(cfg)
    verl = _verl(tmp_path, "error_rubric: {show_key: false, strict: true, alpha: 0.5, attempts: 2}\n").error_rubric
    # the TRL config's stage 2 max_tokens is 2048, set the same in the verl config
    assert fn.config == verl.model_copy(update={"max_tokens": cfg.reward.max_tokens})
    assert isinstance(fn.config, ErrorRubricSettings) and fn.config.show_key is False and fn.config.strict is True


def test_rubric_keys_reach_the_trl_reward_function(env):
    from training.trl_launcher import load_config

    cfg = load_config(REPO / "configs" / "trl" / "stage3_clinical_rubric.yaml",
                      ["judge.url=http://judge:8000", "reward.router=embedding", "reward.scoring=soft",
                       "reward.rubric_source=rows", "reward.combine=mean", "reward.on_failure=raise"])
    from training.trl_launcher import build_reward_funcs

    [fn] = build_reward_funcs(cfg)
    assert (fn.router_source, fn.scoring, fn.rubric_source, fn.combine, fn.on_failure) == (
        "embedding", "soft", "rows", "mean", "raise")
    assert fn.__name__ == cfg.reward.rubric().name
    assert fn.judge_spec == cfg.judge.resolved() and fn.judge_spec.url == "http://judge:8000"


def test_stage_reward_settings_are_the_union_of_the_stage_models():
    fields = set(StageRewardSettings.model_fields)
    assert set(ErrorRubricSettings.model_fields) <= fields
    assert set(RubricRewardSettings.model_fields) <= fields
    for model in (JudgeSettings, ErrorRubricSettings, RubricRewardSettings, StageRewardSettings):
        assert all(f.description for f in model.model_fields.values()), model.__name__


# ------------------------------------------------------------------ unknown keys
def test_an_unknown_judge_key_is_refused_naming_the_field_everywhere(env, tmp_path):
    with pytest.raises(ValidationError, match="max_retry"):
        JudgeSettings(max_retry=3)
    with pytest.raises(InputError) as trl:
        _trl(["judge.max_retry=3"])
    assert trl.value.field == "judge.max_retry" and str(TRL_STAGE2) in str(trl.value)
    with pytest.raises(InputError) as verl:
        _verl(tmp_path, "judge: {max_retry: 3}\n")
    assert verl.value.field == "judge.max_retry" and "reward.yaml" in str(verl.value)
    with pytest.raises(InputError) as inline:
        load_settings(error_rubric={"show_keys": False})
    assert inline.value.field == "error_rubric.show_keys" and inline.value.file == "reward_kwargs"


def test_a_bad_value_names_its_field(env, tmp_path):
    with pytest.raises(InputError) as trl:
        _trl(["judge.max_retries=-1"])
    assert trl.value.field == "judge.max_retries"
    with pytest.raises(InputError) as verl:
        _verl(tmp_path, "judge: {max_retries: -1}\n")
    assert verl.value.field == "judge.max_retries"


# ------------------------------------------------------------------ which judge is built
def test_resolved_judge_is_remote_or_in_process():
    remote = JudgeSettings(url="http://j:1", model="Qwen/Qwen3-32B").resolved()
    assert remote.url == "http://j:1" and remote.model is None  # model is never the tokenizer of a server
    local = JudgeSettings(url="http://j:1", model="/m", in_process=True).resolved()
    assert local.url is None and local.model == "/m"
    assert JudgeSettings(model="/m").resolved().in_process is True  # verl: model alone runs in process
    assert JudgeSettings(model="/m", in_process=False).resolved().model is None  # TRL: train.sh serves it


# ------------------------------------------------------------------ config paths
@pytest.mark.parametrize("path, name", [("pkg://reward.integrations.verl.compute_score", "compute_score"),
                                        ("pkg://reward.integrations.verl.manager", "RubricsTreeRewardManager")])
def test_verl_loads_the_config_paths(path, name):
    """The paths the shipped verl configs name load our function and manager."""
    pytest.importorskip("verl")
    from verl.utils.import_utils import load_extern_object

    from reward.integrations.verl import compute_score
    from reward.integrations.verl.manager import RubricsTreeRewardManager

    want = {"compute_score": compute_score, "RubricsTreeRewardManager": RubricsTreeRewardManager}[name]
    assert load_extern_object(path, name) is want


def test_the_shipped_verl_configs_name_only_current_paths():
    for cfg in sorted((Path(__file__).resolve().parents[2] / "configs" / "verl").glob("*.yaml")):
        paths = re.findall(r"pkg://(reward[\w.]*)", cfg.read_text(encoding="utf-8"))
        for mod in paths:
            assert importlib.util.find_spec(mod) is not None, f"{cfg.name}: {mod} is not a module"


# ------------------------------------------------------------------ one env-variable syntax
EXPRESSIONS = ["${oc.env:RT_TEST_SET,null}", "${oc.env:RT_TEST_UNSET,null}", "${oc.env:RT_TEST_UNSET,data/verl}",
               "${oc.env:RT_TEST_UNSET,128}", "${oc.env:RT_TEST_UNSET,'a b'}", "${oc.env:RT_TEST_UNSET, x}",
               "pre/${oc.env:RT_TEST_UNSET,runs/fv}/x", "${oc.env:RT_TEST_SET}/stage2", "${oc.env:RT_TEST_SET}",
               "no variable here"]


def test_env_expressions_resolve_as_omegaconf_resolves_them(env):
    omegaconf = pytest.importorskip("omegaconf")
    env.setenv("RT_TEST_SET", "http://judge:8000")
    for expr in EXPRESSIONS:
        want = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create({"k": expr}), resolve=True)["k"]
        assert resolve_env_string(expr) == want, expr


def test_an_unset_variable_without_default_names_the_field(env):
    with pytest.raises(InputError) as exc:
        expand_env({"judge": {"url": "${oc.env:RT_TEST_UNSET}"}})
    assert exc.value.field == "judge.url" and "RT_TEST_UNSET" in str(exc.value)


def test_the_shell_form_is_refused_with_the_oc_env_spelling(env):
    env.setenv("RT_TEST_SET", "v")
    for value in ("${RT_TEST_UNSET:-}", "${RT_TEST_SET:-x}/y"):
        with pytest.raises(InputError) as exc:
            expand_env({"judge": {"url": value}})
        assert exc.value.field == "judge.url" and "${oc.env:RT_TEST_" in str(exc.value)


def test_shipped_configs_use_one_env_syntax():
    import re

    shell = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}")
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        assert not shell.search(path.read_text()), f"{path}: use ${{oc.env:VAR,default}}"


@pytest.mark.parametrize("url", [None, "http://judge:8000"])
def test_trl_and_verl_configs_resolve_the_same_judge_env(env, url):
    """configs/trl and configs/verl name RUBRICSTREE_JUDGE_URL/_SERVED the same way; our loader
    and verl's (Hydra/OmegaConf) give the same judge settings, set or unset."""
    pytest.importorskip("omegaconf")
    from omegaconf import OmegaConf

    from training.trl_launcher import load_config

    if url:
        env.setenv("RUBRICSTREE_JUDGE_URL", url)
        env.setenv("RUBRICSTREE_JUDGE_SERVED", "tiny")
    trl = load_config(TRL_STAGE2).judge
    node = OmegaConf.load(VERL_STAGE2).reward.custom_reward_function.reward_kwargs
    kw = OmegaConf.to_container(node, resolve=True)
    verl = load_settings(**kw).judge
    assert (trl.url, trl.served_model) == (verl.url, verl.served_model) == (url, "tiny" if url else None)


def test_a_verl_settings_file_resolves_env_expressions(env, tmp_path):
    env.setenv("RUBRICSTREE_JUDGE_URL", "http://judge:8000")
    s = _verl(tmp_path, "judge:\n  url: ${oc.env:RUBRICSTREE_JUDGE_URL,null}\n  served_model: "
                        "${oc.env:RUBRICSTREE_JUDGE_SERVED,null}\n")
    assert s.judge.url == "http://judge:8000" and s.judge.served_model is None
