"""The command line's last line of defence: no traceback for a user's mistake.

Every command runs inside :class:`SafeGroup`. An error raised on purpose (``RubricsTreeError``:
bad input, a judge failure) prints ``error: <message>`` (which names the file, record and field)
and exits 2; a file that is not UTF-8, a path that is a folder, a missing file and other OS errors
print the path and exit 2; anything else is a bug and prints one line naming the exception, exit 1.
An error line is at most :data:`MAX_LINE` characters (a huge value in it is cut in the middle).
``--debug`` anywhere on the line (``rubricstree --debug score ...`` or ``rubricstree score ... --debug``;
or ``RUBRICSTREE_DEBUG=1``) lets the traceback through instead.
Click's own exits (usage errors, ``typer.Exit``) pass untouched.
"""

from __future__ import annotations

import os

import click
import typer
from typer._click import exceptions as typer_click  # typer 0.29 vendors its own click
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from reward.errors import RubricsTreeError

DEBUG_ENV = "RUBRICSTREE_DEBUG"
MAX_LINE = 1000  # characters of one error line: a 10 MB value in a config must not become a 10 MB line


def bounded(text: str, limit: int = MAX_LINE) -> str:
    """``text`` with its middle cut when longer than ``limit``: the start and the end (which
    usually name the file and the reason) are kept, and the line says how much was cut."""
    if len(text) <= limit:
        return text
    keep = (limit - 40) // 2
    return f"{text[:keep]}… ({len(text) - 2 * keep:,} characters cut) …{text[-keep:]}"


def describe(exc: BaseException) -> tuple[str, int]:
    """(message, exit status) for an exception that reached the command line."""
    if isinstance(exc, RubricsTreeError):
        return str(exc), getattr(exc, "exit_code", 2)
    if isinstance(exc, UnicodeError):
        return f"a file is not valid UTF-8 text ({exc}); convert it to UTF-8", 2
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return f"{where}{exc.strerror or exc}", 2
    if isinstance(exc, RecursionError):
        return "an input is nested too deeply to read", 2
    return f"internal error {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", 1


def debugging() -> bool:
    """Whether ``--debug`` (anywhere on the line) or ``RUBRICSTREE_DEBUG`` asks for tracebacks."""
    if os.environ.get(DEBUG_ENV):
        return True
    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def fail(exc: Exception, status: int | None = None) -> typer.Exit:
    """Print ``error: <exc>`` and return the exit to raise: ``status``, else the error's own
    ``exit_code`` (a stopped judge run: 4 deadline, 5 judge unavailable), else 2 (bad input or
    settings). Under ``--debug`` the error itself is raised again, with its traceback."""
    if debugging():
        raise exc
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(status if status is not None else getattr(exc, "exit_code", 2))


DEBUG_FLAG = "--debug"


def debug_first(args: list[str]) -> list[str]:
    """``args`` with every ``--debug`` before a ``--`` moved to the front, where the top-level
    group reads it: the flag works after the subcommand too."""
    end = args.index("--") if "--" in args else len(args)
    n = args[:end].count(DEBUG_FLAG)
    return [DEBUG_FLAG] * n + [a for a in args[:end] if a != DEBUG_FLAG] + args[end:] if n else args


class SafeGroup(TyperGroup):
    """A Typer group that turns exceptions from its commands into one ``error:`` line."""

    def parse_args(self, ctx, args):
        if ctx.parent is None:  # the top-level group: --debug may follow the subcommand
            args = debug_first(list(args))
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, typer.Exit,
                typer.Abort, typer_click.ClickException):
            raise
        except Exception as exc:
            if debugging():
                raise
            message, status = describe(exc)
            typer.secho(f"error: {bounded(message)}", err=True, fg="red")
            raise typer.Exit(status) from exc
