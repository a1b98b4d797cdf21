"""Read a taxonomy file's header (version, changelog) and write a new version of it.

The new version is written by editing the old file's text, so its comments and layout survive:
the ``version`` line is bumped, a ``changelog`` entry is added before ``nodes:``, every node whose
children changed gets a new flow-style ``children: [...]`` line, and new nodes are appended at the
end of the node list. The edited text is then parsed back and compared with the intended nodes,
version and changelog; if anything differs (a layout this editor does not know), the file is
written from scratch with ``yaml.safe_dump`` instead, which loses comments but never content.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from reward.errors import InputError, TaxonomyError
from reward.textio import parse_yaml, read_text
from reward.tree.graph import RubricTree
from reward.tree.loader import default_taxonomy_path, load_tree
from reward.tree.schema import ChangelogEntry, Node, TaxonomyFile

PLAIN_ID = re.compile(r"[A-Za-z0-9_.\-]+")
WIDTH = 100


def read_header(path: str | Path | None) -> TaxonomyFile:
    """The file's top-level fields (``nodes`` left as raw dicts)."""
    path = Path(path) if path is not None else default_taxonomy_path()
    text = read_text(path)  # a folder, or bytes that are not UTF-8: named with the file and line
    try:
        return TaxonomyFile.model_validate(parse_yaml(text, where=str(path)))
    except (OSError, yaml.YAMLError, ValidationError, TypeError) as exc:
        raise TaxonomyError(f"cannot read the taxonomy header: {exc}", file=str(path)) from exc


def node_dict(node: Node) -> dict:
    """A node as written in YAML: required fields, then whatever differs from the defaults."""
    d = node.model_dump(mode="json", exclude_defaults=True)
    order = ["id", "title", "definition", "children", "criterion", "polarity", "grounding", "tags", "always_on"]
    out = {k: d[k] for k in order if k in d}
    out.update({k: v for k, v in d.items() if k not in out})  # every other field the schema has
    if node.is_leaf:
        out["polarity"] = node.polarity  # say it, as the shipped file does
    if not out.get("tags"):
        out.pop("tags", None)
    return out


def _flow(ids: tuple[str, ...], indent: str) -> str:
    names = [i if PLAIN_ID.fullmatch(i) else yaml.safe_dump(i).strip().removesuffix("...").strip() for i in ids]
    head = f"{indent}children: ["
    lines, cur = [], head
    for k, name in enumerate(names):
        piece = name + ("," if k < len(names) - 1 else "]")
        if cur != head and not cur.endswith(" ") and len(cur) + 1 + len(piece) > WIDTH:
            lines.append(cur)
            cur = " " * len(head) + piece
        else:
            cur = cur + ("" if cur == head else " ") + piece
    lines.append(cur if names else head + "]")
    return "\n".join(lines)


def _indented(obj, indent: str) -> list[str]:
    text = yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, width=WIDTH, default_flow_style=False)
    return [indent + ln if ln else ln for ln in text.rstrip("\n").split("\n")]


