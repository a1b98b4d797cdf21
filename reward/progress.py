"""Progress bars on stderr, and the one switch that silences them (``--quiet``).

Long work shows a tqdm bar on stderr whatever prints on stdout (``--json`` output stays clean:
stdout carries only the result). On a terminal the bar redraws in place; in a log file it writes
a line at most every :data:`LOG_INTERVAL_S` seconds, so a silent minute always means a stuck run,
never a hidden bar. ``rubricstree COMMAND --quiet`` turns every bar off (:func:`set_quiet`); a
library caller's ``progress=False`` turns off its own.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["LOG_INTERVAL_S", "bar", "is_quiet", "set_quiet"]

LOG_INTERVAL_S = 30.0
_QUIET = False


def set_quiet(quiet: bool) -> None:
    """Silence (or restore) every progress bar of this process (the CLI's ``--quiet``)."""
    global _QUIET
    _QUIET = bool(quiet)


def is_quiet() -> bool:
    return _QUIET


def bar(total: int | None = None, *, desc: str, unit: str = "it", enabled: bool = True, **kw: Any):
    """A tqdm bar on stderr (see the module docstring); ``enabled=False`` or ``--quiet``: silent."""
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=_QUIET or not enabled,
                dynamic_ncols=tty, mininterval=0.1 if tty else LOG_INTERVAL_S, **kw)
