"""``rubricstree tree``: stats, validate and show the rubric tree."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reward.errors import TaxonomyError

app = typer.Typer(no_args_is_help=True)

TaxonomyOpt = typer.Option(None, "--taxonomy", help="taxonomy YAML (default: the packaged one)")


def _load(path: Path | None):
    from reward.tree import load_tree

    try:
        return load_tree(path)
    except TaxonomyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@app.command()
def stats(taxonomy: Path | None = TaxonomyOpt,
          as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Counts of leaves and nodes, depth, macro capabilities and the leaf weight sum."""
    s = _load(taxonomy).stats()
    if as_json:
        typer.echo(json.dumps(s))
    else:
        for k, v in s.items():
            typer.echo(f"{k}: {v}")


@app.command()
def validate(file: Path = typer.Argument(..., help="taxonomy YAML to check")) -> None:
    """Validate a taxonomy file; exits 2 with the file, node and field of the first error."""
    t = _load(file)
    typer.echo(f"ok: {file} ({len(t.leaves)} leaves, {len(t.nodes)} nodes, depth {t.depth})")


@app.command()
def show(taxonomy: Path | None = TaxonomyOpt,
         max_depth: int = typer.Option(99, help="stop below this depth")) -> None:
    """Print the tree with each node's auto-weight; nodes with several parents are marked."""
    from rich.console import Console
    from rich.tree import Tree

    t = _load(taxonomy)
    w = t.weights

    def label(nid: str) -> str:
        n = t[nid]
        multi = f" [dim](parents: {', '.join(t.parents[nid])})[/dim]" if len(t.parents[nid]) > 1 else ""
        kind = "[green]leaf[/green] " if n.is_leaf else ""
        pol = " [red](-)[/red]" if n.is_leaf and n.polarity == "negative" else ""
        return f"{kind}[bold]{nid}[/bold] {n.title}{pol} [cyan]w={w[nid]:.4f}[/cyan]{multi}"

    def grow(rt: Tree, nid: str, depth: int) -> None:
        if depth >= max_depth:
            return
        for child in t[nid].children:
            grow(rt.add(label(child)), child, depth + 1)

    root = Tree(label(t.root))
    grow(root, t.root, 0)
    Console().print(root)
