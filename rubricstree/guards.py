"""Checks every CLI command shares before and after its work: output paths that would destroy an
input or each other, and the scored fraction that decides the exit status.

Data flow: a command passes its input and output paths to :func:`check_distinct_paths` before
writing anything, and its (scored, total) counts to :func:`check_scored` at the end.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import typer

from reward.errors import InputError

EXIT_TOO_FEW_SCORED = 3


def file_key(p: str | Path) -> tuple:
    """What makes two paths one file: the device and inode of an existing file (a hard link, a
    symbolic link or another spelling of it has the same), else the resolved path."""
    rp = Path(p).expanduser().resolve()
    try:
        st = rp.stat()
    except OSError:
        return ("path", str(rp))
    return ("inode", st.st_dev, st.st_ino)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file (:func:`file_key`)."""
    return file_key(a) == file_key(b)


def check_distinct_paths(inputs: dict[str, Path | None], outputs: dict[str, Path | None]) -> None:
    """Refuse an output that is an input or another output, compared by file identity (device
    and inode): ``./a.jsonl``, ``a.jsonl``, a symbolic link to it and a hard link of it are one
    file. A path that does not exist yet is compared after resolving links and relative parts.

    Raises:
        InputError: naming both options and the path.
    """
    seen: dict[tuple, str] = {}
    for name, p in inputs.items():
        if p is not None:
            seen.setdefault(file_key(p), name)
    for name, p in outputs.items():
        if p is None:
            continue
        rp = Path(p).expanduser().resolve()
        key = file_key(p)
        if key in seen:
            raise InputError(f"{name} is the same file as {seen[key]} ({rp}); it would be overwritten: "
                             "choose another path", field=name)
        if rp.is_dir():
            raise InputError(f"{name} is a folder ({rp}); give a file path", field=name)
        seen[key] = name


_WHERE = re.compile(r"^(leaf \S+|rubric item \d+|item \d+|\S+/(clean|perturbed)): ")


def failure_reasons(failures: Iterable[str], top: int = 3) -> list[tuple[str, int]]:
    """The ``top`` most common failure reasons with their counts, the item they happened to
    (``leaf X: ``, ``rubric item N: ``) taken off so one cause counts once per occurrence."""
    counts = Counter(_WHERE.sub("", str(f)).strip() for f in failures if f)
    return counts.most_common(top)


def check_scored(scored: int, total: int, min_scored: float, what: str = "rollouts",
                 reasons: Sequence[tuple[str, int]] = ()) -> None:
    """Print the scored fraction when part is missing, with the most common failure ``reasons``
    (``failure_reasons``); exit 3 when nothing was scored or less than ``min_scored`` (a fraction) was."""
    if total == 0:
        return
    frac = scored / total
    if scored < total:
        typer.secho(f"SCORED {scored} of {total} {what} ({frac:.1%}); {total - scored} unscored"
                    + (", because:" if reasons else " (see failures)"), err=True, fg="yellow", bold=True)
        for reason, n in reasons:
            typer.secho(f"  {n} x {reason[:300]}", err=True, fg="yellow")
    if scored == 0 or frac < min_scored:
        need = f"--min-scored {min_scored:g}" if scored else "at least one"
        typer.secho(f"error: only {scored} of {total} {what} scored ({frac:.1%}); {need} required",
                    err=True, fg="red", bold=True)
        raise typer.Exit(EXIT_TOO_FEW_SCORED)
