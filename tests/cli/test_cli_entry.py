"""The command line is the top layer: ``python -m rubricstree`` works (tests/test_import_layers.py
checks that nothing below imports it)."""

from __future__ import annotations

import os
import subprocess
import sys

from rt_paths import REPO_ROOT

REPO = REPO_ROOT


def test_python_dash_m_rubricstree_help():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "rubricstree", "--help"], capture_output=True, text=True, check=False,
                         env=env, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    for group in ("score", "demo", "healthbench", "eval", "train", "tree"):
        assert group in res.stdout


def test_the_old_cli_package_is_gone():
    assert not (REPO / "reward" / "cli").exists()
