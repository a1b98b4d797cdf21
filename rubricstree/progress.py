"""Progress for steps of unknown length (loading a model, one long judge call): a spinner with the
elapsed time on stderr, and one line when the step ends, so no command sits silent for long.

Steps with a known count use tqdm bars where the work is done; this is for the rest.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def step(message: str, *, enabled: bool = True) -> Iterator[None]:
    """Show ``message`` with a spinner and the elapsed time on stderr while the block runs; print
    ``message: N.N s`` when it ends (on a terminal and in logs alike). ``enabled=False`` is silent
    (a library caller's choice); ``--quiet`` (``reward.progress.set_quiet``) silences it too."""
    from reward.progress import is_quiet

    if not enabled or is_quiet():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    t0 = time.perf_counter()
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as bar:
            bar.add_task(message, total=None)
            yield
    else:
        console.print(f"{message} ...", highlight=False)
        yield
    console.print(f"{message}: {time.perf_counter() - t0:.1f} s", highlight=False)
