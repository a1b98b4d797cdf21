"""The rubric tree as a validated DAG, with tree auto-weights and path queries."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

from reward.errors import TaxonomyError
from reward.tree.schema import FaultGroup, Node


class RubricTree:
    """A validated DAG of rubric nodes.

    Invariants checked at construction (each error names the file, the node and the field):
    unique ids, children that exist, no cycles, every node reachable from the root, leaves
    without children, internal nodes with at least one child, every leaf has a criterion.
    """

    def __init__(self, nodes: Iterable[Node], root: str, *, name: str = "taxonomy",
                 source: str = "<memory>", faults: Iterable[FaultGroup] = ()) -> None:
        self.name, self.source, self.root = name, source, root
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.id in self.nodes:
                raise TaxonomyError("duplicate node id", file=source, record=node.id, field="id")
            self.nodes[node.id] = node
        self.aliases: dict[str, str] = {}
        for node in self.nodes.values():
            for alias in node.aliases:
                if alias in self.nodes or alias in self.aliases:
                    other = alias if alias in self.nodes else self.aliases[alias]
                    raise TaxonomyError(f"alias '{alias}' is already taken by '{other}'", file=source,
                                        record=node.id, field="aliases")
                self.aliases[alias] = node.id
        self._validate()
        self.faults: dict[str, FaultGroup] = {}
        self.fault_of: dict[str, str] = {}  # leaf id -> its fault group's id
        self.fault_acts: frozenset[str] = frozenset()  # members that fail their fault alone
        for group in faults:
            self._add_fault(group)

    def _add_fault(self, group: FaultGroup) -> None:
        """Validate one fault group (members are leaves, each in one group at most, none a
        catch-all) and index it; members named by a former id are stored by their current one."""
        rec = f"fault {group.id}"
        if group.id in self.faults or group.id in self.nodes:
            raise self._err(f"fault id '{group.id}' is already taken by a {'fault' if group.id in self.faults else 'node'}",
                            rec, "id")
        members = []
        for m in group.members:
            lid = self.resolve(m)
            if lid is None:
                raise self._err(f"member '{m}' is not a leaf", rec, "members")
            if lid in self.fault_of:
                raise self._err(f"leaf '{lid}' is already in fault '{self.fault_of[lid]}': a leaf checks one fault",
                                rec, "members")
            if self.nodes[lid].catch_all:
                raise self._err(f"leaf '{lid}' is a catch-all: it joins whichever fault fails, not one group",
                                rec, "members")
            if lid in members:
                raise self._err(f"member '{m}' is listed twice", rec, "members")
            members.append(lid)
        acts = []
        for a in group.acts:
            lid = self.resolve(a)
            if lid not in members:
                raise self._err(f"act '{a}' is not a member of the fault", rec, "acts")
            acts.append(lid)
        group = group.model_copy(update={"members": tuple(members), "acts": tuple(acts)})
        self.faults[group.id] = group
        for lid in members:
            self.fault_of[lid] = group.id
        self.fault_acts = self.fault_acts | set(acts)

    # ------------------------------------------------------------------ validation
    def _err(self, msg: str, node: str | None, field: str | None) -> TaxonomyError:
        return TaxonomyError(msg, file=self.source, record=node, field=field)

    def _validate(self) -> None:
        if self.root not in self.nodes:
            raise self._err(f"root '{self.root}' is not a node", None, "root")
        for node in self.nodes.values():
            if node.is_leaf:
                if node.children:
                    raise self._err("a leaf (it has a criterion) cannot have children", node.id, "children")
                if not node.criterion.strip():
                    raise self._err("leaf criterion is empty", node.id, "criterion")
            elif not node.children:
                raise self._err("node has no children and no criterion: every leaf needs a criterion",
                                node.id, "criterion")
            seen: set[str] = set()
            for child in node.children:
                if child not in self.nodes:
                    raise self._err(f"child '{child}' is not a node", node.id, "children")
                if child in seen:
                    raise self._err(f"child '{child}' is listed twice", node.id, "children")
                if child == self.root:
                    raise self._err("the root cannot be a child", node.id, "children")
                seen.add(child)
        self._check_acyclic()
        reachable = self._reachable()
        for nid in self.nodes:
            if nid not in reachable:
                raise self._err("node is not reachable from the root", nid, "id")

    def _check_acyclic(self) -> None:
        WHITE, GREY, BLACK = 0, 1, 2
        colour = dict.fromkeys(self.nodes, WHITE)
        for start in self.nodes:
            if colour[start] != WHITE:
                continue
            stack: list[tuple[str, int]] = [(start, 0)]
            colour[start] = GREY
            while stack:
                nid, i = stack[-1]
                children = self.nodes[nid].children
                if i < len(children):
                    stack[-1] = (nid, i + 1)
                    child = children[i]
                    if colour[child] == GREY:
                        raise self._err(f"cycle: '{child}' is its own ancestor", nid, "children")
                    if colour[child] == WHITE:
                        colour[child] = GREY
                        stack.append((child, 0))
                else:
                    colour[nid] = BLACK
                    stack.pop()

    def _reachable(self) -> set[str]:
        seen, todo = {self.root}, [self.root]
        while todo:
            for child in self.nodes[todo.pop()].children:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen

    # ------------------------------------------------------------------ structure
    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[self.aliases.get(node_id, node_id)]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes or node_id in self.aliases

    def canonical(self, node_id: str) -> str:
        """The current id of ``node_id`` (itself, or the node that lists it under ``aliases``)."""
        return self.aliases.get(node_id, node_id)

    def resolve(self, leaf_id: str) -> str | None:
        """The current id of a leaf named by its id or a former one; None if it names no leaf."""
        nid = self.canonical(leaf_id)
        return nid if nid in self.nodes and self.nodes[nid].is_leaf else None

    def children(self, node_id: str) -> list[Node]:
        return [self.nodes[c] for c in self.nodes[node_id].children]

    @cached_property
    def parents(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {nid: [] for nid in self.nodes}
        for node in self.nodes.values():
            for child in node.children:
                out[child].append(node.id)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def topological_order(self) -> list[str]:
        """Node ids with every parent before its children (Kahn's algorithm)."""
        indeg = {nid: len(p) for nid, p in self.parents.items()}
        order, ready = [], [self.root]
        while ready:
            nid = ready.pop()
            order.append(nid)
            for child in self.nodes[nid].children:
                indeg[child] -= 1
                if indeg[child] == 0:
                    ready.append(child)
        return order

    @cached_property
    def path_counts(self) -> dict[str, int]:
        """How many root-to-node paths reach each node, counted in one pass over the DAG (a
        diamond-shaped taxonomy of 83 nodes has 2**40 paths to its leaves: never list them)."""
        count = dict.fromkeys(self.nodes, 0)
        count[self.root] = 1
        for nid in self.topological_order:
            for child in self.nodes[nid].children:
                count[child] += count[nid]
        return count

    @cached_property
    def leaves(self) -> list[Node]:
        """Leaves in file order."""
        return [n for n in self.nodes.values() if n.is_leaf]

    @cached_property
    def macro_capabilities(self) -> list[str]:
        return list(self.nodes[self.root].children)

    @cached_property
    def depth(self) -> int:
        """Number of edges on the longest root-to-leaf path."""
        d = {self.root: 0}
        for nid in self.topological_order:
            for child in self.nodes[nid].children:
                d[child] = max(d.get(child, 0), d[nid] + 1)
        return max(d.values())

    @cached_property
    def weights(self) -> dict[str, float]:
        """Auto-weights of every node: the root has 1 and each node splits its weight equally
        among its children; a node with several parents receives a share from each, so the
        leaf weights are the sum over root-to-leaf paths of the product of 1/out-degree and
        they add up to 1."""
        w = dict.fromkeys(self.nodes, 0.0)
        w[self.root] = 1.0
        for nid in self.topological_order:
            children = self.nodes[nid].children
            for child in children:
                w[child] += w[nid] / len(children)
        return w

    @cached_property
    def severity(self) -> dict[str, str]:
        """Effective severity of every node: its own ``severity`` if set, else the most severe of
        its parents' (``minor`` at the root). A leaf tagged with the ``emergency_referrals`` theme
        is at least ``major`` wherever it sits (a missed emergency in a specialty branch)."""
        rank = {"minor": 0, "major": 1, "critical": 2}
        out: dict[str, str] = {}
        for nid in self.topological_order:  # parents first
            node = self.nodes[nid]
            sev = node.severity or max((out[p] for p in self.parents[nid]), key=rank.__getitem__, default="minor")
            if node.is_leaf and "emergency_referrals" in node.tags.themes and rank[sev] < rank["major"]:
                sev = "major"
            out[nid] = sev
        return out

    @cached_property
    def leaf_weights(self) -> dict[str, float]:
        return {leaf.id: self.weights[leaf.id] for leaf in self.leaves}

    @cached_property
    def descendant_leaves(self) -> dict[str, frozenset[str]]:
        """For every node, the ids of the leaves beneath it (a leaf's set is itself)."""
        out: dict[str, frozenset[str]] = {}
        for nid in reversed(self.topological_order):
            node = self.nodes[nid]
            out[nid] = frozenset([nid]) if node.is_leaf else frozenset().union(
                *(out[c] for c in node.children))
        return out

    def ancestors(self, node_id: str) -> set[str]:
        seen, todo = set(), list(self.parents[node_id])
        while todo:
            nid = todo.pop()
            if nid not in seen:
                seen.add(nid)
                todo.extend(self.parents[nid])
        return seen

    def stats(self) -> dict:
        return {
            "leaves": len(self.leaves),
            "nodes": len(self.nodes),
            "depth": self.depth,
            "macro_capabilities": self.macro_capabilities,
            "weight_sum": round(sum(self.leaf_weights.values()), 12),
        }
