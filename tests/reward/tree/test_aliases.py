"""Stable leaf ids: a renamed leaf keeps its old id under ``aliases``, so case files, scores and
configs written against the old taxonomy still name it."""

from __future__ import annotations

import pytest
import yaml

from reward.errors import TaxonomyError
from reward.scoring import score_tree
from reward.stress import load_cases
from reward.tree import Node, RubricTree, load_tree


def _renamed() -> RubricTree:
    return RubricTree([
        Node(id="root", title="root", children=("A",)),
        Node(id="A", title="A", children=("warn_bleeding", "other")),
        Node(id="warn_bleeding", title="w", criterion="If a user on warfarin asks about an NSAID, warns of bleeding.",
             severity="critical", aliases=("sf_warfarin_nsaid_v1",)),
        Node(id="other", title="o", criterion="If the user asks, answers.", severity="minor"),
    ], "root")


def test_an_old_id_resolves_to_the_renamed_leaf():
    t = _renamed()
    assert "sf_warfarin_nsaid_v1" in t and t["sf_warfarin_nsaid_v1"].id == "warn_bleeding"
    assert t.resolve("sf_warfarin_nsaid_v1") == "warn_bleeding" and t.resolve("warn_bleeding") == "warn_bleeding"
    assert t.resolve("A") is None and t.resolve("nope") is None  # an internal node or nothing: no leaf
    old = score_tree(t, {"sf_warfarin_nsaid_v1": False, "other": True})
    new = score_tree(t, {"warn_bleeding": False, "other": True})
    assert old.score == new.score == pytest.approx(0.5) and set(old.leaves) == {"warn_bleeding", "other"}


def test_an_alias_cannot_shadow_a_node_or_another_alias():
    with pytest.raises(TaxonomyError, match="alias 'other' is already taken"):
        RubricTree([Node(id="root", title="r", children=("a", "other")),
                    Node(id="a", title="a", criterion="If x, y.", aliases=("other",)),
                    Node(id="other", title="o", criterion="If x, z.")], "root")


def test_case_files_written_with_an_old_id_still_load(tmp_path):
    tree = load_tree()
    nodes = [n.model_dump(exclude_defaults=True) for n in tree.nodes.values()]
    for n in nodes:  # rename one shipped leaf, keeping its old id as an alias
        if n["id"] == "sf_warfarin_nsaid":
            n["id"], n["aliases"] = "sf_anticoagulant_nsaid", ["sf_warfarin_nsaid"]
        n["children"] = ["sf_anticoagulant_nsaid" if c == "sf_warfarin_nsaid" else c for c in n.get("children", [])]
    tax = tmp_path / "tax.yaml"
    tax.write_text(yaml.safe_dump({"version": 3, "name": tree.name, "root": tree.root, "nodes": nodes}),
                   encoding="utf-8")
    renamed = load_tree(tax)
    cases = {c.id: c for c in load_cases(tree=renamed)}  # the bundled file still says sf_warfarin_nsaid
    assert "sf_anticoagulant_nsaid" in cases["sy-mud-1"].failed
    assert "sf_warfarin_nsaid" not in cases["sy-mud-1"].failed
