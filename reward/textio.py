"""Reading user text files safely: UTF-8 (a byte-order mark is accepted), with an error that names
the file and the line of the first bad byte, and lone UTF-16 surrogates (``"\\ud800"`` escapes in
JSON) replaced by U+FFFD so they can never crash an encoder downstream (HTTP body, tokenizer).

Data flow: path -> :func:`read_text` (or :func:`decode_line` per line) -> str;
parsed JSON -> :func:`clean_surrogates` -> the same object with only encodable strings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from reward.errors import InputError

BOM = "\ufeff"
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_line(raw: bytes, path: str | Path, lineno: int) -> str:
    """One line of a file as text; InputError naming the file, line and byte offset when it is
    not UTF-8."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 (byte {exc.start} of the line: {raw[exc.start:exc.start + 4]!r}); "
                         "save the file as UTF-8", file=str(path), record=f"line {lineno}") from exc
    return text[1:] if lineno == 1 and text.startswith(BOM) else text


# The largest whole-file input read into memory at once (configs, taxonomies, case files, templates,
# calibration records); row data is JSONL, read line by line, each line at most MAX_LINE_BYTES.
MAX_FILE_BYTES = 64 << 20
MAX_LINE_BYTES = 64 << 20
MAX_JSON_DEPTH = 100  # a record nests a few levels (a conversation's messages, a rubric's items)


def read_text(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The whole file as text (see :func:`decode_line`); InputError for a missing file, a folder,
    something that is not a regular file (a pipe, ``/dev/zero``: reading it could never end) or a
    file over ``max_bytes``."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder, not a file", file=str(p))
    check_file_size(p, max_bytes)
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(p)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(p)) from exc
    return "".join(decode_line(line, p, n) for n, line in enumerate(raw.splitlines(keepends=True), start=1))


def check_file_size(p: Path, max_bytes: int = MAX_FILE_BYTES) -> None:
    """Refuse what is not a regular file, or is larger than ``max_bytes``, before reading it.

    Raises:
        InputError: naming the file (a missing file: "file not found")."""
    import stat as _stat

    try:
        st = p.stat()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(p)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(p)) from exc
    if not _stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file (a device, a pipe or a socket)", file=str(p))
    if st.st_size > max_bytes:
        raise InputError(f"{st.st_size:,} bytes (at most {max_bytes:,} are read for this input)", file=str(p))


def load_json_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """A whole JSON file through :func:`read_text`; InputError for invalid or too deeply nested JSON."""
    import json

    text = read_text(path, max_bytes=max_bytes)
    try:
        return clean_surrogates(json.loads(text))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (line {exc.lineno})", file=str(path)) from exc
    except RecursionError as exc:
        raise InputError("JSON nested too deeply", file=str(path)) from exc


def nesting_depth(obj: Any, limit: int) -> int:
    """How deep lists and dicts nest in ``obj``, counted without recursion and stopped past
    ``limit`` (a parsed line may nest as deep as the JSON parser allowed: about Python's own stack)."""
    if not isinstance(obj, (list, dict)):
        return 0
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        # only containers go on the stack: a long flat list costs one pass, not a tuple per value
        stack.extend((x, d + 1) for x in (node.values() if isinstance(node, dict) else node)
                     if isinstance(x, (list, dict)))
    return deepest


