"""The command line is the top layer: ``python -m rubricstree`` works, and nothing below it
(``reward/``, ``training/``, ``benchmarks/``) imports it; ``reward/`` imports no ``training``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_python_dash_m_rubricstree_help():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "rubricstree", "--help"], capture_output=True, text=True, check=False,
                         env=env, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    for group in ("score", "demo", "healthbench", "eval", "train", "tree"):
        assert group in res.stdout


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _offenders(package: str, banned: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((REPO / package).rglob("*.py")):
        for mod in _imports(path):
            if mod.split(".")[0] in banned:
                bad.append(f"{path.relative_to(REPO)} imports {mod}")
    return bad


def test_reward_imports_neither_training_nor_the_cli():
    assert _offenders("reward", ("training", "rubricstree")) == []


def test_training_and_benchmarks_do_not_import_the_cli():
    assert _offenders("training", ("rubricstree",)) == []
    assert _offenders("benchmarks", ("rubricstree",)) == []
    assert not (REPO / "reward" / "cli").exists()
