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


def read_text(path: str | Path) -> str:
    """The whole file as text (see :func:`decode_line`); InputError for a missing file or a folder."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder, not a file", file=str(p))
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(p)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(p)) from exc
    return "".join(decode_line(line, p, n) for n, line in enumerate(raw.splitlines(keepends=True), start=1))


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
    data = yaml.load(text, Loader=_UniqueKeys)
    check_value_sizes(data, where)
    return data
