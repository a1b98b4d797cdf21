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


def load_yaml(path: str | Path) -> Any:
    """A YAML file (safe loader) read through :func:`read_text`; a mapping that repeats a key is
    refused with its line (YAML would silently keep the last value). Every YAML input of the
    package is read here or by :func:`parse_yaml`."""
    return parse_yaml(read_text(path), where=str(path))


def parse_yaml(text: str, *, where: str = "<text>") -> Any:
    """YAML text with the safe loader, refusing a repeated key (``where`` names the source)."""
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
    return yaml.load(text, Loader=_UniqueKeys)
