"""One table for a labelled set's parts side by side (``blind``: dev and test), with the gap of
every figure that is a number: ``stress`` and ``route eval`` print it alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def gap(a, b) -> str:
    """b - a of two numbers, or of the first numbers of two 'x / y' cells; '' otherwise."""
    def first(v):
        if isinstance(v, bool):
            return None
        if isinstance(v, (int, float)):
            return float(v)
        try:
            return float(str(v).split("/")[0].split("±")[0])
        except ValueError:
            return None

    x, y = first(a), first(b)
    return "" if x is None or y is None else f"{y - x:+.3f}"


def cell(v) -> str:
    return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def print_parts(title: str, labels: Sequence[str], rows: Mapping[str, Sequence]) -> None:
    """``rows``: a name -> one value per label. Two parts get a gap column (the second minus the first)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    for label in labels:
        table.add_column(label, justify="right")
    if len(labels) == 2:
        table.add_column("gap", justify="right")
    for name, vals in rows.items():
        row = [name, *(cell(v) for v in vals)]
        if len(labels) == 2:
            row.append(gap(*vals))
        table.add_row(*row)
    Console(width=200).print(table)
