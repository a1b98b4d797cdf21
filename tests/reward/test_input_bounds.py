"""Inputs that expand are refused before anything walks them (issue 48, part 6): YAML aliases
(a 570-byte taxonomy of nested aliases is 10**10 values), deep nesting, recursive aliases, files
larger than we read, devices and pipes, and JSONL lines without end. Before: `tree validate` on the
alias taxonomy was still running at 120 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reward.errors import InputError
from reward.jsonl import iter_jsonl
from reward.textio import check_yaml_size, load_json_file, load_yaml, parse_yaml, read_text
from reward.tree import load_tree

ROOT = Path(__file__).resolve().parents[2]


def alias_bomb(levels: int = 10) -> str:
    """Nested aliases: level i lists ten aliases of level i-1 (10**levels values)."""
    lines = ["version: 3", "name: bomb", "root: root", "nodes:", "  - id: root", "    title: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"    t{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_built(tmp_path):
    p = tmp_path / "taxonomy.yaml"
    p.write_text(alias_bomb())
    assert p.stat().st_size < 1000
    with pytest.raises(InputError, match=r"taxonomy\.yaml: record line \d+: refused: this YAML expands to more than"):
        load_yaml(p)
    with pytest.raises(InputError, match="expands to more than"):
        load_tree(p)


def test_tree_validate_refuses_the_alias_bomb_and_ends(tmp_path):
    """The command a user runs; the subprocess's timeout only bounds a hang (the refusal takes well
    under a second here: the walk is linear in the text), it is not a speed requirement."""
    p = tmp_path / "taxonomy.yaml"
    p.write_text(alias_bomb())
    proc = subprocess.run([sys.executable, "-m", "rubricstree", "tree", "validate", str(p)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode != 0
    assert "expands to more than" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_the_check_counts_each_distinct_node_once():
    """Ordinary anchors still load, and the bomb's check visits its few distinct nodes only."""
    assert parse_yaml("a: &x {b: 1}\nc: *x\nd: [*x, *x]\n") == {"a": {"b": 1}, "c": {"b": 1}, "d": [{"b": 1}, {"b": 1}]}
    import yaml

    node = yaml.compose(alias_bomb(5))  # 10**5 values: under the bound, so the check passes
    check_yaml_size(node, "x")


@pytest.mark.parametrize("text, what", [("a: &x [*x]\n", "contains it"),
                                        ("a: " + "[" * 150 + "]" * 150 + "\n", "deeper than")])
def test_recursive_aliases_and_deep_nesting_are_refused(text, what):
    with pytest.raises(InputError, match=what):
        parse_yaml(text, where="in.yaml")


def test_the_bundled_taxonomy_is_well_inside_the_bounds():
    assert load_tree().leaves


def test_files_too_large_and_not_regular_are_refused(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate((64 << 20) + 1)  # sparse: no disk used
    with pytest.raises(InputError, match=r"big\.yaml: .*bytes \(at most"):
        load_yaml(big)
    if Path("/dev/zero").exists():
        with pytest.raises(InputError, match="not a regular file"):
            read_text("/dev/zero")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        load_yaml(fifo)  # a read would block for ever


def test_deep_json_and_long_lines_are_named_errors(tmp_path, monkeypatch):
    deep = tmp_path / "record.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"record\.json: JSON nested too deeply"):
        load_json_file(deep)
    import reward.jsonl as jsonl

    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1000)
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"id": "a"}) + "\n" + json.dumps({"id": "b", "x": "y" * 5000}) + "\n")
    with pytest.raises(InputError, match=r"rows\.jsonl: record line 2: a line of more than 1,000 bytes"):
        list(iter_jsonl(p))


def test_yaml_nested_past_pythons_stack_is_a_named_error():
    """PyYAML composes nested collections by recursion: 5,000 levels overflowed Python's stack
    before the depth bound could count them (a RecursionError, a traceback)."""
    with pytest.raises(InputError, match="nests deeper"):
        parse_yaml("a: " + "[" * 5000 + "]" * 5000 + "\n", where="deep.yaml")


@pytest.mark.parametrize("depth", [150, 900])
def test_a_jsonl_line_nested_deep_is_named_with_its_line(tmp_path, depth):
    """A line nested 900 deep parses (json's own limit is about Python's stack), and a \\u escape in
    it sent it through a recursive walk that overflowed; every later walk would too. Refused by its
    depth, named with file and line."""
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"id": "a"}) + "\n" + '{"x": "\\u00e9", "y": ' + "[" * depth + "]" * depth + "}\n")
    with pytest.raises(InputError, match=r"rows\.jsonl: record line 2: JSON nested deeper than 100 levels"):
        list(iter_jsonl(p))
