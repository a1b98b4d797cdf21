"""The blind labelled set is frozen (issue 44): every file is in the manifest with its SHA-256, a
`test` label changes only with a manifest entry that says why (and the data card's changelog lists
it), and the set covers what it was written to cover."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
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


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _history_or_skip() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git history here (an unpacked archive): the freeze is checked where the history is")
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone: its first commit shows every file as added, so the freezing commit cannot "
                    "be told (CI clones the whole history)")
    try:
        commits = _git("log", "--format=%H", "--diff-filter=A", "--", "reward/data/blind/manifest.json").split()
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"git cannot read the history here: {exc.stderr[:200]}")
    if not commits:
        pytest.skip("a shallow history without the commit that froze the set")
    return commits


def test_the_frozen_hashes_are_the_files_of_the_commit_that_froze_the_set():
    """The manifest's `frozen` hashes are what the set was when the manifest was first committed:
    a frozen hash edited along with its file would pass the SHA-256 check, not this one."""
    froze = _history_or_skip()[-1]
    manifest = json.loads((blind_dir() / "manifest.json").read_text())
    for name, digest in manifest["frozen"].items():
        blob = subprocess.run(["git", "show", f"{froze}:reward/data/blind/{name}"], cwd=ROOT, capture_output=True,
                              check=True).stdout
        assert hashlib.sha256(blob).hexdigest() == digest, f"{name}: frozen hash is not the file at {froze[:10]}"


def test_every_change_of_a_test_file_in_the_history_has_its_changes_entry():
    """Each commit that changed a `test` file's content after the freeze needs an entry of its own."""
    _history_or_skip()
    manifest = json.loads((blind_dir() / "manifest.json").read_text())
    entries = Counter(c["file"] for c in manifest["changes"])
    for name in manifest["frozen"]:
        if not name.startswith("test/"):
            continue
        digests = []
        for commit in reversed(_git("log", "--format=%H", "--", f"reward/data/blind/{name}").split()):
            blob = subprocess.run(["git", "show", f"{commit}:reward/data/blind/{name}"], cwd=ROOT,
                                  capture_output=True).stdout
            digest = hashlib.sha256(blob).hexdigest()
            if not digests or digests[-1] != digest:
                digests.append(digest)
        assert len(digests) - 1 <= entries[name], f"{name}: {len(digests) - 1} changes in git, {entries[name]} entries"
