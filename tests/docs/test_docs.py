"""The README and docs/ cannot go stale: their commands are checked, and the blocks that claim to
run are run.

- Every ``rubricstree ...`` command line in a fenced block of ``README.md`` or ``docs/*.md`` must
  name a real subcommand and real options (checked against the typer app, nothing is run).
- Every fenced block preceded by the line ``<!-- doc-test: run -->`` is executed (``bash`` with
  ``set -euo pipefail``, or ``python``) in a scratch folder that sees the repository's files and
  the tiny random model where ``make demo`` leaves it (``runs/demo/tiny-model``), with the project's
  ``.venv/bin`` first on PATH. Such blocks are ``slow`` (a model is loaded or trained); a block
  whose marker says ``server`` (``<!-- doc-test: run server -->``) also needs the judge server.
- Every repository path a doc names (``tests/...py``, ``configs/...yaml``, ...) exists, and no doc
  or source names the old ``tests/unit`` / ``tests/integration`` folders.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT

from rubricstree.common_options import FILE_SUFFIXES

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*doc-test:\s*run(?P<tags>(\s+\w+)*)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
# What `make demo` leaves behind, as the run blocks expect it (the Makefile runs the demo there).
DEMO_MODEL = Path("runs/demo/tiny-model")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    run: bool
    tags: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(REPO_ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a markdown file, with its run marker (the last non-blank line
    before the fence)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = MARKER.match(prev.strip())
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        out.append(Block(path, start + 1, m.group("lang").lower(), "\n".join(body), mark is not None,
                         frozenset((mark.group("tags") or "").split()) if mark else frozenset()))
    return out


BLOCKS = [b for doc in DOCS for b in fenced_blocks(doc)]
RUN_BLOCKS = [b for b in BLOCKS if b.run]


# --------------------------------------------------------------------------- command lines


def logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def rubricstree_invocations(text: str) -> list[list[str]]:
    """The argument lists after each ``rubricstree`` (or ``python -m rubricstree``) command word."""
    found = []
    for line in logical_lines(text):
        if "rubricstree" not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split("#")[0].split()
        # split into simple commands at shell operators
        cmd: list[str] = []
        for w in [*words, ";"]:
            if w in (";", "&&", "||", "|", "&"):
                _collect(cmd, found)
                cmd = []
            else:
                cmd.append(w)
    return found


def _collect(words: list[str], found: list[list[str]]) -> None:
    k = 0
    while k < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[k]):
        k += 1  # VAR=value prefixes
    words = words[k:]
    if words[:1] == ["$"]:
        words = words[1:]
    if words and (words[0] == "rubricstree" or words[0].endswith("/bin/rubricstree")):
        found.append(words[1:])
    elif len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "rubricstree"]:
        found.append(words[3:])


def _option_names(command) -> set[str]:
    names = {"--help"}
    for p in command.params:
        names.update(getattr(p, "opts", ()))
        names.update(getattr(p, "secondary_opts", ()))
    return names


def check_invocation(root, args: list[str]) -> str | None:
    """None when ``args`` names a real (sub)command with real options, else what is wrong."""
    cmd, path, rest = root, ["rubricstree"], list(args)
    while hasattr(cmd, "commands"):  # a group (typer vendors its own click: no isinstance check)
        while rest and rest[0].startswith("-"):  # group options such as --debug
            opt = rest.pop(0)
            if opt.split("=")[0] not in _option_names(cmd):
                return f"{' '.join(path)} has no option {opt}"
        if not rest:
            return f"'{' '.join(path)}' needs a subcommand ({', '.join(sorted(cmd.commands))})"
        name = rest.pop(0)
        if name in ("...", "COMMAND"):
            return None
        if name not in cmd.commands:
            return f"'{' '.join(path)}' has no subcommand '{name}' ({', '.join(sorted(cmd.commands))})"
        cmd, path = cmd.commands[name], [*path, name]
    known = _option_names(cmd)
    hidden = {o for p in cmd.params if getattr(p, "hidden", False) for o in getattr(p, "opts", ())}
    for i, word in enumerate(rest):
        tok = word.strip("[]()")
        if tok.startswith("--") and len(tok) > 2:
            opt = re.split(r"[=\]|,]", tok, maxsplit=1)[0]
            if opt not in known:
                return f"'{' '.join(path)}' has no option {opt} (it has {', '.join(sorted(known))})"
            if opt in hidden:
                return f"'{' '.join(path)}' {opt} is an old spelling (see --help)"
            value = tok.split("=", 1)[1] if "=" in tok else (rest[i + 1].strip("[]()") if i + 1 < len(rest) else "")
            if opt in ("--out", "--report") and Path(value).suffix.lower() in FILE_SUFFIXES:
                return f"'{' '.join(path)}' {opt} is a folder, not the file {value}"
    return None


def test_docs_have_commands_to_check():
    """The checks below see the docs (a parser that finds nothing would pass everything)."""
    calls = [c for b in BLOCKS for c in rubricstree_invocations(b.text)]
    assert len(calls) >= 30
    assert any(c[:2] == ["tree", "lint"] for c in calls)
    assert RUN_BLOCKS and {b.doc.name for b in RUN_BLOCKS} >= {"README.md"}


def test_every_documented_command_is_real():
    import typer

    from rubricstree import app

    root = typer.main.get_command(app)
    wrong = [f"{b.name}: rubricstree {' '.join(args)}\n    -> {why}"
             for b in BLOCKS for args in rubricstree_invocations(b.text)
             if (why := check_invocation(root, args))]
    assert not wrong, "commands in the docs that the CLI does not have:\n" + "\n".join(wrong)


def test_the_checker_catches_a_wrong_command():
    import typer

    from rubricstree import app

    root = typer.main.get_command(app)
    calls = rubricstree_invocations("X=1 rubricstree tree lint --no-such-flag  # comment\n"
                                    "rubricstree tre stats\nrubricstree score --rollouts R.jsonl \\\n  --bogus 1\n"
                                    "rubricstree tree lint --json --no-duplicates [--duplicate-threshold 0.9]\n"
                                    "rubricstree score --out scores.jsonl\nrubricstree stress --mode judge\n"
                                    "rubricstree score --out runs/scores --report=runs/r")
    assert [check_invocation(root, c) is None for c in calls] == [False, False, False, True, False, False, True]


# --------------------------------------------------------------------------- paths and stale names

PATH_REF = re.compile(r"(?<![\w/.-])((?:reward|training|rubricstree|configs|scripts|benchmarks|tests)/"
                      r"[\w./-]*\w\.(?:py|ya?ml|sh|jsonl|json|md|toml))\b")


def test_every_path_a_doc_names_exists():
    missing = sorted({f"{doc.relative_to(REPO_ROOT)}: {m}" for doc in DOCS
                      for m in PATH_REF.findall(doc.read_text(encoding="utf-8"))
                      if not (REPO_ROOT / m).exists()})
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")
# Topic docs written on other branches of issues 21-27, linked from the README before they land.
# Remove a name here once its file is on this branch: the link is then checked like any other.
PENDING: set[str] = set()  # docs being written elsewhere that may be linked before they land


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            path = (doc.parent / target).resolve()
            rel = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)
            if not path.exists() and rel not in PENDING:
                broken.append(f"{doc.relative_to(REPO_ROOT)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_no_reference_to_the_old_test_folders():
    old = re.compile(r"tests/(unit|integration)\b")
    files = [*DOCS, REPO_ROOT / "Makefile",
             *(p for top in ("reward", "training", "rubricstree", "benchmarks", "scripts", "configs", "tests")
               for p in (REPO_ROOT / top).rglob("*") if p.suffix in (".py", ".md", ".yaml", ".sh"))]
    hits = [f"{p.relative_to(REPO_ROOT)}:{n}" for p in files if p != Path(__file__).resolve()
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if old.search(line)]
    assert not hits, "the tests live in folders named after the packages; stale references:\n" + "\n".join(hits)


def test_the_makefile_demo_leaves_the_model_where_the_docs_expect_it():
    make = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:.*\n\t.*rubricstree demo --out runs/demo\b", make, re.M)


# --------------------------------------------------------------------------- run blocks


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, tiny_model_dir) -> Path:
    """A folder that looks like a checkout after ``make demo``: the repository's files (links),
    the tiny model at runs/demo/tiny-model, and nothing the blocks write lands in the repository."""
    root = tmp_path_factory.mktemp("doc-run")
    for entry in REPO_ROOT.iterdir():
        if entry.name not in (".git", "runs", ".cache", ".venv-judge") and not entry.name.startswith(".pytest"):
            (root / entry.name).symlink_to(entry)
    (root / DEMO_MODEL).parent.mkdir(parents=True)
    (root / DEMO_MODEL).symlink_to(tiny_model_dir)
    return root


def _params():
    out = []
    for b in RUN_BLOCKS:
        marks = [pytest.mark.slow] + ([pytest.mark.server] if "server" in b.tags else [])
        out.append(pytest.param(b, id=b.name, marks=marks))
    return out


@pytest.mark.parametrize("block", _params())
def test_run_block(block: Block, scratch: Path, tmp_path, request):
    if "server" in block.tags:
        request.getfixturevalue("judge_url")
    if block.lang not in ("bash", "sh", "shell", "python", "py"):
        pytest.fail(f"{block.name}: a run block must be bash or python, not '{block.lang}'")
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO_ROOT),
               RUBRICSTREE_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", WANDB_MODE="disabled")
    if block.lang.startswith("py"):
        script = tmp_path / "block.py"
        script.write_text(block.text, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.text]
    res = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (f"{block.name} ({block.lang}) exited {res.returncode}\n--- stdout\n"
                                 f"{res.stdout[-4000:]}\n--- stderr\n{res.stderr[-6000:]}")


def test_the_readme_stays_short():
    """The README is the front page (issue 49): at most 250 lines; the rest belongs in docs/."""
    assert len((REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
