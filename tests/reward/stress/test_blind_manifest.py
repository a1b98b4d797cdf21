"""The blind labelled set is frozen (issue 44): every file is in the manifest with its SHA-256, a
`test` label changes only with a manifest entry that says why (and the data card's changelog lists
it), and the set covers what it was written to cover."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from reward.stress.cases import load_cases
from reward.stress.sets import blind_dir, manifest_problems, resolve_cases
from reward.tree import load_tree

ROOT = Path(__file__).resolve().parents[3]


def test_every_file_matches_the_manifest():
    assert manifest_problems() == []


def test_an_edited_test_label_is_caught_unless_the_manifest_says_why(tmp_path):
    root = tmp_path / "blind"
    shutil.copytree(blind_dir(), root)
    f = root / "test" / "w1.yaml"
    f.write_text(f.read_text(encoding="utf-8").replace("failed:\n", "failed:\n  - cm_filler\n", 1), encoding="utf-8")
    problems = manifest_problems(root)
    assert any("test/w1.yaml" in p and "SHA-256" in p for p in problems), problems
    manifest = json.loads((root / "manifest.json").read_text())
    import hashlib

    manifest["files"]["test/w1.yaml"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert any("no 'changes' entry" in p for p in manifest_problems(root))
    manifest["changes"].append({"file": "test/w1.yaml", "date": "2026-12-06", "why": "a test of the check"})
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert manifest_problems(root) == []
    (root / "dev" / "extra.yaml").write_text("[]")
    assert any("extra.yaml: not in the manifest" in p for p in manifest_problems(root))


def test_every_change_is_in_the_data_cards_changelog():
    manifest = json.loads((blind_dir() / "manifest.json").read_text())
    card = (ROOT / "docs" / "labels.md").read_text(encoding="utf-8")
    for change in manifest["changes"]:
        assert change["file"] in card and change["why"] in card, change


@pytest.fixture(scope="module")
def parts():
    tree = load_tree()
    return {label: load_cases(path, tree) for label, path in resolve_cases("blind")}


def test_the_set_is_split_by_conversation(parts):
    dev = {c.conversation for c in parts["blind:dev"]}
    test = {c.conversation for c in parts["blind:test"]}
    assert dev and test and not dev & test
    assert 0.4 < len(dev) / (len(dev) + len(test)) < 0.6


def test_coverage_of_the_critical_and_major_leaves_and_the_languages(parts):
    """Counted as the data card counts them: items are (reply, leaf) pairs of a conversation whose
    leaf applies; a good reply counts once per conversation (issue 44's thresholds)."""
    tree = load_tree()
    fails, passes = Counter(), Counter()
    langs, seen = Counter(), set()
    always = [leaf.id for leaf in tree.leaves if not leaf.conditional]
    for cases in parts.values():
        for c in cases:
            applies = set(c.applicable or ()) | set(always)
            replies = [(c.perturbed, set(c.failed))]
            if (c.conversation, c.clean) not in seen:
                seen.add((c.conversation, c.clean))
                replies.append((c.clean, set(c.clean_failed)))
                langs[c.language] += 1
            for _, failed in replies:
                for lid in applies:
                    (fails if lid in failed else passes)[lid] += 1
    need = {"critical": 10, "major": 5, "minor": 3}
    short = [(leaf.id, fails[leaf.id], passes[leaf.id]) for leaf in tree.leaves if not leaf.id.startswith("at_")
             and tree.severity[leaf.id] in ("critical", "major")
             and min(fails[leaf.id], passes[leaf.id]) < need[tree.severity[leaf.id]]]
    assert short == []
    assert len(langs) >= 15
    assert sum(v for k, v in langs.items() if k != "en") / sum(langs.values()) >= 0.4
    families = Counter(c.perturbation for cases in parts.values() for c in cases)
    for family in ("verbose_restatement", "over_triage", "refusal", "empty_hedge", "sycophancy", "false_reassurance"):
        assert families[family] >= 10, families
