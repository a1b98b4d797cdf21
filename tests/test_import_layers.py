"""The layering is one-way: every import (module level or inside a function) points down.

tree <- judge <- router <- scoring <- stage rewards <- reward tools <- integrations <- training
<- benchmarks <- cli. A module may import its own layer or one below it, never one above. Every
source file is parsed with ``ast`` (function-level imports count too), and every module under
``reward/`` must be placed in a layer, so a new top-level module cannot slip in unranked.

Inside ``training/`` the same rule holds over :data:`TRAINING_LAYERS`; and no two modules import
each other, directly or through others (a cycle hidden behind a function-level import is still a
cycle). No source file is longer than :data:`MAX_LINES`.
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
    ("reward.envvars", 0), ("reward.textio", 0), ("reward.paths", 0), ("reward.aio", 0), ("reward.progress", 0), ("reward.data", 0), ("reward.demo", 0), ("reward.tree", 0),
    ("reward.judge", 1),
    ("reward.router", 2),
    ("reward.scoring", 3), ("reward.healthbench", 3),
    ("reward.settings", 4), ("reward.runtime", 4), ("reward.stages", 4),
    ("reward.tree.lint", 5),  # the tree linter compares criteria with the router's embedding model
    ("reward.stress", 5), ("reward.metaeval", 5), ("reward.evolution", 5), ("reward.calibration", 5),
    # how a judge errs and what its calibration measured: read by the reward itself (posterior
    # verdicts, reward.stages.panel), so below the stage rewards; running a calibration stays a tool
    ("reward.stress.errors", 3), ("reward.calibration.stats", 3), ("reward.calibration.record", 4),
    ("reward.calibration.gate", 4),
    ("reward.integrations", 6),
    ("training", 7),
    ("benchmarks", 8),
    ("rubricstree", 9),
]
NAMES = {0: "tree and utilities", 1: "judge", 2: "router", 3: "scoring", 4: "stage rewards", 5: "reward tools",
         6: "integrations", 7: "training", 8: "benchmarks", 9: "cli"}
EXPLICIT = {p for p, _ in LAYERS}
# Inside training/: foundations <- data <- what runs on data <- configs and loops <- launchers.
TRAINING_LAYERS: dict[str, int] = {
    "training": 0, "training.model_dims": 0, "training.tiny_model": 0, "training.judge_server": 0,
    "training.data_hygiene": 0, "training.generation": 0, "training.system_prompt": 0,
    "training.plan_options": 0, "training.hf_export": 0, "training.trl_trainer_utils": 0,
    "training.trl_logging": 0, "training.inspector": 0, "training.smollm2": 0,
    "training.data": 1, "training.synth": 1,
    "training.difficulty": 2, "training.difficulty_results": 2, "training.verl_data": 2, "training.eval": 2,
    "training.trl_config": 3, "training.optimize": 3,
    "training.memory_plan": 4, "training.trl_launcher": 4, "training.env_check": 4, "training.gpu_stack": 0, "training.verl_export": 4, "training.verl_preflight": 4, "training.start_record": 0,
    "training.run_folder": 4, "training.launch_checks": 4, "training.judge_gate": 4,
    "training.gate_record": 0, "training.model_card": 0,
}
MAX_LINES = 500


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


def _training_part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_training_imports_point_down_inside_training() -> None:
    arrows = []
    for path in sorted((REPO / "training").rglob("*.py")):
        me = module_name(path)
        mine = TRAINING_LAYERS.get(_training_part(me))
        for line, mod in imports_of(path.read_text(encoding="utf-8"), me, path.name == "__init__.py"):
            if not mod.startswith("training.") or _training_part(mod) == _training_part(me):
                continue
            theirs = TRAINING_LAYERS.get(_training_part(mod))
            if theirs is not None and mine is not None and theirs > mine:
                arrows.append(f"{path.relative_to(REPO)}:{line}: {_training_part(me)} (layer {mine}) imports "
                              f"{mod} (layer {theirs})")
    assert not arrows, "imports against the layering inside training/:\n" + "\n".join(arrows)


def test_every_training_module_has_a_layer() -> None:
    parts = {_training_part(module_name(p)) for p in (REPO / "training").rglob("*.py")}
    assert not sorted(parts - set(TRAINING_LAYERS)), f"place these in TRAINING_LAYERS: {sorted(parts - set(TRAINING_LAYERS))}"


def import_graph(paths: list[Path] | None = None, root: Path = REPO) -> dict[str, set[str]]:
    """``{module: modules it imports}`` among our own modules, function-level imports included.
    ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``."""
    paths = paths if paths is not None else sources()
    names = {module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in names:
                        targets.add(full)
                    elif base in names:
                        targets.add(base)
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "modules that import each other (directly or through others):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_check_sees_a_cycle_behind_a_function_level_import(tmp_path) -> None:
    pkg = tmp_path / "reward" / "judge"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from reward.judge.b import x\n", encoding="utf-8")
    (pkg / "b.py").write_text("def x():\n    from reward.judge import c\n", encoding="utf-8")
    (pkg / "c.py").write_text("def y():\n    from reward.judge.a import z\n", encoding="utf-8")
    (pkg / "d.py").write_text("from reward.judge import a\n", encoding="utf-8")
    graph = import_graph(sorted(pkg.glob("*.py")), root=tmp_path)
    assert cycles(graph) == [["reward.judge.a", "reward.judge.b", "reward.judge.c"]]


def test_no_source_file_is_longer_than_the_limit() -> None:
    files = [p for top in ("reward", "training", "benchmarks", "rubricstree", "scripts", "tests")
             for pattern in ("*.py", "*.sh") for p in (REPO / top).rglob(pattern)]
    long = [f"{p.relative_to(REPO)}: {n} lines" for p in files if p.is_file()
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"source files over {MAX_LINES} lines (split them by concern):\n" + "\n".join(long)


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
