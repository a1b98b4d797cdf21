"""``rubricstree train plan``: the per-GPU memory plan of a TRL or verl training config.

Reads the config (:func:`training.memory_plan.plan_input_from_config`), estimates the memory per
GPU by term (:func:`training.memory_plan.plan`) and prints it (``--json``: one object with
``fits``, ``per_gpu_gb``, ``largest``, ``master_weights_dtype``, ``sharding``). Exit 0 when it
fits, 3 when it does not (the message names the largest term and the setting to change), 2 on a
bad config. ``--print-judge-args`` prints the judge server's vLLM arguments as planned (one per
line, exit 0), for ``scripts/train.sh``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from rubricstree.errors import bounded

NOT_FITTING = 3


def plan_command(
    config: Path = typer.Argument(..., help="configs/trl/*.yaml or configs/verl/*.yaml"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="GPUs on the machine (training + judge)"),
    gpu_memory_gb: float = typer.Option(..., "--gpu-memory-gb", min=1.0, help="memory of one GPU (GiB)"),
    judge_gpus: int = typer.Option(0, "--judge-gpus", min=0, help="GPUs of --gpus that serve the judge"),
    sharding: str = typer.Option("fsdp2", "--sharding", help="TRL: fsdp2 | zero3 | none (DDP)"),
    judge_model: str | None = typer.Option(None, "--judge-model", help="default: the config's judge.model"),
    set_: list[str] = typer.Option([], "--set", help="override a config key (repeatable)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    print_judge_args: bool = typer.Option(False, "--print-judge-args", help="print the judge's vLLM args"),
) -> None:
    """Estimate the memory per GPU of a training run; exit 3 when it does not fit."""
    from training.judge_server import judge_vllm_args
    from training.memory_plan import plan, plan_input_from_config

    if sharding not in ("fsdp2", "zero3", "none"):
        raise typer.BadParameter("--sharding must be fsdp2, zero3 or none")
    try:
        pin = plan_input_from_config(config, list(set_), sharding=sharding, judge_model=judge_model)  # type: ignore[arg-type]
        result = plan(pin, gpus=gpus, gpu_memory_gb=gpu_memory_gb, judge_gpus=judge_gpus)
    except RubricsTreeError as exc:
        typer.echo(f"error: {bounded(str(exc))}", err=True)
        raise typer.Exit(2) from exc
    if print_judge_args:  # exit 0: the fit is the plain command's to judge
        typer.echo("\n".join(judge_vllm_args(pin.judge, judge_gpus)))
        return
    if as_json:
        typer.echo(json.dumps(result.model_dump()))
    else:
        typer.echo(f"{bounded(pin.model)} ({pin.trainer}, sharding {result.sharding}) on {result.train_gpus} training + "
                   f"{judge_gpus} judge GPUs of {gpu_memory_gb:g} GiB; master weights float32")
        for name, gib in result.per_gpu_gb.items():
            typer.echo(f"  {name:18s} {gib:8.2f} GiB")
        typer.echo("  totals: " + ", ".join(f"{k} {v:.1f} GiB" for k, v in result.totals_gb.items()))
        if result.vllm_sequences is not None:
            typer.echo(f"  colocated vLLM holds {result.vllm_sequences} full-length sequence(s) at once")
        typer.echo(f"fits: {result.fits} (largest: {result.largest})")
    if not result.fits:
        for text in result.problems:
            typer.echo(f"does not fit: {bounded(text)}", err=True)
        raise typer.Exit(NOT_FITTING)
