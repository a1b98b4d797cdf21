"""Options several commands share, one meaning each (the house rule: a flag name means one thing
in every command).

- ``--quiet``: no progress on stderr. Progress always goes to stderr, ``--json`` or not, so a
  long run is never silent unless asked (``reward.progress``).
- ``--concurrency``: prompts (or cases, rows) worked on at once; ``--generate-concurrency``:
  generation requests in flight to the policy (a server, or batches in process). The judge's own
  bound is ``--judge-concurrency``.
- ``--out`` and ``--report``: always a folder (:func:`folder_option`); the files a command writes
  there have fixed names (``scores.jsonl``, ``report.md``, ...). A path that names a file (an
  existing file, or one ending in ``.jsonl``, ``.md``, ...: the older spelling of some commands) is
  refused in one line that says where the file goes now.
- ``--mode`` is only the older spelling of ``--judge-mode``; the stress test's oracle/judge choice
  is ``--verdicts`` (``stress --mode`` is refused, naming both).
- ``--debug`` (a traceback instead of one error line) goes anywhere on the line
  (``rubricstree.errors.SafeGroup``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from reward.errors import InputError

QUIET_HELP = "no progress bars on stderr (results still print; progress never goes to stdout)"


def quiet_option() -> typer.models.OptionInfo:
    return typer.Option(False, "--quiet", "-q", help=QUIET_HELP)


def concurrency_option(default: int, what: str = "prompts") -> typer.models.OptionInfo:
    return typer.Option(default, "--concurrency", min=1, help=f"{what} worked on at once")


def generate_concurrency_option(default: int) -> typer.models.OptionInfo:
    return typer.Option(default, "--generate-concurrency", min=1,
                        help="generation requests in flight to the policy server")


def apply_quiet(quiet: bool) -> bool:
    """Set the process-wide switch for ``--quiet``; returns whether progress is shown."""
    from reward.progress import set_quiet

    set_quiet(quiet)
    return not quiet


FILE_SUFFIXES = frozenset({".jsonl", ".json", ".md", ".markdown", ".html", ".yaml", ".yml", ".png", ".svg",
                           ".pdf", ".csv", ".txt", ".parquet"})


def require_folder(path: Path, flag: str, name: str) -> Path:
    """``path`` as an output folder; a path that names a file is refused, saying that the command
    writes ``DIR/name`` now.

    Raises:
        InputError: ``path`` is an existing file or ends in a file suffix.
    """
    path = Path(path)
    if path.is_file() or (path.suffix.lower() in FILE_SUFFIXES and not path.is_dir()):
        folder = path.with_suffix("") if path.suffix else path.parent
        raise InputError(f"{flag} is a folder now, not a file: {flag} DIR writes DIR/{name} (give {flag} {folder}, "
                         f"not {path})")
    return path


def folder_option(default: Any, flag: str, help: str, *, name: str) -> typer.models.OptionInfo:
    """The ``--out``/``--report`` option of a command: a folder whose main file is ``name``, checked
    when the line is parsed (:func:`require_folder`), before any work."""
    def check(value: Path | None) -> Path | None:
        return None if value is None else require_folder(value, flag, name)

    return typer.Option(default, flag, help=help, callback=check)


def renamed_option(old: str, says: str) -> typer.models.OptionInfo:
    """A hidden option under a flag that now means something else here: refused, ``says`` naming
    the new one (``--mode`` + ``is --verdicts here now ...``)."""
    def refuse(value: str | None) -> None:
        if value is not None:
            raise InputError(f"{old} {says}")

    return typer.Option(None, old, hidden=True, callback=refuse)
