"""The rubric tree: loader and DAG validation errors (each naming file, node and field),
auto-weights on a hand-built DAG, path queries, and the ``rubricstree tree`` commands."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reward.errors import InputError, TaxonomyError
from reward.tree import Node, RubricTree, load_tree
from rubricstree import app

# A DAG where leaf y has two parents: root -> A, B; A -> x, y; B -> y, z.
DIAMOND = """\
version: 1
name: diamond
root: root
nodes:
  - {id: root, title: Root, children: [A, B]}
  - {id: A, title: A, children: [x, y]}
  - {id: B, title: B, children: [y, z]}
  - {id: x, title: X, criterion: "States x."}
  - {id: y, title: Y, criterion: "States y.", polarity: negative}
  - {id: z, title: Z, criterion: "States z."}
"""


def write(tmp_path: Path, text: str, name: str = "tax.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def with_nodes(nodes: str, root: str = "root") -> str:
    """A taxonomy file whose node list is ``nodes`` (YAML list items, one per line)."""
    body = "\n".join("  " + line for line in textwrap.dedent(nodes).strip().splitlines())
    return f"version: 1\nname: t\nroot: {root}\nnodes:\n{body}\n"


def load_error(tmp_path: Path, text: str) -> tuple[TaxonomyError, Path]:
    path = write(tmp_path, text)
    with pytest.raises(TaxonomyError) as info:
        load_tree(path)
    return info.value, path


def assert_where(exc: TaxonomyError, path: Path, record: str | None, field: str | None) -> None:
    msg = str(exc)
    assert str(path) in msg and exc.file == str(path)
    if record is not None:
        assert exc.record == record and f"record {record}" in msg
    if field is not None:
        assert exc.field == field and f"field '{field}'" in msg


def mk(nid: str, children: tuple[str, ...] = (), criterion: str | None = None) -> Node:
    return Node(id=nid, title=nid, children=children, criterion=criterion)


# ---------------------------------------------------------------------------- loader errors
class TestLoaderErrors:
    def test_error_is_an_input_error(self):
        assert issubclass(TaxonomyError, InputError) and issubclass(TaxonomyError, ValueError)

    def test_duplicate_id(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a."}
            - {id: a, title: A again, criterion: "States a again."}
        """))
        assert_where(exc, path, "a", "id")
        assert "duplicate" in exc.reason

    def test_unknown_child(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a, ghost]}
            - {id: a, title: A, criterion: "States a."}
        """))
        assert_where(exc, path, "root", "children")
        assert "'ghost'" in exc.reason

    def test_cycle(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, children: [b]}
            - {id: b, title: B, children: [c, leaf]}
            - {id: c, title: C, children: [a]}
            - {id: leaf, title: L, criterion: "States l."}
        """))
        assert_where(exc, path, None, "children")
        assert "cycle" in exc.reason
        assert exc.record in {"a", "b", "c"}

    def test_self_loop_is_a_cycle(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, children: [a]}
        """))
        assert_where(exc, path, "a", "children")
        assert "cycle" in exc.reason

    def test_unreachable_node(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a."}
            - {id: orphan, title: O, criterion: "States o."}
        """))
        assert_where(exc, path, "orphan", "id")
        assert "not reachable" in exc.reason

    def test_unreachable_cycle_is_reported(self, tmp_path):
        exc, _ = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a."}
            - {id: p, title: P, children: [q]}
            - {id: q, title: Q, children: [p]}
        """))
        assert exc.record in {"p", "q"}

    def test_leaf_with_children(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", children: [b]}
            - {id: b, title: B, criterion: "States b."}
        """))
        assert_where(exc, path, "a", "children")
        assert "leaf" in exc.reason

    def test_node_without_children_or_criterion(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a, b]}
            - {id: a, title: A, criterion: "States a."}
            - {id: b, title: B}
        """))
        assert_where(exc, path, "b", "criterion")

    @pytest.mark.parametrize("criterion", ['""', '"   "'])
    def test_empty_criterion(self, tmp_path, criterion):
        exc, path = load_error(tmp_path, with_nodes(f"""
            - {{id: root, title: R, children: [a]}}
            - {{id: a, title: A, criterion: {criterion}}}
        """))
        assert_where(exc, path, "a", "criterion")
        assert "empty" in exc.reason

    def test_invalid_cue_pattern(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "If the user asks for a table, uses one.", cues: ['(table']}
        """))
        assert_where(exc, path, "a", "cues")
        assert "regular expression" in exc.reason

    def test_root_not_a_node(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: top, title: T, children: [a]}
            - {id: a, title: A, criterion: "States a."}
        """, root="root"))
        assert_where(exc, path, None, "root")
        assert "'root'" in exc.reason

    def test_root_key_missing(self, tmp_path):
        exc, path = load_error(tmp_path, """\
            version: 1
            nodes:
              - {id: root, title: R, criterion: "States r."}
        """)
        assert_where(exc, path, None, "root")

    def test_root_listed_as_child(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, children: [b, root]}
            - {id: b, title: B, criterion: "States b."}
        """))
        assert_where(exc, path, "a", "children")
        assert "root" in exc.reason

    def test_child_listed_twice(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a, a]}
            - {id: a, title: A, criterion: "States a."}
        """))
        assert_where(exc, path, "root", "children")
        assert "twice" in exc.reason

    def test_invalid_yaml(self, tmp_path):
        exc, path = load_error(tmp_path, "root: root\nnodes: [\n  - {id: a\n")
        assert_where(exc, path, None, None)
        assert "invalid YAML" in exc.reason

    @pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", ""])
    def test_top_level_not_a_mapping(self, tmp_path, text):
        exc, path = load_error(tmp_path, text)
        assert_where(exc, path, None, None)
        assert "mapping" in exc.reason

    def test_missing_file(self, tmp_path):
        path = tmp_path / "nope.yaml"
        with pytest.raises(TaxonomyError) as info:
            load_tree(path)
        assert str(path) in str(info.value) and "not found" in str(info.value)

    def test_unknown_top_level_field(self, tmp_path):
        exc, path = load_error(tmp_path, "root: root\nweights: {}\nnodes:\n  - {id: root, title: R, criterion: c}\n")
        assert_where(exc, path, None, "weights")

    def test_unknown_node_field(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", weight: 2}
        """))
        assert_where(exc, path, "a", "weight")

    def test_bad_field_type(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", always_on: sometimes}
        """))
        assert_where(exc, path, "a", "always_on")

    def test_bad_polarity(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", polarity: neutral}
        """))
        assert_where(exc, path, "a", "polarity")

    def test_bad_nested_tag(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", tags: {axis: vibes}}
        """))
        assert_where(exc, path, "a", "tags.axis")

    def test_unknown_tag_field(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, title: A, criterion: "States a.", tags: {level: cluster}}
        """))
        assert_where(exc, path, "a", "tags.level")

    def test_missing_title(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {id: a, criterion: "States a."}
        """))
        assert_where(exc, path, "a", "title")

    def test_id_with_whitespace(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a b]}
            - {id: a b, title: A, criterion: "States a."}
        """))
        assert_where(exc, path, "a b", "id")
        assert "whitespace" in exc.reason

    def test_node_without_id_is_named_by_position(self, tmp_path):
        exc, path = load_error(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a]}
            - {title: A, criterion: "States a."}
        """))
        assert_where(exc, path, "#1", "id")


class TestInMemoryErrors:
    def test_source_defaults_to_memory(self):
        with pytest.raises(TaxonomyError) as info:
            RubricTree([mk("root", ("a",)), mk("a", criterion="c"), mk("a", criterion="c")], "root")
        assert info.value.file == "<memory>" and info.value.record == "a"

    def test_source_is_named(self):
        with pytest.raises(TaxonomyError) as info:
            RubricTree([mk("root", ("a",))], "root", source="my.yaml")
        assert str(info.value).startswith("my.yaml: record root: field 'children'")


# ---------------------------------------------------------------------------- weights and queries
@pytest.fixture()
def diamond(tmp_path) -> RubricTree:
    return load_tree(write(tmp_path, DIAMOND))


class TestWeights:
    def test_exact_weights_with_two_parents(self, diamond):
        w = diamond.weights
        assert w["root"] == 1.0
        assert w["A"] == pytest.approx(0.5) and w["B"] == pytest.approx(0.5)
        assert w["x"] == pytest.approx(0.25)
        assert w["y"] == pytest.approx(0.25 + 0.25)
        assert w["z"] == pytest.approx(0.25)

    def test_leaf_weights_sum_to_one(self, diamond):
        assert set(diamond.leaf_weights) == {"x", "y", "z"}
        assert sum(diamond.leaf_weights.values()) == pytest.approx(1.0)
        assert diamond.stats()["weight_sum"] == 1.0

    def test_unbalanced_dag(self):
        # root -> a, m; a -> p, q, r; m -> n; n -> q, s.  q: 1/2*1/3 + 1/2*1*1/2 = 5/12.
        t = RubricTree([
            mk("root", ("a", "m")), mk("a", ("p", "q", "r")), mk("m", ("n",)), mk("n", ("q", "s")),
            mk("p", criterion="p"), mk("q", criterion="q"), mk("r", criterion="r"), mk("s", criterion="s"),
        ], "root")
        lw = t.leaf_weights
        assert lw["p"] == pytest.approx(1 / 6) and lw["r"] == pytest.approx(1 / 6)
        assert lw["q"] == pytest.approx(5 / 12)
        assert lw["s"] == pytest.approx(1 / 4)
        assert sum(lw.values()) == pytest.approx(1.0)
        assert t.depth == 3

    def test_parent_listed_after_child_in_file(self):
        # weights must not depend on file order: b's share arrives from a parent declared late
        t = RubricTree([
            mk("y", criterion="y"), mk("x", criterion="x"), mk("b", ("y",)),
            mk("a", ("x", "b")), mk("root", ("a", "y")),
        ], "root")
        assert t.leaf_weights == pytest.approx({"y": 0.5 + 0.25, "x": 0.25})

    def test_single_leaf_root(self):
        t = RubricTree([mk("root", criterion="only check")], "root")
        assert t.leaf_weights == {"root": 1.0}
        assert t.depth == 0


class TestStructure:
    def test_depth(self, diamond):
        assert diamond.depth == 2

    def test_depth_is_longest_path(self):
        t = RubricTree([
            mk("root", ("a", "leaf1")), mk("a", ("b",)), mk("b", ("leaf2", "leaf1")),
            mk("leaf1", criterion="c"), mk("leaf2", criterion="c"),
        ], "root")
        assert t.depth == 3

    @pytest.mark.parametrize("root_children", [("s", "a"), ("a", "s")])
    def test_depth_independent_of_child_order(self, root_children):
        # leaf L is reached by a short path (root-s-L) and a long one (root-a-b-L)
        t = RubricTree([
            mk("root", root_children), mk("s", ("L",)), mk("a", ("b",)), mk("b", ("L",)),
            mk("L", criterion="c"),
        ], "root")
        assert t.depth == 3
        assert t.leaf_weights["L"] == pytest.approx(1.0)

    def test_parents(self, diamond):
        assert diamond.parents["y"] == ("A", "B")
        assert diamond.parents["x"] == ("A",)
        assert diamond.parents["root"] == ()

    def test_topological_order(self, diamond):
        order = diamond.topological_order
        assert sorted(order) == sorted(diamond.nodes) and len(order) == len(set(order))
        pos = {nid: i for i, nid in enumerate(order)}
        assert order[0] == "root"
        for node in diamond.nodes.values():
            for child in node.children:
                assert pos[node.id] < pos[child]

    def test_descendant_leaves(self, diamond):
        d = diamond.descendant_leaves
        assert d["root"] == {"x", "y", "z"}
        assert d["A"] == {"x", "y"}
        assert d["B"] == {"y", "z"}
        assert d["y"] == {"y"}

    def test_ancestors(self, diamond):
        assert diamond.ancestors("y") == {"A", "B", "root"}
        assert diamond.ancestors("x") == {"A", "root"}
        assert diamond.ancestors("root") == set()

    def test_leaves_macros_and_lookup(self, diamond):
        assert [n.id for n in diamond.leaves] == ["x", "y", "z"]
        assert diamond.macro_capabilities == ["A", "B"]
        assert "y" in diamond and "nope" not in diamond
        assert diamond["y"].polarity == "negative" and diamond["y"].is_leaf
        assert [c.id for c in diamond.children("B")] == ["y", "z"]

    def test_stats(self, diamond):
        assert diamond.stats() == {"leaves": 3, "nodes": 6, "depth": 2,
                                   "macro_capabilities": ["A", "B"], "weight_sum": 1.0}

    def test_name_and_source(self, diamond, tmp_path):
        assert diamond.name == "diamond"
        assert diamond.source == str(tmp_path / "tax.yaml")

    def test_nodes_are_frozen(self, diamond):
        with pytest.raises((AttributeError, TypeError, ValueError)):
            diamond["x"].criterion = "changed"


# ---------------------------------------------------------------------------- CLI
runner = CliRunner()


class TestCli:
    def test_stats_json_key_set(self):
        result = runner.invoke(app, ["tree", "stats", "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert set(data) == {"leaves", "nodes", "depth", "macro_capabilities", "weight_sum"}
        assert data["weight_sum"] == pytest.approx(1.0)

    def test_stats_json_on_a_given_file(self, tmp_path):
        path = write(tmp_path, DIAMOND)
        result = runner.invoke(app, ["tree", "stats", "--json", "--taxonomy", str(path)])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"leaves": 3, "nodes": 6, "depth": 2,
                                             "macro_capabilities": ["A", "B"], "weight_sum": 1.0}

    def test_stats_text(self, tmp_path):
        result = runner.invoke(app, ["tree", "stats", "--taxonomy", str(write(tmp_path, DIAMOND))])
        assert result.exit_code == 0
        assert "leaves: 3" in result.stdout and "weight_sum: 1.0" in result.stdout

    def test_validate_good(self, tmp_path):
        path = write(tmp_path, DIAMOND)
        result = runner.invoke(app, ["tree", "validate", str(path)])
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("ok:") and "3 leaves" in result.stdout

    def test_validate_bad_names_node_and_field(self, tmp_path):
        path = write(tmp_path, with_nodes("""
            - {id: root, title: R, children: [a, broken]}
            - {id: a, title: A, criterion: "States a."}
            - {id: broken, title: B, criterion: ""}
        """))
        result = runner.invoke(app, ["tree", "validate", str(path)])
        assert result.exit_code == 2
        assert "record broken" in result.output and "field 'criterion'" in result.output
        assert str(path) in result.output.replace("\n", "")

    def test_validate_missing_file(self, tmp_path):
        result = runner.invoke(app, ["tree", "validate", str(tmp_path / "missing.yaml")])
        assert result.exit_code == 2 and "not found" in result.output

    def test_bad_taxonomy_option_exits_2(self, tmp_path):
        path = write(tmp_path, "- not a mapping\n")
        result = runner.invoke(app, ["tree", "stats", "--taxonomy", str(path)])
        assert result.exit_code == 2 and "mapping" in result.output

    def test_show_default(self):
        result = runner.invoke(app, ["tree", "show", "--max-depth", "1"])
        assert result.exit_code == 0, result.output
        assert "root" in result.stdout and "w=1.0000" in result.stdout
        assert "medical_skills" in result.stdout

    def test_show_marks_multi_parent_leaf(self, tmp_path):
        result = runner.invoke(app, ["tree", "show", "--taxonomy", str(write(tmp_path, DIAMOND))])
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert "root" in out and "w=1.0000" in out
        y_line = next(line for line in out.splitlines() if " y " in line)
        assert "w=0.5000" in y_line and "parents: A, B" in y_line
