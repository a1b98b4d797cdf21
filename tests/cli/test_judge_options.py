"""Every command that grades takes the same judge options, generated from ``JudgeSettings``
(issue 25): one spelling per flag, old spellings as hidden aliases, one validation."""

from __future__ import annotations

import typer
from typer.main import get_command
from typer.testing import CliRunner

from reward.judge.settings import JudgeSettings
from rubricstree import app
from rubricstree.judge_options import flags, judge_options

JUDGE_COMMANDS = {
    "score", "stress", "judge check", "judge calibrate", "eval healthbench", "meta-eval run", "meta-eval stability",
    "meta-eval healthbench", "optimize handbook", "optimize revise", "optimize best-of-n", "optimize report",
    "tree coverage", "tree propose", "synth eval-rubrics", "train filter", "route eval",
}
SIZES_A_JUDGE_ONLY = {"train plan"}  # its --judge-model is a memory-plan input; it grades nothing


def _commands(group=None, prefix=""):
    group = group or get_command(app)
    for name, cmd in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, path + " ")
        else:
            yield path, cmd


def _options(cmd) -> dict[str, object]:
    return {o: p for p in cmd.params for o in getattr(p, "opts", [])}


def test_every_judge_command_takes_every_judge_option_and_nothing_else_declares_one():
    wanted = {f["flag"] for f in flags().values()}
    with_judge = {}
    for path, cmd in _commands():
        opts = _options(cmd)
        if path in SIZES_A_JUDGE_ONLY:
            continue
        if "--judge-url" in opts or "--judge-model" in opts or "--served-model" in opts:
            with_judge[path] = wanted - set(opts)
    assert set(with_judge) == JUDGE_COMMANDS, sorted(set(with_judge) ^ JUDGE_COMMANDS)
    assert all(not missing for missing in with_judge.values()), with_judge


def test_every_judge_settings_field_with_a_flag_is_an_option_with_its_default():
    for path, cmd in _commands():
        opts = _options(cmd)
        if "--judge-url" not in opts:
            continue
        for name, f in flags().items():
            default = opts[f["flag"]].default
            if not (path == "eval healthbench" and name == "mode"):  # eval grades in explain mode by default
                assert default == f["default"], (path, name, default)
        for f in flags().values():
            hidden = [opts[a] for a in f["aliases"] if a in opts and getattr(opts[a], "name", "").startswith("judge__")]
            assert all(o.hidden for o in hidden), (path, f["flag"])


def _probe():
    seen: list[JudgeSettings] = []
    probe = typer.Typer()

    @probe.command()
    @judge_options(defaults={"mode": "explain"})
    def run(n: int = typer.Option(1, "--n"), judge: JudgeSettings = None) -> None:
        seen.append(judge)

    return probe, seen


def test_old_spellings_are_hidden_aliases_and_never_silently_beside_the_new_one():
    probe, seen = _probe()
    res = CliRunner().invoke(probe, ["--judge-url", "http://h:1", "--served-judge", "a", "--timeout", "5",
                                     "--grading", "choice", "--judge-model", "tok"])
    assert res.exit_code == 0, res.output
    s = seen[-1]
    assert (s.served_model, s.timeout_s, s.mode, s.tokenizer) == ("a", 5.0, "choice", "tok")
    for both, flag in ((["--served-model", "new", "--judge-served-model", "old"], "--served-model"),
                       (["--judge-mode", "choice", "--mode", "explain"], "--judge-mode"),  # the new one at its default
                       (["--served-judge", "a", "--judge-served-model", "b"], "--served-model")):  # two older ones
        res = CliRunner().invoke(probe, both)
        assert res.exit_code == 2 and f"{flag} was given more than once" in res.output, res.output
    assert len(seen) == 1  # neither ran
    help_text = CliRunner().invoke(probe, ["--help"]).output
    assert "--served-model" in help_text and "--served-judge" not in help_text and "--timeout " not in help_text


def test_an_invalid_judge_option_names_its_flag_and_exits_2():
    probe, _ = _probe()
    res = CliRunner().invoke(probe, ["--judge-mode", "fast"])
    assert res.exit_code == 2 and "--judge-mode" in res.output
    res = CliRunner().invoke(probe, ["--item-timeout", "0"])
    assert res.exit_code == 2 and "--item-timeout" in res.output


def test_judge_check_takes_the_request_timeout():
    res = CliRunner().invoke(app, ["judge", "check", "--help"])
    assert "--item-timeout" in res.output and "--deadline" in res.output and "--circuit-breaker" in res.output


def test_docs_judge_md_names_every_option_and_field():
    from rt_paths import REPO_ROOT

    text = (REPO_ROOT / "docs" / "judge.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in text.splitlines() if line.startswith("| `--")}
    for name, f in flags().items():
        assert f["flag"] in rows, f"docs/judge.md lacks {f['flag']}"
        assert f"`{name}`" in rows[f["flag"]], (f["flag"], name)
        for alias in f["aliases"]:
            assert f"`{alias}`" in rows[f["flag"]], (f["flag"], alias)
    assert f"`{flags()['deadline_s']['default']:.0f}` s" in rows["--deadline"]  # the stated default is the real one
