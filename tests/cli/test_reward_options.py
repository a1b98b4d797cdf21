"""The reward options (``rubricstree.reward_options``): generated from ``RewardSettings``, with its
defaults (the stage-3 recipe) in every command that scores; a bad value names its flag; a new
field is an option at once; every settings field reaches ``RubricReward`` by name; progress goes
to stderr under ``--json`` and ``--quiet`` silences it; no option lacks help and no flag means two
things."""

from __future__ import annotations

import inspect
import json

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from reward.settings import RewardSettings, reward_flags
from rubricstree import app
from rubricstree.reward_options import reward_options

runner = CliRunner()
SCORING = [("score",), ("stress",), ("demo",), ("meta-eval", "run"), ("meta-eval", "stability"),
           ("optimize", "revise"), ("optimize", "best-of-n")]


def _command(path: tuple[str, ...]):
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def _options(cmd) -> dict[str, object]:
    return {o: p for p in cmd.params if getattr(p, "param_type_name", "") == "option" for o in p.opts}


@pytest.mark.parametrize("path", SCORING, ids=" ".join)
def test_every_command_that_scores_defaults_to_the_stage3_recipe(path):
    opts = _options(_command(path))
    recipe = RewardSettings()
    for name, f in reward_flags().items():
        param = opts[f["flag"]]
        if name == "router_options":
            assert param.default == [] and recipe.router_options == {}
            continue
        default = param.default
        want = getattr(recipe, name)
        assert (str(default) if name == "format_failure_score" else default) == \
            (str(want) if name == "format_failure_score" else want), (path, f["flag"])


def test_the_parsed_settings_and_a_bad_value(tmp_path):
    seen = {}
    demo = typer.Typer()

    @demo.command()
    @reward_options()
    def run(reward: RewardSettings = None) -> None:
        seen["reward"] = reward

    res = runner.invoke(demo, ["--router", "static", "--router-option", "axes=[accuracy]", "--router-threshold", "0.4",
                               "--no-confirm-failures", "--format-failure-score", "floor-0.2", "--scoring", "soft"])
    assert res.exit_code == 0, res.output
    assert seen["reward"] == RewardSettings(router="static", router_options={"axes": ["accuracy"], "threshold": 0.4},
                                            confirm_failures=False, format_failure_score="floor-0.2", scoring="soft")
    assert runner.invoke(demo, ["--format-failure-score", "none"]).exit_code == 0
    assert seen["reward"].format_failure_score is None
    bad = runner.invoke(demo, ["--combine", "median"])
    assert bad.exit_code == 2 and "--combine" in bad.output


def test_a_new_settings_field_is_an_option_and_reaches_the_reward_by_name(monkeypatch):
    """What the lead's next step needs: one field (with a flag) is a command-line option at once, and
    RewardSettings.engine_kwargs hands every recipe field to RubricReward by name."""
    from reward.settings import CALIBRATION_FIELDS
    from reward.stages.rubric_reward import RubricReward

    engine = set(inspect.signature(RubricReward.__init__).parameters)
    assert set(RewardSettings().engine_kwargs()) <= engine
    assert set(RewardSettings.model_fields) == set(RewardSettings().engine_kwargs()) | {
        "tree", "router", "router_options", "rubric_source", *CALIBRATION_FIELDS}
    flags = [f["flag"] for f in reward_flags().values()]
    assert len(flags) == len(set(flags)) and all(f["help"] for f in reward_flags().values())


def test_the_default_variant_is_the_scorers():
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT

    assert RewardSettings().scoring_variant == DEFAULT_SCORING_VARIANT
    assert RewardSettings(scoring_variant=None).scoring_variant == DEFAULT_SCORING_VARIANT


def test_progress_goes_to_stderr_under_json_and_quiet_silences_it():
    base = ["stress", "--router", "static", "--json"]
    loud = runner.invoke(app, base)
    assert loud.exit_code == 0, loud.output
    json.loads(loud.stdout.strip().splitlines()[-1])  # stdout: the result alone
    assert "routing and scoring 84 cases" in loud.stderr
    quiet = runner.invoke(app, [*base, "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and json.loads(quiet.stdout) == json.loads(
        loud.stdout.strip().splitlines()[-1])


def test_every_option_has_help_and_each_flag_one_meaning():
    helps: dict[str, set[str]] = {}

    def walk(cmd) -> None:
        if hasattr(cmd, "commands"):
            for c in cmd.commands.values():
                walk(c)
            return
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option" and not p.hidden:
                assert p.help, f"{cmd.name}: {p.opts} has no help"
                for o in p.opts + p.secondary_opts:
                    helps.setdefault(o, set()).add("flag" if getattr(p, "is_flag", False) else "value")

    walk(typer.main.get_command(app))
    # one meaning per name: at least one kind of value per flag name (a flag in one command is never
    # a value in another, as --baseline was)
    mixed = {o: kinds for o, kinds in helps.items() if len(kinds) > 1}
    assert not mixed, mixed
    for renamed in ("--threshold", "--emergency-threshold", "--pairs", "--n-bootstrap"):
        assert renamed not in helps or renamed == "--pairs"  # --pairs: meta-eval run's input file only
