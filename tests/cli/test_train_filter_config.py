"""``train filter --kind healthbench --config`` scores with the stage's own reward settings.

The stage-3 launcher filters with its config's ``reward:`` block (``training.trl_launcher.filter_reward``);
the stand-alone filter used the defaults whatever the run would train on. Both now read the same block.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reward.errors import InputError
from rubricstree.train import filter_reward_settings

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_config_the_filter_scores_the_rows_with_the_defaults():
    s = filter_reward_settings(None, None)
    assert s.rubric_source == "rows"
    assert s.applicability and s.confirm_failures  # the stage-3 defaults
    assert filter_reward_settings(None, "both").rubric_source == "both"


def test_the_config_reward_block_is_what_the_filter_scores_with(tmp_path):
    cfg = tmp_path / "stage3.yaml"
    cfg.write_text("model: ${oc.env:FV_STAGE2_MODEL_NOT_SET_HERE}\nstage: clinical_rubric\n"
                   "reward:\n  router: static\n  rubric_source: both\n  scoring_variant: penalty\n"
                   "  applicability: false\n  confirm_failures: false\n  combine: tree\n")
    s = filter_reward_settings(cfg, None)
    # the rest of the file (a model that names the previous stage's export) is not read
    assert (s.router, s.rubric_source, s.scoring_variant, s.applicability, s.confirm_failures, s.combine) == (
        "static", "both", "penalty", False, False, "tree")
    assert filter_reward_settings(cfg, "rows").rubric_source == "rows"  # the flag wins


@pytest.mark.parametrize("name", ["stage3_clinical_rubric.yaml", "stage3_tree_and_rows.yaml"])
def test_the_filter_and_the_launcher_read_the_same_settings(name, monkeypatch):
    from training.trl_config import load_config

    path = ROOT / "configs" / "trl" / name
    monkeypatch.setenv("FV_STAGE2_MODEL", "Qwen/Qwen3-8B")
    assert filter_reward_settings(path, None) == load_config(path).reward.rubric()


def test_a_bad_reward_block_names_the_file_and_the_field(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("reward:\n  scoring_variant: strict\n")
    with pytest.raises(InputError) as e:
        filter_reward_settings(cfg, None)
    assert e.value.file == str(cfg) and e.value.field == "reward.scoring_variant"
    with pytest.raises(InputError, match="not found"):
        filter_reward_settings(tmp_path / "missing.yaml", None)


def test_the_cli_takes_the_config(tmp_path):
    from typer.testing import CliRunner

    from rubricstree import app

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("reward:\n  scoring_variant: strict\n")
    data = tmp_path / "rows.jsonl"
    data.write_text("")
    res = CliRunner().invoke(app, ["train", "filter", "--data", str(data), "--model", "m", "--out", str(tmp_path / "o"),
                                   "--kind", "healthbench", "--max-new-tokens", "8", "--judge-url",
                                   "http://127.0.0.1:9/v1", "--config", str(cfg)])
    assert res.exit_code == 2, res.output
    assert "reward.scoring_variant" in res.output and str(cfg) in res.output


@pytest.mark.parametrize("name", ["stage3_clinical_rubric.yaml", "stage3_tree_and_rows.yaml"])
def test_a_verl_config_gives_the_settings_its_reward_function_scores_with(name, monkeypatch):
    """verl reads the same keys from reward_kwargs (reward.integrations.verl.settings)."""
    import yaml

    from reward.integrations.verl.settings import VerlRewardSettings
    from reward.settings import RubricScoringSettings

    path = ROOT / "configs" / "verl" / name
    monkeypatch.delenv("RUBRICSTREE_JUDGE_URL", raising=False)
    kwargs = yaml.safe_load(path.read_text())["reward"]["custom_reward_function"]["reward_kwargs"]
    want = VerlRewardSettings.model_validate(kwargs).model_dump(include=set(RubricScoringSettings.model_fields))
    got = filter_reward_settings(path, None)
    assert got.model_dump(include=set(RubricScoringSettings.model_fields)) == want
    assert got.rubric_source == kwargs.get("rubric_source", got.rubric_source)


def test_a_bad_verl_reward_kwarg_names_its_path(tmp_path):
    cfg = tmp_path / "verl.yaml"
    cfg.write_text("reward:\n  custom_reward_function:\n    reward_kwargs:\n      combine: median\n")
    with pytest.raises(InputError) as e:
        filter_reward_settings(cfg, None)
    assert e.value.field == "reward.custom_reward_function.reward_kwargs.combine"
