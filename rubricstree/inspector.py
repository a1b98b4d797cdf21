"""``rubricstree inspect``: one self-contained HTML page that shows why each rollout got its reward.

Reads a scores file (``rubricstree score --out``, ``rubricstree demo``), a verl rollout dump, or a
TRL run's records folder, and the rollouts it was scored from (for the prompt and the completion)
when the records do not carry them, optionally a second one to compare (the same prompts under
another checkpoint, step or judge), and writes ``DIR/inspector.html``: no server, no network, open
it from disk. See ``docs/inspector.md``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from rubricstree.common_options import folder_option
from rubricstree.errors import fail


def inspect_command(
    scores: Path = typer.Argument(..., help="scores JSONL (scores.jsonl of rubricstree score --out DIR), a verl rollout dump, or a TRL "
                                            "run's records folder (its output_dir or output_dir/rubric_records)"),
    out: Path = folder_option(..., "--out", "output folder (inspector.html is written there)", name="inspector.html"),
    rollouts: Path | None = typer.Option(None, "--rollouts",
                                         help="the rollouts JSONL the scores came from (prompt and completion)"),
    compare: Path | None = typer.Option(None, "--compare", help="a second scores JSONL or records folder: same "
                                                                "prompts, other checkpoint, step or judge"),
    compare_rollouts: Path | None = typer.Option(None, "--compare-rollouts",
                                                 help="the rollouts of --compare (default: --rollouts)"),
    taxonomy: Path | None = typer.Option(None, "--taxonomy", help="taxonomy YAML (default: the one the run's "
                                         "recorded settings name, else the packaged one)"),
    name: str | None = typer.Option(None, "--name", help="the run's name on the page (default: the file name)"),
    compare_name: str | None = typer.Option(None, "--compare-name", help="the compared run's name"),
    text_limit: int | None = typer.Option(None, "--text-limit", min=1,
                                          help="keep the first N characters of each prompt and completion"),
    title: str | None = typer.Option(None, "--title", help="the page's title"),
) -> None:
    """Write an HTML page to inspect scored rollouts: verdicts, sub-tree, per-leaf statistics."""
    from reward.tree import load_tree
    from training.inspector import write_inspector

    try:
        for p in (rollouts, compare_rollouts):
            if p is not None and not p.is_file():
                raise typer.BadParameter(f"no such file: {p}")
        for p in (scores, compare):
            if p is not None and not p.exists():
                raise typer.BadParameter(f"no such file or folder: {p}")
        if compare_rollouts is not None and compare is None:
            raise typer.BadParameter("--compare-rollouts needs --compare")
        tree = load_tree(taxonomy) if taxonomy is not None else None
        path = write_inspector(scores, out, rollouts=rollouts, compare=compare, compare_rollouts=compare_rollouts,
                               tree=tree, names=(name, compare_name) if name or compare_name else None,
                               text_limit=text_limit, title=title)
    except (RubricsTreeError, OSError) as exc:
        raise fail(exc, 2) from exc
    typer.echo(f"inspector: {path}")
