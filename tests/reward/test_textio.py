"""User text files (issue 10, defect 12 and the smaller list): a non-UTF-8 byte is reported with
its file and line, a UTF-8 byte-order mark is accepted, a lone surrogate cannot crash an encoder
later, and a YAML mapping with a repeated key is refused instead of keeping the last value."""

from __future__ import annotations

import json

import pytest

from reward.errors import InputError
from reward.stages.rubric_reward import load_rollouts
from reward.tree import load_tree

ROW = {"id": "x", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}


def test_non_utf8_jsonl_names_file_and_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(json.dumps(ROW).encode() + b"\n" + b'{"id": "\xff"}\n')
    with pytest.raises(InputError, match=r"r\.jsonl: record line 2: not valid UTF-8"):
        load_rollouts(p)


def test_bom_is_accepted(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n")
    assert [r.id for r in load_rollouts(p)] == ["x"]


def test_lone_surrogate_is_replaced_and_encodable(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({**ROW, "completion": "bad \ud800 text"}) + "\n", encoding="utf-8")
    [r] = load_rollouts(p)
    assert r.completion == "bad \ufffd text"
    r.completion.encode("utf-8")


def test_deeply_nested_json_is_a_named_error(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1"):
        load_rollouts(p)


def test_yaml_duplicate_key_is_refused_with_its_line(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("root: r\nname: a\nname: b\nnodes: []\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3.*duplicate key 'name'"):
        load_tree(p)


def test_non_utf8_taxonomy_names_the_file(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_bytes(b"root: r\nname: \xe9\n")
    with pytest.raises(InputError, match=r"t\.yaml: record line 2: not valid UTF-8"):
        load_tree(p)


def test_json_duplicate_key_is_refused(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": "x", "id": "y", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}\n',
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1: duplicate key 'id'"):
        load_rollouts(p)


def test_points_true_is_refused(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({**ROW, "rubrics": [{"criterion": "c", "points": True}]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="points"):
        load_rollouts(p)


# ------------------------------------------------------------------ one YAML loader everywhere
def _loaders():
    from reward.evolution.proposals import load_proposals
    from reward.evolution.taxonomy_io import read_header
    from reward.integrations.verl.settings import load_settings
    from reward.stress.cases import load_cases
    from training.eval.published import load_published
    from training.memory_plan import plan_input_from_config
    from training.trl_config import load_config

    return {"tree": load_tree, "taxonomy header": read_header, "proposals": load_proposals,
            "stress cases": load_cases, "verl settings": load_settings, "trl config": load_config,
            "memory plan": plan_input_from_config, "published figures": load_published}


@pytest.mark.parametrize("name", sorted(_loaders()))
def test_every_yaml_loader_refuses_a_repeated_key(tmp_path, name):
    p = tmp_path / "dup.yaml"
    p.write_text("version: 1\nname: a\nname: b\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        _loaders()[name](p)
    assert "duplicate key 'name'" in str(exc.value) and "line 3" in str(exc.value), str(exc.value)


def test_no_yaml_is_parsed_outside_the_one_loader():
    from rt_paths import REPO_ROOT

    offenders = [f"{p.relative_to(REPO_ROOT)}:{i}" for top in ("reward", "training", "rubricstree", "benchmarks")
                 for p in sorted((REPO_ROOT / top).rglob("*.py")) if p.name != "textio.py"
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if "yaml.safe_load(" in line or "yaml.load(" in line]
    assert not offenders, offenders
