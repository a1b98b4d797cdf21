"""``rubricstree cache``: look after the durable verdict/routing cache (it grows without bound)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True)


@app.command()
def prune(
    older_than_days: float | None = typer.Option(None, "--older-than-days", min=0.0,
                                                 help="delete verdicts stored more than this many days ago"),
    routing: bool = typer.Option(False, "--routing", help="also delete every stored routing and JSON generation (the judges' probe histories stay)"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="cache folder (default: the user cache)"),
) -> None:
    """Delete old verdicts (and routings with --routing); prints the counts."""
    from reward.judge import VerdictCache
    from reward.judge.cache_prune import prune_cache

    if older_than_days is None and not routing:
        raise typer.BadParameter("give --older-than-days DAYS and/or --routing")
    cache = VerdictCache(Path(cache_dir) / "verdicts.sqlite" if cache_dir else None)
    before = cache.path.stat().st_size
    counts = prune_cache(cache, older_than_days=older_than_days, kv=routing)
    typer.echo(json.dumps({**counts, "bytes_before": before, "bytes_after": cache.path.stat().st_size}))
