"""Malformed files at every loader and CLI input (issue 10, defect 12 and done-when): whatever the
bytes (invalid UTF-8, a byte-order mark, lone surrogates, deep nesting, wrong shapes), a command
ends with a named error and a non-zero exit, never a traceback. Hypothesis writes the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from reward.errors import RubricsTreeError
from rubricstree import app

runner = CliRunner()
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                     max_leaves=8)
_keys = st.sampled_from(["id", "prompt", "completion", "rubrics", "prompt_id", "rubric_index", "criteria_met",
                         "response", "question", "options", "answer", "index", "nodes", "root", "children",
                         "criterion", "points", "rubric_items", "example_tags", "role", "content"])
_row = st.dictionaries(_keys, _json, max_size=6)


@st.composite
def file_bytes(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "text", "jsonl", "deep", "bom", "surrogate", "yaml"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "text":
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    if kind == "deep":
        n = draw(st.integers(1000, 100_000))
        return ("[" * n + "]" * n).encode() + b"\n"
    if kind == "surrogate":
        return json.dumps({"id": "x", "prompt": [{"role": "user", "content": "a\ud800"}],
                           "completion": "b\udfff"}).encode() + b"\n"
    if kind == "yaml":
        return draw(st.sampled_from([b"a: 1\na: 2\n", b"- [\n", b"root: r\nnodes: 3\n", b"!!python/object:os.system x\n",
                                     b"nodes:\n  - {id: r, children: [r]}\nroot: r\n", b"\xff\xfe"]))
    lines = [json.dumps(draw(_row), ensure_ascii=draw(st.booleans())) for _ in range(draw(st.integers(1, 3)))]
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    return b"\xef\xbb\xbf" + data if kind == "bom" else data


def _check(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"uncaught {type(result.exception).__name__}: {result.exception}\n{result.output}"
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    if result.exit_code != 0:
        assert "error" in result.output.lower() or "usage" in result.output.lower(), result.output


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@FUZZ
@given(data=file_bytes())
def test_taxonomy_validate(tmp_path, data):
    _check(runner.invoke(app, ["tree", "validate", str(_write(tmp_path, "tax.yaml", data))]))


@FUZZ
@given(data=file_bytes(), other=file_bytes())
def test_healthbench_score_data_and_verdicts(tmp_path, data, other):
    _check(runner.invoke(app, ["healthbench", "score", "--data", str(_write(tmp_path, "hb.jsonl", data)),
                               "--verdicts", str(_write(tmp_path, "v.jsonl", other)), "--resamples", "5"]))


@FUZZ
@given(data=file_bytes(), other=file_bytes())
def test_mcq_score(tmp_path, data, other):
    _check(runner.invoke(app, ["mcq", "score", "--data", str(_write(tmp_path, "q.jsonl", data)),
                               "--completions", str(_write(tmp_path, "c.jsonl", other))]))


@FUZZ
@given(data=file_bytes())
def test_score_rollouts(tmp_path, data):
    rows = _write(tmp_path, "r.jsonl", data)
    _check(runner.invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                               "--router", "static", "--judge-url", "http://127.0.0.1:9", "--served-model", "m",
                               "--judge-model", "/nonexistent/tokenizer", "--no-cache"]))


@FUZZ
@given(data=file_bytes())
def test_train_config_loader_raises_only_named_errors(tmp_path, data):
    from training.trl_config import load_config

    try:
        load_config(_write(tmp_path, "c.yaml", data))
    except RubricsTreeError:
        pass


@pytest.mark.parametrize("argv", [
    ["score", "--rollouts", "/nonexistent.jsonl", "--out", "o", "--judge-url", "http://x"],
    ["score", "--rollouts", ".", "--out", "o", "--judge-url", "http://x"],
    ["tree", "validate", "/"],
    ["score", "--rollouts", "r.jsonl", "--out", "o", "--judge-url", ",,,"],
])
def test_bad_paths_and_urls_on_the_command_line(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.jsonl").write_text(json.dumps({"id": "x", "prompt": [{"role": "user", "content": "hi"}],
                                                  "completion": "c"}) + "\n", encoding="utf-8")
    result = runner.invoke(app, argv)
    _check(result)
    assert result.exit_code != 0


def test_debug_shows_the_traceback(tmp_path):
    bad = _write(tmp_path, "tax.yaml", b"\xff\xfe\x00bad")
    assert runner.invoke(app, ["tree", "validate", str(bad)]).exception.__class__ is SystemExit
    result = runner.invoke(app, ["--debug", "tree", "validate", str(bad)])
    assert result.exit_code != 0