def clean_surrogates(obj: Any) -> Any:
    """``obj`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj) if _SURROGATE.search(obj) else obj
    if isinstance(obj, list):
        return [clean_surrogates(x) for x in obj]
    if isinstance(obj, dict):
        return {clean_surrogates(k): clean_surrogates(v) for k, v in obj.items()}
    return obj


# The longest text one value of a YAML input may hold: a path, a name, a prompt or a rubric's text
# are far shorter. A 10 MB value reached the command line as an OS error quoting it ("File name too
# long: xxxx...") that named neither the file nor the field; it is refused at load, named.
MAX_VALUE_CHARS = 100_000


def check_value_sizes(obj: Any, where: str, field: str = "") -> None:
    """Refuse a string (key or value) longer than :data:`MAX_VALUE_CHARS` anywhere in ``obj``.

    Raises:
        InputError: naming ``where`` (the file) and the dotted field path of the value.
    """
    stack = [(obj, field)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            if len(node) > MAX_VALUE_CHARS:
                raise InputError(f"a value of {len(node):,} characters (at most {MAX_VALUE_CHARS:,} are accepted; "
                                 f"it starts {node[:40]!r})", file=where, field=at or None)
        elif isinstance(node, dict):
            for k, v in node.items():
                name = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and len(k) > MAX_VALUE_CHARS:
                    raise InputError(f"a key of {len(k):,} characters (at most {MAX_VALUE_CHARS:,} are accepted)",
                                     file=where, field=(at + "." if at else "") + k[:40] + "…")
                stack.append((v, name))
        elif isinstance(node, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(node))


def load_yaml(path: str | Path) -> Any:
    """A YAML file (safe loader) read through :func:`read_text`; a mapping that repeats a key is
    refused with its line (YAML would silently keep the last value). Every YAML input of the
    package is read here or by :func:`parse_yaml`."""
    return parse_yaml(read_text(path), where=str(path))


def parse_yaml(text: str, *, where: str = "<text>") -> Any:
    """YAML text with the safe loader, refusing a repeated key and an oversized value
    (:func:`check_value_sizes`); ``where`` names the source in errors."""
    import yaml

    class _UniqueKeys(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise InputError(f"duplicate key {key!r}", file=where, record=f"line {key_node.start_mark.line + 1}")
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return loader.construct_mapping(node, deep=True)

    _UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    if len(text) > MAX_FILE_CHARS:
        raise InputError(f"a YAML input of {len(text):,} characters (at most {MAX_FILE_CHARS:,} are accepted)",
                         file=where)
    loader = _UniqueKeys(text)
    try:
        node = loader.get_single_node()  # PyYAML composes nested collections by recursion
        if node is None:
            return None
        check_yaml_size(node, where)  # before any value is built: aliases can expand a few bytes without end
        data = loader.construct_document(node)
    except RecursionError as exc:  # nested deeper than Python's stack before the depth bound could count
        raise InputError(f"a YAML input that nests deeper than Python can read (at most {MAX_YAML_DEPTH} levels "
                         "are accepted)", file=where) from exc
    finally:
        loader.dispose()
    check_value_sizes(data, where)
    return data


# Bounds on what a YAML input may expand to. Aliases (``*a``) reuse a node: ten levels of ten
# aliases each is 10**10 values from 453 bytes, which every walk over the loaded data (validation,
# JSON dumps, hashing) visits one by one. Our largest input, the taxonomy, expands to ~12,000 nodes.
MAX_YAML_NODES = 1_000_000
MAX_YAML_DEPTH = 100
MAX_FILE_CHARS = 64 << 20  # a config, a taxonomy or a case file; rollouts and data are JSONL


def check_yaml_size(root: Any, where: str) -> None:
    """Refuse a composed YAML node graph that expands (aliases followed) to more than
    :data:`MAX_YAML_NODES` nodes or nests deeper than :data:`MAX_YAML_DEPTH`; counted once per
    distinct node (memoised), so the check itself is linear in the text.

    Raises:
        InputError: naming the file and the line of the first alias-heavy node.
    """
    import yaml

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    # iterative post-order walk over distinct nodes (a recursive one would itself hit Python's limit)
    stack: list[tuple[Any, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node, yaml)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_YAML_NODES or depth[key] > MAX_YAML_DEPTH:
                what = (f"expands to more than {MAX_YAML_NODES:,} values (aliases repeat nodes)"
                        if size[key] > MAX_YAML_NODES else f"nests deeper than {MAX_YAML_DEPTH} levels")
                raise InputError(f"refused: this YAML {what}; write the values out, or split the file",
                                 file=where, record=f"line {node.start_mark.line + 1}")
            continue
        if key in size:
            continue
        if key in on_path:  # a recursive alias: no finite expansion
            raise InputError("refused: a YAML alias refers to a node that contains it", file=where,
                             record=f"line {node.start_mark.line + 1}")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node, yaml) if id(k) not in size)


def _children(node: Any, yaml: Any) -> list:
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