def _edit_text(text: str, old: RubricTree, nodes: list[Node], version: int, entry: ChangelogEntry) -> str | None:
    """The old text with the changes made in place, or None when its layout is not one we edit."""
    lines = text.split("\n")
    id_re = re.compile(r"^(\s*)- id:\s*['\"]?([^'\"\s#]+)['\"]?\s*(#.*)?$")
    starts = [(i, m.group(1), m.group(2)) for i, ln in enumerate(lines) if (m := id_re.match(ln))]
    if not starts or len({s[1] for s in starts}) != 1:
        return None
    item_indent = starts[0][1]
    block_of = {nid: (i, starts[k + 1][0] if k + 1 < len(starts) else len(lines)) for k, (i, _, nid) in enumerate(starts)}
    # nodes must be the last top-level key: new nodes are appended at the end of the file
    if any(re.match(r"^[A-Za-z_]", ln) for ln in lines[starts[-1][0]:]):
        return None
    replacements: dict[int, tuple[int, list[str]]] = {}
    for n in nodes:
        if n.id in old.nodes and old.nodes[n.id].children != n.children:
            if n.id not in block_of:
                return None
            b0, b1 = block_of[n.id]
            hit = next(((j, m) for j in range(b0 + 1, b1)
                        if (m := re.match(r"^(\s+)children:\s*(.*)$", lines[j]))), None)
            if hit is None:
                return None
            j, m = hit
            end = j
            if m.group(2).startswith("["):
                while "]" not in lines[end].split("#")[0]:
                    end += 1
                    if end >= b1:
                        return None
            elif m.group(2).strip() == "":
                while end + 1 < b1 and re.match(rf"^{m.group(1)}\s*- ", lines[end + 1]):
                    end += 1
            else:
                return None
            replacements[j] = (end, _flow(n.children, m.group(1)).split("\n"))
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in replacements:
            end, new = replacements[i]
            out += new
            i = end + 1
        else:
            out.append(lines[i])
            i += 1
    new_nodes = [n for n in nodes if n.id not in old.nodes]
    # top-level blocks after the node list (the fault groups) stay after it: new nodes go before them
    tail_at = next((k for k, line in enumerate(out) if re.match(r"^[A-Za-z_]\w*:", line)
                    and k > next((j for j, x in enumerate(out) if x.startswith("nodes:")), len(out))), len(out))
    tail = out[tail_at:]
    out = out[:tail_at]
    while out and (out[-1] == "" or out[-1].startswith("#")) and tail:
        tail.insert(0, out.pop())  # the comment heading the next block moves with it
    while out and out[-1] == "":
        out.pop()
    if new_nodes:
        out += ["", f"{item_indent}# ---- added in version {version} by `rubricstree tree apply` ----"]
        for n in new_nodes:
            out += _indented([node_dict(n)], item_indent) + [""]
        out.pop()
    if tail:
        while tail and tail[0] == "":
            tail.pop(0)
        out += ["", *tail]
        while out and out[-1] == "":
            out.pop()
    out.append("")
    body = "\n".join(out)
    if re.search(r"^version:\s*\d+\s*$", body, flags=re.MULTILINE):
        body = re.sub(r"^version:\s*\d+\s*$", f"version: {version}", body, count=1, flags=re.MULTILINE)
    else:
        body = re.sub(r"^nodes:", lambda _: f"version: {version}\nnodes:", body, count=1, flags=re.MULTILINE)
    entry_lines = _indented([entry.model_dump(mode="json")], "  ")
    m = re.search(r"^changelog:.*$", body, flags=re.MULTILINE)
    if m:
        nxt = re.search(r"^[A-Za-z_]", body[m.end():], flags=re.MULTILINE)
        if nxt is None:
            return None
        cut = m.end() + nxt.start()
        head = body[:cut].rstrip("\n")
        body = head + "\n" + "\n".join(entry_lines) + "\n" + body[cut:]
    else:
        block = "changelog:\n" + "\n".join(entry_lines) + "\nnodes:"
        body = re.sub(r"^nodes:", lambda _: block, body, count=1, flags=re.MULTILINE)
    return body


def _matches(text: str, nodes: list[Node], version: int, changelog: list[ChangelogEntry],
             faults: list[dict]) -> bool:
    try:
        doc = TaxonomyFile.model_validate(parse_yaml(text, where="<the taxonomy as written>"))
        parsed = [Node.model_validate(d) for d in doc.nodes]
    except (yaml.YAMLError, ValidationError, TypeError, InputError):
        return False
    return (doc.version == version and doc.changelog == changelog and doc.faults == faults
            and [n.model_dump() for n in parsed] == [n.model_dump() for n in nodes])


def render_new_version(old_path: str | Path | None, old: RubricTree, nodes: list[Node], entry: ChangelogEntry,
                       ) -> tuple[str, bool]:
    """The text of the new version and whether the old file's layout and comments were kept."""
    old_path = Path(old_path) if old_path is not None else default_taxonomy_path()
    header = read_header(old_path)
    changelog = [*header.changelog, entry]
    text = _edit_text(read_text(old_path), old, nodes, entry.version, entry)
    if text is not None and _matches(text, nodes, entry.version, changelog, header.faults):
        return text, True
    data = {"version": entry.version, "name": header.name, "root": header.root,
            "changelog": [e.model_dump(mode="json") for e in changelog], "nodes": [node_dict(n) for n in nodes]}
    if header.faults:
        data["faults"] = header.faults
    text = (f"# {header.name}, version {entry.version}: written by `rubricstree tree apply` from {old_path.name}\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=WIDTH))
    return text, False


def write_new_version(old_path: str | Path | None, old: RubricTree, nodes: list[Node], entry: ChangelogEntry,
                      out: str | Path) -> tuple[RubricTree, bool]:
    """Write the new version to ``out`` and load it back with the project's loader (validation,
    weights). Returns the loaded tree and whether the old layout was kept."""
    text, kept = render_new_version(old_path, old, nodes, entry)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return load_tree(out), kept
