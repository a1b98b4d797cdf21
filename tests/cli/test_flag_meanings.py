"""One meaning per flag across the command line: ``--out`` and ``--report`` are always a folder (a
file path, the older spelling of nine commands, is refused in one line that says where the file
goes now); ``--mode`` is only the older spelling of ``--judge-mode`` (the stress test's oracle/judge
choice is ``--verdicts``, and ``stress --mode`` is refused naming both); ``--debug`` works before
and after the subcommand."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from rubricstree import app

runner = CliRunner()


def _commands(group=None, path=()):
    group = group or typer.main.get_command(app)
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def _with(flag: str) -> list[tuple[str, ...]]:
    return [path for path, cmd in _commands() if any(flag in p.opts for p in cmd.params)]


OUT, REPORT = _with("--out"), _with("--report")


def test_every_out_and_report_is_a_folder_in_its_help():
    assert len(OUT) >= 18 and {("score",), ("stress",), ("judge", "calibrate")} <= set(REPORT)
    for path, cmd in _commands():
        for p in cmd.params:
            if "--out" in p.opts or "--report" in p.opts:
                assert "folder" in (p.help or ""), (path, p.opts, p.help)


@pytest.mark.parametrize("path", OUT, ids=" ".join)
def test_out_naming_a_file_is_refused_saying_where_the_file_goes(path, tmp_path):
    res = runner.invoke(app, [*path, "--out", str(tmp_path / "results.jsonl")])
    assert res.exit_code == 2, res.output
    assert res.output.count("error:") == 1 and "--out is a folder now" in res.output, res.output
    assert f"give --out {tmp_path / 'results'}" in res.output and "DIR/" in res.output


@pytest.mark.parametrize("path", REPORT, ids=" ".join)
def test_report_naming_a_file_is_refused_saying_where_the_file_goes(path, tmp_path):
    res = runner.invoke(app, [*path, "--report", str(tmp_path / "report.md")])
    assert res.exit_code == 2, res.output
    assert "--report is a folder now" in res.output and "--report DIR writes DIR/report.md" in res.output, res.output


def test_an_existing_file_is_no_output_folder(tmp_path):
    existing = tmp_path / "scores"
    existing.write_text("")
    res = runner.invoke(app, ["score", "--out", str(existing)])
    assert res.exit_code == 2 and "--out is a folder now" in res.output and "DIR/scores.jsonl" in res.output


def test_the_old_file_spellings_name_the_new_usage(tmp_path):
    cases = {("score", "--out", "scores.jsonl"): "--out DIR writes DIR/scores.jsonl",
             ("score", "--report", "report.md"): "--report DIR writes DIR/report.md",
             ("tree", "propose", "--out", "proposals.yaml"): "DIR/proposals.yaml",
             ("tree", "apply", "--out", "v2.yaml"): "DIR/taxonomy.yaml",
             ("eval", "compare", "--out", "compare.png"): "DIR/compare.png",
             ("optimize", "handbook", "--out", "hb.jsonl"): "DIR/handbook.jsonl",
             ("optimize", "revise", "--out", "rev.jsonl"): "DIR/rounds.jsonl",
             ("optimize", "best-of-n", "--out", "bon.jsonl"): "DIR/samples.jsonl",
             ("synth", "conversations", "--out", "conv.jsonl"): "DIR/conversations.jsonl",
             ("synth", "rubrics", "--out", "rows.jsonl"): "DIR/rubrics.jsonl"}
    for (*cmd, flag, name), says in cases.items():
        res = runner.invoke(app, [*cmd, flag, str(tmp_path / name)])
        assert res.exit_code == 2 and says in res.output, (cmd, res.output)


def test_mode_means_one_thing():
    """Everywhere ``--mode`` is the hidden older spelling of ``--judge-mode``; in stress it is
    refused, naming --verdicts (oracle|judge) and --judge-mode."""
    for path, cmd in _commands():
        for p in cmd.params:
            if "--mode" in p.opts and path != ("stress",):
                assert p.hidden and "use --judge-mode" in (p.help or ""), path
    stress = dict(_commands())[("stress",)]
    assert any("--verdicts" in p.opts for p in stress.params)
    res = runner.invoke(app, ["stress", "--mode", "judge"])
    assert res.exit_code == 2 and res.output.count("error:") == 1
    assert "--mode is --verdicts here now (oracle|judge)" in res.output and "--judge-mode" in res.output


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_works_before_and_after_the_subcommand(where, tmp_path):
    args = ["tree", "diff", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 2 and isinstance(plain.exception, SystemExit) and "error:" in plain.output
    res = runner.invoke(app, ["--debug", *args] if where == "before" else [*args, "--debug"])
    assert res.exit_code == 1 and not isinstance(res.exception, SystemExit), res.output
    assert "a.yaml" in str(res.exception)  # the error itself, with its traceback


def test_debug_after_a_command_that_prints_its_own_error_line(tmp_path):
    args = ["score", "--rollouts", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o"), "--router", "static",
            "--judge-url", "http://127.0.0.1:9"]
    assert runner.invoke(app, args).exit_code == 2
    res = runner.invoke(app, [*args, "--debug"])
    assert not isinstance(res.exception, SystemExit) and "absent.jsonl" in str(res.exception)
