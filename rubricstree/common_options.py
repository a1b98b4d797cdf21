"""Options several commands share, one meaning each (the house rule: a flag name means one thing
in every command).

- ``--quiet``: no progress on stderr. Progress always goes to stderr, ``--json`` or not, so a
  long run is never silent unless asked (``reward.progress``).
- ``--concurrency``: prompts (or cases, rows) worked on at once; ``--generate-concurrency``:
  generation requests in flight to the policy (a server, or batches in process). The judge's own
  bound is ``--judge-concurrency``.
"""

from __future__ import annotations

import typer

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
