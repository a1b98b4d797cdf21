"""``rubricstree train data``: training-data converters and hygiene (``training.data_hygiene``).

``medmcqa IN OUT``: MedMCQA JSONL (``opa``..``opd``, ``cop``) -> our MCQ JSONL; ``healthbench-easy
FULL HARD OUT``: the full HealthBench rows minus the Hard ones by prompt_id; ``exclude IN OUT
--against EVAL...``: drop rows whose normalised prompt is in the evaluation files. Each prints
its counts; errors name the file, line and field and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reward.errors import InputError
from rubricstree.errors import fail

app = typer.Typer(no_args_is_help=True, help="Training-data converters and hygiene.")


def _read(path: Path) -> list[dict]:
    from reward.jsonl import iter_jsonl

    return [obj for _, obj in iter_jsonl(path)]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


@app.command("medmcqa")
def medmcqa(src: Path = typer.Argument(..., help="MedMCQA JSONL"), out: Path = typer.Argument(...),
            cop_base: int = typer.Option(0, "--cop-base", help="0: Hugging Face release; 1: original JSON")) -> None:
    """MedMCQA rows -> MCQ rows (question, options A-D, answer_idx) for stages 1-2."""
    from reward.jsonl import iter_jsonl
    from training.data_hygiene import medmcqa_row

    rows = []
    try:
        for lineno, obj in iter_jsonl(src):
            try:
                rows.append(medmcqa_row(obj, cop_base=cop_base))
            except InputError as exc:
                raise InputError(exc.reason, file=str(src), record=f"line {lineno}", field=exc.field) from exc
    except (InputError, ValueError) as exc:
        raise fail(exc, 2) from exc
    _write(out, rows)
    typer.echo(json.dumps({"rows": len(rows), "out": str(out)}))


@app.command("healthbench-easy")
def healthbench_easy_command(full: Path = typer.Argument(...), hard: Path = typer.Argument(...),
                             out: Path = typer.Argument(...)) -> None:
    """HealthBench-Easy: the full rows whose prompt_id is not in Hard."""
    from training.data_hygiene import healthbench_easy

    try:
        full_rows, hard_rows = _read(full), _read(hard)
        rows = healthbench_easy(full_rows, hard_rows)
    except (InputError, KeyError) as exc:
        raise fail(exc, 2) from exc
    _write(out, rows)
    typer.echo(json.dumps({"full": len(full_rows), "hard": len(hard_rows), "easy": len(rows), "out": str(out)}))


@app.command("exclude")
def exclude_command(src: Path = typer.Argument(..., help="training JSONL"), out: Path = typer.Argument(...),
                    against: list[Path] = typer.Option(..., "--against", help="evaluation JSONL (repeatable)")) -> None:
    """Drop training rows whose normalised prompt matches an evaluation row."""
    from training.data_hygiene import drop_overlap, exclusion_hashes

    try:
        rows, dropped = drop_overlap(_read(src), exclusion_hashes(against))
    except InputError as exc:
        raise fail(exc, 2) from exc
    _write(out, rows)
    typer.echo(json.dumps({"kept": len(rows), "dropped": dropped, "out": str(out)}))
