"""``rubricstree healthbench``: score graded HealthBench rows the way HealthBench reports them."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reward.errors import InputError, RubricsTreeError
from rubricstree.errors import fail

app = typer.Typer(no_args_is_help=True)


def _length_coefficient(value: str) -> float:
    from reward.healthbench.variants import LENGTH_ADJUST

    if value in LENGTH_ADJUST:
        return LENGTH_ADJUST[value]
    try:
        return float(value)
    except ValueError:
        raise InputError(f"expected a number or one of {', '.join(LENGTH_ADJUST)}, got '{value}'",
                         field="--length-coefficient") from None


def _load_verdicts(path: Path, rows) -> dict[str, list[bool]]:
    """Read ``{"prompt_id", "rubric_index", "criteria_met"}`` lines into one list per prompt with
    the evaluation's verdicts reader, exactly: every item of every row once, nothing else."""
    from training.eval.records import read_verdicts

    n_items = {row.prompt_id: len(row.rubrics) for row in rows}
    met = read_verdicts(path, n_items, exact=True)
    return {pid: [met[(pid, i)] for i in range(n)] for pid, n in n_items.items()}


def _load_responses(path: Path, rows) -> dict[str, str]:
    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    from reward.jsonl import iter_jsonl, validation_error

    class ResponseLine(BaseModel):
        model_config = ConfigDict(extra="ignore")
        prompt_id: str = Field(min_length=1)
        response: str

    known = {row.prompt_id for row in rows}
    out: dict[str, str] = {}
    src = str(path)
    for lineno, obj in iter_jsonl(path):
        rec = f"line {lineno}"
        try:
            r = ResponseLine.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=rec) from exc
        if r.prompt_id not in known:
            raise InputError(f"prompt_id '{r.prompt_id}' is not in the data file", file=src,
                             record=rec, field="prompt_id")
        if r.prompt_id in out:
            raise InputError(f"duplicate response for prompt_id '{r.prompt_id}'", file=src, record=rec)
        out[r.prompt_id] = r.response
    for row in rows:
        if row.prompt_id not in out:
            raise InputError(f"no response for prompt_id '{row.prompt_id}'", file=src)
    return out


def _print_table(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="HealthBench score (mean, then clipped to [0, 1])")
    table.add_column("metric", overflow="fold")
    table.add_column("score", justify="right")
    table.add_column("bootstrap std", justify="right")
    table.add_column("n", justify="right")
    table.add_row("[bold]overall[/bold]", f"{result['score']:.4f}", f"{result['bootstrap_std']:.4f}",
                  str(result["n_samples"]))
    for tag, m in result["tags"].items():
        table.add_row(tag, f"{m['score']:.4f}", f"{m['bootstrap_std']:.4f}", str(m["n_samples"]))
    Console().print(table)


@app.command()
def score(
    data: Path = typer.Option(..., "--data", help="HealthBench rows (JSONL; Professional format too)"),
    verdicts: Path = typer.Option(..., "--verdicts",
                                  help='JSONL of {"prompt_id", "rubric_index", "criteria_met"}'),
    responses: Path | None = typer.Option(None, "--responses",
                                             help='JSONL of {"prompt_id", "response"}'),
    length_adjust: str | None = typer.Option(
        None, "--length-coefficient",
        help="length-adjustment coefficient p, or a variant name (hard, full, consensus, professional); "
             "needs --responses"),
    n_bootstrap: int = typer.Option(1000, "--resamples", help="bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Score graded rows: per-example achieved/possible, mean, then clip to [0, 1], per tag too.

    Every rubric item of every row needs a verdict; a missing one exits 2 and names it.
    """
    from reward.healthbench.schema import load_healthbench
    from reward.healthbench.scoring import score_healthbench

    try:
        if length_adjust is not None and responses is None:
            raise InputError("--length-coefficient needs --responses (the adjustment uses response length)",
                             field="--length-coefficient")
        p = _length_coefficient(length_adjust) if length_adjust is not None else None
        rows = load_healthbench(data)
        met = _load_verdicts(verdicts, rows)
        texts = _load_responses(responses, rows) if responses is not None else None
        result = score_healthbench(rows, met, texts, p, n_bootstrap=n_bootstrap, seed=seed)
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc
    if as_json:
        typer.echo(json.dumps(result))
    else:
        _print_table(result)
