"""Fault groups in the taxonomy: validated on load with errors that name the file, the group and
the field; the shipped groups pass lint; the changelog lists them."""

from __future__ import annotations

import pytest
import yaml

from reward.errors import TaxonomyError
from reward.tree import load_tree
from reward.tree.lint import fault_issues


def _write(tmp_path, faults, catch_all=False):
    doc = {"version": 1, "name": "t", "root": "root", "nodes": [
        {"id": "root", "title": "root", "children": ["a", "b", "c", "d"]},
        {"id": "a", "title": "a", "criterion": "If the user reports X, advises Y.", "severity": "critical"},
        {"id": "b", "title": "b", "criterion": "If the user reports X, recommends Z.", "polarity": "negative",
         "severity": "critical"},
        {"id": "c", "title": "c", "criterion": "If the user asks W, answers V.", "severity": "minor", "aliases": ["old_c"]},
        {"id": "d", "title": "d", "criterion": "Recommends a harmful act.", "polarity": "negative", "severity": "critical",
         "conditional": False, "always_on": True, "catch_all": catch_all}],
        "faults": faults}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_a_valid_group_loads_with_former_ids_resolved(tmp_path):
    tree = load_tree(_write(tmp_path, [{"id": "g", "title": "G", "members": ["a", "b", "old_c"], "acts": ["b"]}]))
    assert tree.faults["g"].members == ("a", "b", "c") and tree.fault_of == {"a": "g", "b": "g", "c": "g"}
    assert tree.fault_acts == {"b"}


@pytest.mark.parametrize(("faults", "field", "words"), [
    ([{"id": "g", "title": "G", "members": ["a", "zz"]}], "members", "not a leaf"),
    ([{"id": "g", "title": "G", "members": ["a", "root"]}], "members", "not a leaf"),
    ([{"id": "g", "title": "G", "members": ["a", "b"]}, {"id": "h", "title": "H", "members": ["b", "c"]}], "members",
     "already in fault 'g'"),
    ([{"id": "g", "title": "G", "members": ["a", "b"], "acts": ["c"]}], "acts", "not a member"),
    ([{"id": "a", "title": "G", "members": ["b", "c"]}], "id", "taken by a node"),
    ([{"id": "g", "title": "G", "members": ["a"]}], "members", "at least 2"),
    ([{"id": "g", "title": "G", "members": ["a", "b"], "extra": 1}], "extra", "Extra inputs"),
])
def test_a_bad_group_is_refused_naming_file_group_and_field(tmp_path, faults, field, words):
    path = _write(tmp_path, faults)
    with pytest.raises(TaxonomyError) as err:
        load_tree(path)
    msg = str(err.value)
    assert str(path) in msg and "fault" in msg and field in msg and words in msg


def test_a_catch_all_joins_no_group(tmp_path):
    with pytest.raises(TaxonomyError, match="catch-all"):
        load_tree(_write(tmp_path, [{"id": "g", "title": "G", "members": ["a", "d"]}], catch_all=True))


def test_lint_checks_groups(tmp_path):
    tree = load_tree(_write(tmp_path, [{"id": "g", "title": "G", "members": ["a", "b"], "acts": ["a"]}]))
    kinds = [(i.kind, i.node) for i in fault_issues(tree)]
    assert ("fault_group", "a") in kinds  # a positive leaf cannot be an act


def test_the_shipped_taxonomy_groups_its_faults_and_lists_them():
    tree = load_tree()
    assert fault_issues(tree) == []
    # every 'warns about X' critical leaf with a recommending act is grouped with it
    for group in tree.faults.values():
        for act in group.acts:
            assert tree[act].polarity == "negative" and tree.severity[act] == "critical"
    assert tree.fault_of["sf_chest_pain_emergency"] == tree.fault_of["sf_red_flags_missed"] == "missed_emergency"
    assert [leaf.id for leaf in tree.leaves if leaf.catch_all] == ["sf_dangerous_advice"]
    raw = yaml.safe_load(open(tree.source, encoding="utf-8"))
    latest = raw["changelog"][0]
    assert latest["version"] == raw["version"]
    listed = " ".join(latest["changes"])
    assert all(gid in listed for gid in tree.faults)
