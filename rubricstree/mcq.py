"""``rubricstree mcq``: score multiple-choice completions with the rule reward (1 right, 0 otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError, RubricsTreeError
from rubricstree.errors import fail

app = typer.Typer(no_args_is_help=True)


class CompletionLine(BaseModel):
    """One line of the completions file: ``index`` is the 0-based row number in the data file."""

    model_config = ConfigDict(extra="ignore")

    index: int = Field(ge=0, strict=True)
    completion: str


def _load_completions(path: Path, n_rows: int) -> list[tuple[int, str]]:
    """Read ``(index, completion)`` pairs; an index out of range or seen twice is an input error."""
    from reward.jsonl import iter_jsonl, validation_error

    out: list[tuple[int, str]] = []
    seen: dict[int, int] = {}
    for lineno, obj in iter_jsonl(path):
        where = {"file": str(path), "record": f"line {lineno}"}
        try:
            line = CompletionLine.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc, **where) from exc
        if line.index >= n_rows:
            raise InputError(f"index {line.index} is out of range (the data has {n_rows} rows)",
                             field="index", **where)
        if line.index in seen:
            raise InputError(f"index {line.index} already given on line {seen[line.index]}",
                             field="index", **where)
        seen[line.index] = lineno
        out.append((line.index, line.completion))
    if not out:
        raise InputError("no completions", file=str(path))
    return out


@app.command()
def score(data: Path = typer.Option(..., "--data", help="MCQ rows (JSONL: question, options, answer_idx)"),
          completions: Path = typer.Option(..., "--completions",
                                           help='JSONL lines {"index": row number from 0, "completion": text}'),
          as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Score completions against the keys: accuracy is the mean reward over the completions given;
    a completion with no readable answer is a format failure and scores 0."""
    from reward.stages.mcq import load_mcq, score_mcq

    try:
        rows = load_mcq(data)
        pairs = _load_completions(completions, len(rows))
        result = score_mcq([rows[i] for i, _ in pairs], [c for _, c in pairs])
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc

    if as_json:
        typer.echo(json.dumps(result))
        return
    n = len(result["rewards"])
    correct = int(sum(result["rewards"]))
    typer.echo(f"accuracy: {result['accuracy']:.4f} ({correct}/{n} correct)")
    typer.echo(f"format failures: {result['format_failures']}")
    typer.echo(f"scored {n} of {len(rows)} rows")
