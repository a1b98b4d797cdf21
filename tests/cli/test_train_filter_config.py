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


@pytest.mark.parametrize("name", ["stage3_row_rubrics.yaml", "stage3_clinical_rubric.yaml"])
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
    mcq = CliRunner().invoke(app, ["train", "filter", "--data", str(data), "--model", "m", "--out", str(tmp_path / "o"),
                                   "--max-new-tokens", "8", "--config", str(cfg)])
    assert mcq.exit_code == 2 and "--kind healthbench" in mcq.output


@pytest.mark.parametrize("name", ["stage3_row_rubrics.yaml", "stage3_clinical_rubric.yaml"])
def test_a_verl_config_gives_the_settings_its_reward_function_scores_with(name, monkeypatch):
    """As verl's reward reads reward_kwargs (reward.integrations.verl.settings.load_settings)."""
    import yaml

    from reward.integrations.verl.settings import load_settings

    path = ROOT / "configs" / "verl" / name
    monkeypatch.delenv("RUBRICSTREE_VERL_CONFIG", raising=False)
    kwargs = yaml.safe_load(path.read_text())["reward"]["custom_reward_function"]["reward_kwargs"]
    want = load_settings(**{k: v for k, v in kwargs.items() if k != "judge"})
    got = filter_reward_settings(path, None)
    for key in ("rubric_source", "router", "combine", "scoring", "clip_below_zero", "format_failure_score",
                "applicability", "confirm_failures", "grade"):
        assert getattr(got, key) == getattr(want, key), key
    assert got.rubric_source == kwargs["rubric_source"]


def test_a_verl_settings_file_named_in_reward_kwargs_is_read(tmp_path, monkeypatch):
    """reward_kwargs.config (or $RUBRICSTREE_VERL_CONFIG) names a settings file under the inline keys."""
    monkeypatch.delenv("RUBRICSTREE_VERL_CONFIG", raising=False)
    settings = tmp_path / "settings.yaml"
    settings.write_text("router: static\nscoring_variant: penalty\nrubric_source: both\n")
    cfg = tmp_path / "verl.yaml"
    cfg.write_text(f"reward:\n  custom_reward_function:\n    reward_kwargs:\n      config: {settings}\n"
                   "      rubric_source: tree\n")
    got = filter_reward_settings(cfg, None)
    assert (got.router, got.scoring_variant, got.rubric_source) == ("static", "penalty", "tree")
    monkeypatch.setenv("RUBRICSTREE_VERL_CONFIG", str(settings))
    plain = tmp_path / "plain.yaml"
    plain.write_text("reward:\n  custom_reward_function:\n    reward_kwargs: {combine: tree}\n")
    got = filter_reward_settings(plain, None)
    assert (got.router, got.scoring_variant, got.combine) == ("static", "penalty", "tree")


def test_a_bad_verl_reward_kwarg_names_its_path(tmp_path, monkeypatch):
    monkeypatch.delenv("RUBRICSTREE_VERL_CONFIG", raising=False)
    cfg = tmp_path / "verl.yaml"
    cfg.write_text("reward:\n  custom_reward_function:\n    reward_kwargs:\n      combine: median\n")
    with pytest.raises(InputError) as e:
        filter_reward_settings(cfg, None)
    assert e.value.file == str(cfg) and e.value.field == "reward.custom_reward_function.reward_kwargs.combine"


def test_a_config_of_another_stage_or_shape_is_refused(tmp_path):
    stage1 = ROOT / "configs" / "trl" / "stage1_mcq.yaml"
    with pytest.raises(InputError, match="trains stage 'mcq'") as e:
        filter_reward_settings(stage1, None)
    assert e.value.field == "stage"
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="YAML mapping"):
        filter_reward_settings(listed, None)
    with pytest.raises(InputError) as e:
        filter_reward_settings(ROOT / "configs" / "trl" / "stage3_clinical_rubric.yaml", "all")
    assert e.value.field == "--rubric-source" and e.value.file is None
