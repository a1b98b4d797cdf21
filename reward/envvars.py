"""Environment variables in config files: one syntax, OmegaConf's ``${oc.env:VAR,default}``.

verl reads its YAML with Hydra/OmegaConf, which resolves ``${oc.env:VAR}`` and
``${oc.env:VAR,default}``; our own loaders (the TRL launcher, the verl reward settings file) read
YAML with PyYAML and call :func:`expand_env`, which resolves the same expressions the same way,
so one config line means one thing everywhere, without making omegaconf a dependency:

* the variable's value (a string) when it is set;
* else the default: ``null`` is None, a quoted default loses its quotes, anything else is the
  text itself (OmegaConf turns a default into a string too, and pydantic then reads numbers);
* else an error naming the variable and the config field.

An expression that is the whole value gives the value itself (None stays None); inside a longer
string it is substituted as text. Other ``${...}`` (OmegaConf node references such as
``${trainer.project_name}``) are left alone. The shell form ``${VAR:-default}`` is refused with an
error that shows the ``oc.env`` spelling (OmegaConf would not read it either).
"""

from __future__ import annotations

import os
import re
from typing import Any

from reward.errors import InputError

__all__ = ["expand_env", "resolve_env_string"]

_OC_ENV = re.compile(r"\$\{oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:,([^}]*))?\}")
_SHELL = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}")
_UNSET = object()


def _oc_default(text: str | None) -> Any:
    if text is None:
        return _UNSET
    text = text.strip()
    if text == "null":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _lookup(name: str, default: Any, where: str) -> Any:
    if name in os.environ:
        return os.environ[name]
    if default is not _UNSET:
        return default
    raise InputError(f"environment variable {name} is not set (write ${{oc.env:{name},default}} for a default)",
                     field=where or None)


def resolve_env_string(value: str, *, where: str = "") -> Any:
    """One string with its environment expressions resolved (see the module docstring)."""
    m = _OC_ENV.fullmatch(value.strip())
    if m:
        return _lookup(m.group(1), _oc_default(m.group(2)), where)
    m = _SHELL.search(value)
    if m:
        raise InputError(f"'{m.group(0)}' is the shell form; write ${{oc.env:{m.group(1)},{m.group(2) or 'null'}}}",
                         field=where or None)

    def oc(m: re.Match) -> str:
        return str(_lookup(m.group(1), _oc_default(m.group(2)), where))

    return _OC_ENV.sub(oc, value)


def expand_env(value: Any, *, where: str = "") -> Any:
    """Resolve the environment expressions in every string of a YAML tree.

    Raises:
        InputError: a variable without a default is not set (``field`` says where).
    """
    if isinstance(value, dict):
        return {k: expand_env(v, where=f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where=f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    return resolve_env_string(value, where=where)
