"""The layering is one-way: every import (module level or inside a function) points down.

tree <- judge <- router <- scoring <- stage rewards <- reward tools <- integrations <- training
<- benchmarks <- cli. A module may import its own layer or one below it, never one above. Every
source file is parsed with ``ast`` (function-level imports count too), and every module under
``reward/`` must be placed in a layer, so a new top-level module cannot slip in unranked.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT

REPO = REPO_ROOT

# (module prefix, rank): the longest matching prefix decides a module's layer.
LAYERS: list[tuple[str, int]] = [
    ("reward", 0), ("reward.errors", 0), ("reward.jsonl", 0), ("reward._optional", 0), ("reward.serving", 0),
    ("reward.envvars", 0), ("reward.textio", 0), ("reward.data", 0), ("reward.demo", 0), ("reward.tree", 0),
    ("reward.judge", 1),
    ("reward.router", 2),
    ("reward.scoring", 3), ("reward.healthbench", 3),
    ("reward.settings", 4), ("reward.runtime", 4), ("reward.stages", 4),
    ("reward.tree.lint", 5),  # the tree linter compares criteria with the router's embedding model
    ("reward.stress", 5), ("reward.metaeval", 5), ("reward.evolution", 5),
    ("reward.integrations", 6), ("reward.trl_rewards", 6), ("reward.verl_rewards", 6), ("reward.verl_manager", 6),
    ("training", 7),
    ("benchmarks", 8),
    ("rubricstree", 9),
]
NAMES = {0: "tree and utilities", 1: "judge", 2: "router", 3: "scoring", 4: "stage rewards", 5: "reward tools",
         6: "integrations", 7: "training", 8: "benchmarks", 9: "cli"}
EXPLICIT = {p for p, _ in LAYERS}


def rank(module: str) -> int | None:
    hits = [(p, r) for p, r in LAYERS if module == p or module.startswith(p + ".")]
    return max(hits, key=lambda h: len(h[0]))[1] if hits else None


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import in ``source``, relative ones resolved against ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]  # `from reward import stages`
    return out


def sources() -> list[Path]:
    return [p for top in ("reward", "training", "benchmarks", "rubricstree") for p in sorted((REPO / top).rglob("*.py"))]


def test_every_import_points_down() -> None:
    arrows = []
    for path in sources():
        me = module_name(path)
        mine = rank(me)
        for line, mod in imports_of(path.read_text(encoding="utf-8"), me, path.name == "__init__.py"):
            theirs = rank(mod)
            if theirs is not None and theirs > mine:
                arrows.append(f"{path.relative_to(REPO)}:{line}: {NAMES[mine]} imports {mod} ({NAMES[theirs]})")
    assert not arrows, "imports against the layering:\n" + "\n".join(arrows)


def test_every_reward_module_has_a_layer() -> None:
    top = {module_name(p).split(".")[1] for p in (REPO / "reward").rglob("*.py") if p.name != "__init__.py"
           or p.parent != REPO / "reward"}
    unplaced = sorted(m for m in top if f"reward.{m}" not in EXPLICIT)
    assert not unplaced, f"place these reward modules in LAYERS: {unplaced}"


def test_the_checker_sees_function_level_and_relative_imports() -> None:
    src = "import os\n\ndef f():\n    from training.data import x\n\nfrom ..router import base\n"
    found = imports_of(src, "reward.judge.http")
    assert (4, "training.data") in found and (6, "reward.router") in found
    assert rank("training.data") > rank("reward.judge.http") and rank("reward.router") > rank("reward.judge.http")


@pytest.mark.parametrize("module,expected", [("reward.judge.http", 1), ("reward.tree.graph", 0),
                                             ("training.eval.records", 7), ("rubricstree", 9), ("numpy", None),
                                             ("reward.integrations.verl.manager", 6)])
def test_rank(module: str, expected: int | None) -> None:
    assert rank(module) == expected


def test_the_core_imports_no_trainer_at_import_time() -> None:
    """Importing the reward core (and the TRL/verl adapters' settings) loads no torch, trl or verl."""
    code = ("import sys, reward.tree, reward.judge, reward.router, reward.scoring, reward.stages.rubric_reward, "
            "reward.settings, reward.integrations.trl; "
            "print(sorted(m for m in ('torch', 'trl', 'verl', 'transformers') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
