"""``rubricstree tree``: stats, validate, show and lint the rubric tree."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reward.errors import TaxonomyError
from rubricstree.common_options import apply_quiet, quiet_option
from rubricstree.errors import fail

app = typer.Typer(no_args_is_help=True)

TaxonomyOpt = typer.Option(None, "--taxonomy", help="taxonomy YAML (default: the packaged one)")
FileArg = typer.Argument(..., help="taxonomy YAML to check")
OptionalFileArg = typer.Argument(None, help="taxonomy YAML (default: the packaged one)")


def _load(path: Path | None):
    from reward.tree import load_tree

    try:
        return load_tree(path)
    except TaxonomyError as exc:
        raise fail(exc, 2) from exc


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
def validate(file: Path = FileArg) -> None:
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


@app.command()
def lint(file: Path | None = OptionalFileArg,
         as_json: bool = typer.Option(False, "--json", help="print the issues as JSON"),
         threshold: float = typer.Option(0.9, "--duplicate-threshold", min=0.01, max=1.0,
                                         help="embedding cosine above which two criteria are near-duplicates"),
         duplicates: bool = typer.Option(True, "--duplicates/--no-duplicates",
                                         help="run the embedding near-duplicate check (loads MiniLM)"),
         quiet: bool = quiet_option()) -> None:
    """Lint leaf criteria: missing triggers, vacuous wording, bundled checks, near-duplicates.
    Exits 1 when anything is flagged, 2 when the file is invalid."""
    from reward.tree.lint import default_encoder, lint_tree
    from rubricstree.progress import step

    progress = apply_quiet(quiet)
    t = _load(file)
    encoder = None
    if duplicates:
        with step("loading all-MiniLM-L6-v2 for the near-duplicate check", enabled=progress):
            encoder = default_encoder(progress=progress)
    issues = lint_tree(t, threshold=threshold, encoder=encoder, duplicates=duplicates)
    if as_json:
        typer.echo(json.dumps({"file": t.source, "leaves": len(t.leaves), "n_issues": len(issues),
                               "issues": [i.model_dump() for i in issues]}))
    else:
        for i in issues:
            other = f" <-> {i.other}" if i.other else ""
            typer.echo(f"{t.source}: {i.node}{other}: {i.kind}: {i.message}")
        typer.echo(f"{len(issues)} issue(s) in {len(t.leaves)} leaves" if issues
                   else f"ok: {t.source} ({len(t.leaves)} leaves, no issues)")
    if issues:
        raise typer.Exit(1)
