"""``rubricstree route eval``: the labelled set's shape, the metrics' arithmetic, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

from reward.errors import InputError
from reward.router import StaticRouter
from reward.router.evaluate import DEFAULT_LABELS, evaluate, load_cases
from reward.tree import load_tree


@pytest.fixture(scope="module")
def tree():
    return load_tree()


def test_bundled_labels_meet_the_brief(tree):
    cases = load_cases(tree=tree)  # every id is a leaf of the packaged tree
    assert len(cases) >= 40
    assert len({c.language for c in cases}) >= 4
    assert all(c.applicable and c.not_applicable and c.urgent is not None for c in cases)
    assert sum("passing_disclosure" in c.tags for c in cases) >= 5


def test_bad_labels_name_the_file_line_and_field(tmp_path, tree):
    f = tmp_path / "l.jsonl"
    f.write_text(json.dumps({"id": "a", "language": "en", "prompt": [{"role": "user", "content": "x"}],
                             "applicable": ["no_such_leaf"]}) + "\n")
    with pytest.raises(InputError, match=r"l.jsonl.*line 1.*applicable"):
        load_cases(f, tree=tree)
    f.write_text(json.dumps({"id": "a", "language": "en", "prompt": []}) + "\n")
    with pytest.raises(InputError, match=r"line 1.*prompt"):
        load_cases(f)


def test_metrics_on_a_router_that_switches_on_every_leaf(tree):
    cases = load_cases(tree=tree)
    rep = asyncio.run(evaluate(StaticRouter(tree), cases))
    # every leaf active: recall 1, every labelled-not-applicable leaf a false alarm
    n_app = sum(len(set(c.applicable)) for c in cases)
    n_na = sum(len(c.not_applicable) for c in cases)
    assert rep["recall"] == 1.0 and rep["recall_critical"] == 1.0
    assert rep["precision"] == pytest.approx(n_app / (n_app + n_na))
    assert rep["active_per_prompt"] == len(tree.leaves) - len(StaticRouter(tree).tool_gated() & {
        leaf.id for leaf in tree.leaves})
    assert set(rep["by_language"]) == {c.language for c in cases}
    assert rep["urgency"]["recall"] is None  # the static router estimates no urgency


def test_cli_json(tree):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "rubricstree", "route", "eval", "--labels", str(DEFAULT_LABELS),
                           "--router", "static", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads(proc.stdout)
    assert {"precision", "recall", "recall_critical", "active_per_prompt", "by_language", "urgency"} <= set(rep)
    bad = subprocess.run([sys.executable, "-m", "rubricstree", "route", "eval", "--labels", "/nonexistent.jsonl"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "labels file not found" in bad.stderr
