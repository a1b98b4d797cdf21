"""``rubricstree eval``: evaluate checkpoints on HealthBench and on multiple-choice sets, and
compare evaluation folders. Every evaluation is resumable: rerun the same command after a crash.

The work is done in ``training.eval``; this module only parses options (imports stay inside the
commands so ``rubricstree --help`` stays fast).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, folder_option, generate_concurrency_option, quiet_option
from rubricstree.errors import fail as _fail
from rubricstree.guards import check_scored
from rubricstree.judge_options import judge_options

app = typer.Typer(no_args_is_help=True)
COMPARE_PLOT = "compare.png"  # in compare's --out folder


def _console():
    import sys

    from rich.console import Console

    # piped into a log, rich would fold tables to 80 columns; a log has room
    return Console(width=None if sys.stdout.isatty() else 160)


def _check_models(policy: str | None, judge_model: str | None = None) -> None:
    from reward._optional import require_model

    if policy:
        require_model(policy, "--model")
    if judge_model:
        require_model(judge_model, "--judge-model")


def _logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _generation(max_new_tokens: int | None, temperature: float | None, top_p: float | None, seed: int,
                thinking: bool | None, benchmark: str = "healthbench", top_k: int | None = None):
    from training.eval.budgets import default_max_new_tokens, default_sampling
    from training.generation import GenerationSettings

    max_new_tokens = default_max_new_tokens(benchmark, thinking, max_new_tokens)
    return GenerationSettings(max_new_tokens=max_new_tokens, seed=seed, thinking=thinking,
                              **default_sampling(thinking, temperature, top_p, top_k))


def _print_healthbench(m: dict) -> None:
    from rich.table import Table

    console = _console()
    if "comparable_to_published" in m:
        console.print("[bold green]comparable to published HealthBench numbers[/]" if m["comparable_to_published"]
                      else "[bold yellow]not comparable to published numbers:[/] " + "; ".join(m["comparability_notes"]))
    if m["score"] is None:
        console.print(f"[bold red]no example could be scored[/] ({m['n_unscored']} unscored)")
        return
    from training.eval.comparability import decoding_line
    from training.eval.headline import baseline_text, headline_text, published_lines

    console.print(f"[bold]HealthBench score: {headline_text(m)}[/]")
    for line in [baseline_text(m), *published_lines(m), decoding_line(m)]:
        if line:
            console.print(line, markup=False, highlight=False)
    table = Table(title=f"HealthBench: {m['model']} ({m['grading']['mode']} grading, judge {m['grading']['judge_model']})")
    for col, just in (("metric", "left"), ("score", "right"), ("bootstrap std", "right"), ("n", "right")):
        table.add_column(col, justify=just, overflow="fold")
    table.add_row("[bold]overall[/]", f"{m['score']:.4f}", f"{m['bootstrap_std']:.4f}", str(m["n_samples"]))
    if m.get("length_adjusted"):
        la = m["length_adjusted"]
        table.add_row(f"length-adjusted (p={la['p']})", f"{la['score']:.4f}", f"{la['bootstrap_std']:.4f}",
                      str(la["n_samples"]))
    for tag, v in m["tags"].items():
        if tag.startswith(("theme:", "axis:")):
            table.add_row(tag, f"{v['score']:.4f}", f"{v['bootstrap_std']:.4f}", str(v["n_samples"]))
    console.print(table)
    resp = m.get("responses") or {}
    cut = (resp.get("finish_reasons") or {}).get("length", 0)
    if cut:
        console.print(f"[yellow]{cut} of {m['n_scored']} response(s) stopped at --max-new-tokens[/] "
                      f"({resp.get('empty', 0)} with no answer left to grade, e.g. cut off while thinking): "
                      "raise --max-new-tokens, or use --no-thinking")
    if m["n_unscored"]:
        console.print(f"[yellow]{m['n_unscored']} example(s) unscored[/] (excluded; rerun to retry): "
                      + ", ".join(u["prompt_id"] for u in m["unscored"][:5]))


@app.command()
@judge_options(defaults={"mode": "explain"})
def healthbench(
    model: str = typer.Option(..., "--model", help="checkpoint path or name; with --generate-url, the served model name"),
    data: str = typer.Option(..., "--data", help="HealthBench JSONL: a path, an http(s) URL, or hard|consensus|full|easy "
                                                 "(official files, easy = full minus hard; a known file name must have "
                                                 "its published SHA-256)"),
    out: Path = folder_option(..., "--out", "output folder; rerunning the same command resumes", name="metrics.json"),
    generate_url: str | None = typer.Option(None, "--generate-url", help="OpenAI-compatible server serving the "
                                               "checkpoint (vLLM); default: generate in-process with transformers"),
    system_prompt: str = typer.Option("none", "--system-prompt", help="ours | none | handbook:FILE | FILE (the official setting is none)"),
    grader: str = typer.Option("ours", "--grader", help="ours | official (the reference HealthBench grader template, "
                               "fetched at run time and pinned by SHA-256)"),
    length_adjust: bool = typer.Option(False, "--length-adjust", help="also report the length-adjusted score "
                                       "(coefficient of the detected variant, hard when unknown)"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="evaluate the first N rows only"),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="response budget in tokens (default: "
                                                 "16000, the training budget; 2048 with --no-thinking)"),
    temperature: float | None = typer.Option(None, "--temperature", help="0 = greedy; default: thinking models' "
                                                "recommended sampling (0.6) with thinking on or left to the template, "
                                                "greedy with --no-thinking"),
    top_p: float | None = typer.Option(None, "--top-p", help="default 0.95 when sampling by default, else 1.0"),
    top_k: int | None = typer.Option(None, "--top-k", min=1, help="default 20 when sampling by default, else off"),
    seed: int = typer.Option(0, "--seed", help="sampling and bootstrap seed"),
    thinking: bool | None = typer.Option(None, "--thinking/--no-thinking", help="chat template enable_thinking "
                                            "(default: the template's own default)"),
    baseline: Path | None = typer.Option(None, "--baseline", help="an earlier evaluation folder on the same data: "
                                         "the report adds the difference and its paired 95% bootstrap interval; refused "
                                         "(exit 2) when another grader or other grading settings graded it"),
    concurrency: int = generate_concurrency_option(32),
    min_scored: float = typer.Option(0.0, "--min-scored", min=0.0, max=1.0,
                                     help="exit 3 when a smaller fraction of examples is scored (always when none is)"),
    batch_size: int = typer.Option(8, "--batch-size", help="in-process generation batch size"),
    judge_passes: int = typer.Option(2, "--judge-passes", help="grading passes per run; later passes retry "
                                     "items whose judge call failed"),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="share verdicts through the durable verdict cache"),
    worst: int = typer.Option(10, "--worst", help="lowest-scoring examples shown in the report"),
    wandb: bool = typer.Option(False, "--wandb", help="log metrics to Weights & Biases (offline without an API key)"),
    as_json: bool = typer.Option(False, "--json", help="print metrics.json instead of a table"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options); explain mode by default
) -> None:
    """Generate with a checkpoint, grade every rubric item with the judge, score like HealthBench.

    Writes OUT/generations.jsonl and OUT/verdicts.jsonl as results arrive, then OUT/metrics.json,
    OUT/report.md, OUT/report.html and plots. Examples whose generation or grading failed are
    reported as unscored (excluded and counted); rerun the command to retry them.
    """
    from pydantic import ValidationError

    apply_quiet(quiet)
    _logging()
    try:
        _check_models(None if generate_url else model, None if judge.url else judge.model)  # at once, before torch is imported
        from training.eval.healthbench import HealthBenchEvalConfig, run_healthbench

        if not judge.url and not judge.model:
            raise RubricsTreeError("give a judge: --judge-url URL (a vLLM server) or --judge-model PATH (in-process)")
        cfg = HealthBenchEvalConfig(
            model=model, data=data, out=out, generate_url=generate_url, judge=judge.model_copy(update={"cache": cache}),
            system_prompt=system_prompt, grader=grader, length_adjust=length_adjust, limit=limit,
            generation=_generation(max_new_tokens, temperature, top_p, seed, thinking, top_k=top_k),
            baseline=str(baseline) if baseline else None, concurrency=concurrency, batch_size=batch_size,
            judge_passes=judge_passes, seed=seed, worst=worst, wandb=wandb)
        metrics = run_healthbench(cfg)
    except (RubricsTreeError, ValidationError, FileNotFoundError, ValueError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(metrics, indent=2))
    else:
        _print_healthbench(metrics)
        typer.echo(f"report: {out / 'report.html'}")
    check_scored(metrics["n_scored"], metrics["n_scored"] + metrics["n_unscored"], min_scored, "examples")


@app.command()
def mcq(
    model: str = typer.Option(..., "--model", help="checkpoint path or name; with --generate-url, the served model name"),
    data: Path = typer.Option(..., "--data", help="multiple-choice JSONL (MedQA, MedBullets or MedXpertQA)"),
    out: Path = folder_option(..., "--out", "output folder; rerunning the same command resumes", name="metrics.json"),
    fmt: str | None = typer.Option(None, "--format", help="medqa | medbullets | medxpertqa (default: detected)"),
    generate_url: str | None = typer.Option(None, "--generate-url", help="OpenAI-compatible server (vLLM)"),
    system_prompt: str = typer.Option("none", "--system-prompt", help="ours | none | handbook:FILE | FILE"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="evaluate the first N rows only"),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="default: 10000 (the training "
                                                 "budget); 1024 with --no-thinking"),
    temperature: float | None = typer.Option(None, "--temperature", help="0 = greedy; default: thinking models' "
                                                "recommended sampling (0.6) with thinking on or left to the template, "
                                                "greedy with --no-thinking"),
    top_p: float | None = typer.Option(None, "--top-p", help="default 0.95 when sampling by default, else 1.0"),
    top_k: int | None = typer.Option(None, "--top-k", min=1, help="default 20 when sampling by default, else off"),
    seed: int = typer.Option(0, "--seed", help="sampling seed"),
    thinking: bool | None = typer.Option(None, "--thinking/--no-thinking", help="chat template enable_thinking "
                                            "(default: the template's own default)"),
    concurrency: int = generate_concurrency_option(32),
    batch_size: int = typer.Option(8, "--batch-size", help="in-process generation batch size"),
    wandb: bool = typer.Option(False, "--wandb", help="log metrics to Weights & Biases (offline without an API key)"),
    as_json: bool = typer.Option(False, "--json", help="print metrics.json"),
    quiet: bool = quiet_option(),
) -> None:
    """Accuracy on a multiple-choice set with the MCQ rule extraction, format failures counted,
    and a per-category breakdown where the data has categories."""
    from pydantic import ValidationError

    apply_quiet(quiet)
    _logging()
    try:
        _check_models(None if generate_url else model)
        from training.eval.mcq import MCQEvalConfig, run_mcq

        cfg = MCQEvalConfig(model=model, data=data, out=out, format=fmt, generate_url=generate_url,
                            system_prompt=system_prompt, limit=limit,
                            generation=_generation(max_new_tokens, temperature, top_p, seed, thinking, "mcq", top_k),
                            concurrency=concurrency, batch_size=batch_size, wandb=wandb)
        m = run_mcq(cfg)
    except (RubricsTreeError, ValidationError, FileNotFoundError, ValueError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(m, indent=2))
        return
    acc = "n/a" if m["accuracy"] is None else f"{m['accuracy']:.4f}"
    typer.echo(f"accuracy: {acc} ({m['correct']}/{m['n_scored']} correct); format failures: "
               f"{m['format_failures']}; unscored: {m['n_unscored']}")
    for field, values in m["categories"].items():
        for value, v in values.items():
            typer.echo(f"  {field}={value}: {v['accuracy']:.4f} (n={v['n']})")
    typer.echo(f"report: {out / 'report.html'}")


@app.command()
def compare(
    dirs: list[Path] = typer.Argument(..., help="evaluation folders; the first is the baseline"),
    out: Path = folder_option(Path("."), "--out", f"output folder: the plot, {COMPARE_PLOT}", name=COMPARE_PLOT),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    length_adjusted: bool = typer.Option(False, "--length-adjusted", help="compare length-adjusted HealthBench scores"),
    resamples: int = typer.Option(1000, "--resamples", help="paired bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="paired bootstrap seed"),
    published: bool = typer.Option(False, "--published", help="draw published figures of this benchmark "
                                   "(training/eval/published.yaml) as dashed lines, marked as copied"),
    published_file: Path | None = typer.Option(None, "--published-file", help="another published-figures YAML"),
) -> None:
    """A table across checkpoints and a plot, with a paired bootstrap (per example id) of each
    folder's difference from the first: mean difference and 95% interval."""
    from reward._optional import is_available
    from training.eval.compare import compare_plot, compare_runs

    try:
        result = compare_runs(dirs, n_resamples=resamples, seed=seed, length_adjusted=length_adjusted)
        if published or published_file:
            from training.eval.compare import attach_published

            attach_published(result, dirs[0], published_file)
    except RubricsTreeError as exc:
        raise _fail(exc) from exc
    if is_available("matplotlib"):
        out.mkdir(parents=True, exist_ok=True)
        result["plot"] = str(compare_plot(result, out / COMPARE_PLOT))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{result['benchmark']}: difference vs {result['baseline']} "
                        f"(paired bootstrap, {resamples} resamples)")
    for col in ("folder", "model", "score", "std", "n", "unscored", "diff vs first", "95% CI", "paired n"):
        table.add_column(col, justify="left" if col in ("folder", "model") else "right", overflow="fold")
    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    for r in result["runs"]:
        d = r.get("diff")
        table.add_row(r["dir"], str(r["model"]), fmt(r["score"]), fmt(r["std"]), str(r["n"]), str(r["n_unscored"]),
                      "baseline" if d is None else (f"{d['mean_diff']:+.4f}" if d["mean_diff"] is not None else "n/a"),
                      "" if d is None or d["ci95"] is None else f"[{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]",
                      "" if d is None else str(d["n_paired"]))
    console = _console()
    console.print(table)
    for ref in result.get("published") or []:
        console.print(f"published (copied): {ref['model']} {ref['score']:.3f}, grader {ref['grader']}, "
                      f"{ref['setting']} [{ref['source']}]")
    for w in result["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    if "plot" in result:
        typer.echo(f"plot: {result['plot']}")
